// One kernel launch of a plan: the program (shared through the program cache), the graph value
// bound to each buffer argument, and the launch's scalar arguments; or, when its buffers do not
// fit one launch's 4 GiB address window, the same program launched once per piece of the work.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "isa/program.h"
#include "kernels/graph/shared_cache.h"

namespace vtpu::kernels {

// Programs keyed by a stable signature of the kernel spec and chip. Thread-safe.
using ProgramCache = SharedCache<isa::Program>;

// A piece of a launch's work run as a device launch of its own: each buffer argument narrowed to
// a byte range of its value, and the scalars that size the piece.
struct LaunchPiece {
  struct Range {
    uint64_t offset = 0, bytes = 0;
  };
  std::vector<Range> ranges;     // one per buffer argument
  std::vector<int32_t> scalars;  // replaces Launch::scalars
};

struct Launch {
  std::shared_ptr<const isa::Program> program;
  std::vector<int> args;  // the value bound to each buffer argument
  std::vector<int32_t> scalars;  // the scalar arguments that follow the buffers (a row count)
  std::string label;      // the fused nodes, e.g. "matmul+add+gelu"
  bool cache_hit = false;
  // Empty: one launch over whole buffers. Otherwise one device launch per piece, in order (a
  // streaming kernel over more than the window holds: kernels/graph/window_pieces.h).
  std::vector<LaunchPiece> pieces;
};

}  // namespace vtpu::kernels
