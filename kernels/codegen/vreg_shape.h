// The vector register's shape as every generator tiles for it: 8 sublanes x 128 lanes of 32-bit
// words, on every TPU generation vtpu models.
#pragma once

#include <cstdint>

namespace vtpu::kernels {

inline constexpr int kLanes = 128;
inline constexpr int kSublanes = 8;

inline constexpr int64_t round_up(int64_t x, int64_t multiple) { return (x + multiple - 1) / multiple * multiple; }

}  // namespace vtpu::kernels
