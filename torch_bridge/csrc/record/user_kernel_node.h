// A user's kernel (vtpu.pallas) in the bridge: its failures described in the body's terms.
#pragma once

#include <string>

#include "isa/program.h"

namespace vtpu::bridge {

// "(vtpu.pallas: kernel 'name', in the body's statement at file:line, at grid index (i, j))" for
// `what`, the chip's error from `program`, a user kernel the front end noted; "" for any other.
std::string user_kernel_failure_note(const isa::Program* program, const std::string& what);

}  // namespace vtpu::bridge
