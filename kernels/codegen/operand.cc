// Launch scalars and mnemonics of streamed operands (operand.h).
#include "kernels/codegen/operand.h"

#include <fmt/format.h>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {

std::vector<int32_t> stream_scalars(int64_t rows, int64_t cols, const std::vector<Operand>& inputs) {
  if (rows < 1 || cols < 1 || rows * cols >= (int64_t{1} << 31)) throw KernelError(fmt::format("a launch of {} x {} elements", rows, cols));
  std::vector<int32_t> out{int32_t(rows), int32_t(cols)};
  for (const auto& in : inputs) {
    if (in.layout != Layout::Periodic) continue;
    if (in.period_rows <= 0 || in.period_rows % kSublanes != 0 || in.period_rows > rows) {
      throw KernelError(fmt::format("a periodic operand of {} rows needs a period that is a multiple of 8", in.period_rows));
    }
    out.push_back(int32_t(in.period_rows));
  }
  for (const auto& in : inputs) {
    if (!in.strided) continue;
    if (in.layout != Layout::Full || in.row_stride < cols || in.offset < 0 || in.offset + (rows - 1) * in.row_stride + cols >= (int64_t{1} << 31)) {
      throw KernelError(fmt::format("a strided operand with rows {} elements apart from element {}", in.row_stride, in.offset));
    }
    out.push_back(int32_t(in.row_stride));
    out.push_back(int32_t(in.offset));
  }
  return out;
}

std::vector<int32_t> flat_stream_scalars(int64_t elements, int64_t width) {
  if (elements < 1 || width < 1 || elements >= (int64_t{1} << 31)) throw KernelError(fmt::format("a flat launch of {} elements", elements));
  return {int32_t((elements + width - 1) / width), int32_t(width), int32_t(elements)};
}

ValueType register_type(DType dtype) {
  return dtype_is_float(dtype) ? ValueType::F32 : ValueType::I32;
}

const char* load_mnemonic(DType dtype) {
  if (dtype == DType::F16) return "vld.f16";
  if (dtype == DType::U8) return "vld.u8";  // zero-extended; stores keep the low byte, as for int8
  switch (dtype_bytes(dtype)) {
    case 2: return "vld.bf16";
    case 1: return "vld.i8";
    default: return "vld";
  }
}

const char* store_mnemonic(DType dtype) {
  if (dtype == DType::F16) return "vst.f16";
  switch (dtype_bytes(dtype)) {
    case 2: return "vst.bf16";
    case 1: return "vst.i8";
    default: return "vst";
  }
}

}  // namespace vtpu::kernels
