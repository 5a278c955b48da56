// int32 values wrapped to an 8-bit dtype's range, as C's conversion (and so torch's int8 and
// uint8 arithmetic) does: the chip's own int32 -> int8 cast saturates instead.
#pragma once

#include <string>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// The low byte of each int32 value, as 0..255 (uint8) or -128..127 (int8), still int32.
inline int wrap_to_byte(Graph& g, int x, bool is_signed, const std::string& label) {
  const int byte = g.byte_of(x, 0, label);
  if (!is_signed) return byte;
  return g.binary_scalar(ExprOp::Sub, g.binary_scalar(ExprOp::BitXor, byte, 128, false, label), 128, false, label);
}

}  // namespace vtpu::kernels
