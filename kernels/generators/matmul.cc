// The matmul generator's entry points; the generator itself is matmul_builder.h (schedule in
// matmul_schedule.h).
#include "kernels/generators/matmul.h"

#include <fmt/format.h>

#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/matmul_builder.h"
#include "kernels/generators/matmul_schedule.h"

namespace vtpu::kernels {
namespace matmul_detail {

MatmulBuilder::MatmulBuilder(const MatmulSpec& spec, const sim::ChipConfig& chip, bool overlap_passes)
    : MatmulSchedule(spec, chip, overlap_passes), w_("matmul") {
  // In the order matmul.h documents: A, B, the epilogue inputs, C, then M, N and K.
  a_arg_ = w_.argument("a", isa::ArgumentKind::Buffer);
  b_arg_ = w_.argument("b", isa::ArgumentKind::Buffer);
  for (size_t i = 0; i < epilogue_.size(); ++i) {
    epilogue_[i].arg = w_.argument(fmt::format("epilogue{}", i), isa::ArgumentKind::Buffer);
  }
  c_arg_ = w_.argument("c", isa::ArgumentKind::Buffer);
  m_arg_ = w_.argument("m", isa::ArgumentKind::Scalar);
  n_arg_ = w_.argument("n", isa::ArgumentKind::Scalar);
  k_arg_ = w_.argument("k", isa::ArgumentKind::Scalar);
  m_pitch_arg_ = w_.scratch_argument();
  n_pitch_arg_ = w_.scratch_argument();
}

isa::Program MatmulBuilder::build() {
  emit();
  w_.target_mxu(chip_.mxu_dim);
  w_.split_across_cores();
  return w_.assemble();
}

}  // namespace matmul_detail

int passes_for_precision(std::string_view precision) {
  if (precision == "highest") return 6;
  if (precision == "high") return 3;
  if (precision == "medium") return 1;
  throw KernelError(fmt::format("unknown float32 matmul precision '{}' (highest, high or medium)", precision));
}

isa::Program make_matmul(const MatmulSpec& spec, const sim::ChipConfig& chip) {
  try {
    return matmul_detail::MatmulBuilder(spec, chip, /*overlap_passes=*/true).build();
  } catch (const RegisterShortage&) {  // many epilogue operands: the plainer schedule holds fewer
    return matmul_detail::MatmulBuilder(spec, chip, /*overlap_passes=*/false).build();
  }
}

std::vector<int32_t> matmul_scalars(const MatmulSpec& spec, const sim::ChipConfig& chip, int64_t m, int64_t n, int64_t k) {
  const int64_t d = chip.mxu_dim, k_pad = round_up(spec.k, d);
  if (m < 1 || m > spec.m || n < 1 || n > spec.n || k <= k_pad - d || k > spec.k) {
    throw KernelError(fmt::format("matmul: a launch of {}x{}x{} does not fit a program for {}x{}x{}", m, n, k, spec.m, spec.n, spec.k));
  }
  return {int32_t(m), int32_t(n), int32_t(k)};
}

int64_t matmul_max_k(MatmulSpec spec, const sim::ChipConfig& chip, bool full_size_blocks) {
  const auto fits = [&](int64_t k) {
    spec.k = k;
    try {
      const MatmulSchedule schedule(spec, chip, /*overlap_passes=*/true);
      return !full_size_blocks || schedule.full_size_blocks();
    } catch (const KernelError&) {
      return false;
    }
  };
  const int64_t d = chip.mxu_dim, k = spec.k;
  if (fits(k)) return k;
  int64_t lo = 0, hi = round_up(k, d) / d;  // in MXU slices: lo fits (or is 0), hi does not
  while (hi - lo > 1) {
    const int64_t mid = (lo + hi) / 2;
    (fits(mid * d) ? lo : hi) = mid;
  }
  return lo * d;
}

}  // namespace vtpu::kernels
