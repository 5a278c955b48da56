// Users' kernels (vtpu.pallas, vtpu.assembly) by their source: each assembled once, the program
// living as long as the process (plan signatures name it), and what the front end noted of it
// (the body's line per instruction, the grid), so a failure names the body's statement and the
// grid step whether the kernel ran at once or at a flush.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "isa/program.h"

namespace vtpu::bridge {

// The program `source` assembles to; a ValueError naming the assembler's error if it does not.
std::shared_ptr<const isa::Program> program_of(const std::string& source);

// `lines`: per instruction of `source`, the body's file:line ("" for the grid loop and pipeline).
void note_user_kernel_source(const std::string& source, const std::string& name, const std::vector<std::string>& lines,
                             const std::vector<int64_t>& grid);

// "(vtpu.pallas: kernel 'name', in the body's statement at file:line, at grid index (i, j))" for
// `what`, the chip's error from a noted kernel (by its source, or its program at a flush); "" for
// any other.
std::string user_kernel_failure_note(const std::string& source, const std::string& what);
std::string user_kernel_failure_note(const isa::Program* program, const std::string& what);

}  // namespace vtpu::bridge
