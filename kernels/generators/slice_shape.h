// The slice a collective kernel runs over, as kernels see it: chips per axis (ranks row-major) and
// which axes wrap around (from sim::Slice, which decides it per generation; kernels do not link
// the simulator).
#pragma once

#include <vector>

namespace vtpu::kernels {

struct SliceShape {
  std::vector<int> axes;
  std::vector<bool> wraps;
};

}  // namespace vtpu::kernels
