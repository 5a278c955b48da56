// Closed-form lower bounds on simulated time for kernels: max(compute at the chip's peak, the
// minimum HBM traffic at the sustained bandwidth: hbm_efficiency of the published peak, the most
// the modelled chip's DMAs move). Tests and benchmarks judge generated kernels by these; no kernel
// may beat them.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/attention/attention.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct Bound {
  double compute_s = 0;
  double memory_s = 0;
  double seconds() const { return std::max(compute_s, memory_s); }
};

// C[b] (M x N) = A[b] (M x K) @ B (K x N): each operand read once, C written once.
inline Bound matmul_bound(const sim::ChipConfig& chip, int64_t batch, int64_t m, int64_t n, int64_t k, DType a, DType b,
                          DType c, bool b_shared = false, int passes = 1, int cores = 1) {
  const double flops = 2.0 * batch * m * n * k * passes;
  const double bytes = double(batch) * m * k * dtype_bytes(a) + double(b_shared ? 1 : batch) * k * n * dtype_bytes(b) +
                       double(batch) * m * n * dtype_bytes(c);
  return {flops / chip.model_peak_flops(cores), bytes / chip.sustained_hbm_bytes_per_s()};
}

// An elementwise or reduction pass: only the bytes bound applies (the VPU is never the limit
// at the roofline's resolution).
inline Bound streaming_bound(const sim::ChipConfig& chip, double bytes) {
  return {0, bytes / chip.sustained_hbm_bytes_per_s()};
}

// Fused attention: q, k and v read once, out (and lse) written once; the two products (only the
// (query, key) pairs a causal mask keeps) at the chip's peak, once per MXU pass.
inline Bound attention_bound(const sim::ChipConfig& chip, const AttentionSpec& s, int cores = 1) {
  const int passes = s.dtype == DType::F32 ? s.passes : 1;
  const double io = double(s.batch) * s.head_dim * dtype_bytes(s.dtype);
  const double bytes = io * (2.0 * s.q_len + 2.0 * s.kv_len) + (s.write_lse ? 4.0 * s.batch * s.q_len : 0.0);
  return {attention_flops(s) * passes / chip.model_peak_flops(cores), bytes / chip.sustained_hbm_bytes_per_s()};
}

// Its backward: q, k, v, out, dout and lse read once, dq, dk and dv written once; five products
// (scores, dout v^T, p^T dout, ds k, ds^T q) at peak, 2.5x the forward's FLOPs, times the MXU
// passes of f32 inputs.
inline Bound attention_backward_bound(const sim::ChipConfig& chip, const AttentionSpec& s, int cores = 1) {
  const int passes = s.dtype == DType::F32 ? s.passes : 1;
  const double io = double(s.batch) * s.head_dim * dtype_bytes(s.dtype);
  const double bytes = io * (6.0 * s.q_len + 4.0 * s.kv_len) + 4.0 * s.batch * s.q_len;
  return {2.5 * attention_flops(s) * passes / chip.model_peak_flops(cores), bytes / chip.sustained_hbm_bytes_per_s()};
}

}  // namespace vtpu::kernels
