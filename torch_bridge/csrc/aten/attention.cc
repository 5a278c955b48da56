// scaled_dot_product_attention on the fused kernel (kernels/attention/attention.h). torch asks a backend
// which implementation to run through _fused_sdp_choice_stub: this one answers OVERRIDEABLE when
// the kernel serves the call (no mask tensor, no dropout, one head dim, f32 or bf16, a head that
// fits VMEM) and MATH otherwise, so torch decomposes it into ops lowered one by one. The
// overrideable forward returns the attention and its logsumexp; its backward recomputes the
// probabilities from the logsumexp, in the fused backward kernel where it serves the call (one
// MXU pass: bf16, or f32 at precision 'medium'), else composed (kernels/attention/attention_grad.h).
//
// The kernel writes the attention and the logsumexp into one buffer (a graph value has one
// output) and the backward's three gradients are concatenated into one: the tensors returned
// are views of those buffers.
#include <ATen/ATen.h>
#include <ATen/native/DispatchStub.h>
#include <ATen/native/transformers/attention.h>
#include <ATen/native/transformers/sdp_utils_cpp.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_grad.h"
#include "kernels/generators/matmul.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::Graph;

// q [..., S, E], k and v [..., T, E] seen as [batch, S, E] and [batch, T, E].
struct Shape {
  int64_t batch = 1, s = 0, t = 0, e = 0;
  std::vector<int64_t> lead;  // the dims batch multiplies
  explicit Shape(const at::Tensor& q, const at::Tensor& k) : s(q.size(-2)), t(k.size(-2)), e(q.size(-1)) {
    for (int64_t d = 0; d + 2 < q.dim(); ++d) {
      lead.push_back(q.size(d));
      batch *= q.size(d);
    }
  }
  std::vector<int64_t> with(std::initializer_list<int64_t> tail) const {
    std::vector<int64_t> v = lead;
    v.insert(v.end(), tail);
    return v;
  }
};

double scale_of(std::optional<double> scale, int64_t head_dim) {
  return scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
}

kernels::AttentionSpec spec_of(const Shape& sh, c10::ScalarType dtype, bool causal, double scale) {
  kernels::AttentionSpec spec;
  spec.batch = sh.batch;
  spec.q_len = sh.s;
  spec.kv_len = sh.t;
  spec.head_dim = sh.e;
  spec.dtype = dtype == at::kBFloat16 ? kernels::DType::BF16 : kernels::DType::F32;
  spec.causal = causal;
  spec.scale = scale;
  spec.passes = kernels::passes_for_precision(Runtime::get().matmul_precision());
  return spec;
}

// Empty when the fused kernel runs this call, else why not.
std::string unsupported(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool has_mask, double dropout_p,
                        bool enable_gqa) {
  if (has_mask) return "an attention mask";
  if (dropout_p > 0) return "dropout";
  // torch.compile(dynamic=True) traces with symbolic sizes: the kernel's limits (VMEM, head dim)
  // need concrete ones, so such a trace takes the math path, which the compiled backend lowers.
  for (const at::Tensor* t : {&q, &k, &v}) {
    if (t->unsafeGetTensorImpl()->has_symbolic_sizes_strides()) return "symbolic sizes (a dynamic-shape trace)";
  }
  if (q.dim() < 3 || q.dim() > 4 || k.dim() != q.dim() || v.dim() != q.dim()) return "inputs other than 3-D or 4-D of one rank";
  if (q.scalar_type() != k.scalar_type() || q.scalar_type() != v.scalar_type()) return "inputs of different dtypes";
  if (q.scalar_type() != at::kFloat && q.scalar_type() != at::kBFloat16) return "dtypes other than f32 and bf16";
  if (!k.sizes().equals(v.sizes())) return "keys and values of different shapes";
  for (int64_t d = 0; d + 2 < q.dim(); ++d) {
    if (q.size(d) != k.size(d)) return enable_gqa ? "grouped-query attention" : "batch or head dims that differ";
  }
  if (q.size(-1) != k.size(-1)) return "queries and keys of different head dims";
  if (q.numel() == 0 || k.numel() == 0) return "empty inputs";
  const Shape sh(q, k);
  return kernels::attention_unsupported(spec_of(sh, q.scalar_type(), false, 1.0), Runtime::get().device(q.device().index()).chip());
}

int64_t tpu_fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const std::optional<at::Tensor>& attn_mask, double dropout_p, bool /*is_causal*/,
                             std::optional<double> /*scale*/, bool enable_gqa) {
  const bool fused = unsupported(q, k, v, attn_mask && attn_mask->defined(), dropout_p, enable_gqa).empty();
  return static_cast<int64_t>(fused ? sdp::SDPBackend::overrideable : sdp::SDPBackend::math);
}

// The kernel's packed output on the CPU (the fallback path): the attention's bytes as f32 words,
// then the logsumexp.
at::Tensor pack(const at::Tensor& out, const at::Tensor& lse) {
  at::Tensor flat = out.contiguous().view({-1});
  if (flat.scalar_type() != at::kFloat) {
    if (flat.numel() % 2) flat = at::cat({flat, flat.new_zeros({1})});
    flat = flat.view(at::kFloat);
  }
  return at::cat({flat, lse.contiguous().view({-1}).to(at::kFloat)});
}

// `dense` (a contiguous result) in the layout torch's meta functions give the result, `layout`
// (what torch.compile traced its views against): a device copy when the strides differ.
at::Tensor in_layout(const at::Tensor& layout, const at::Tensor& dense) {
  if (layout.strides() == dense.strides()) return dense;
  at::Tensor r = at::empty_strided(layout.sizes(), layout.strides(), dense.options());
  r.copy_(dense);
  return r;
}

// The output layout of torch's meta function for the overrideable forward (alloc_with_matching_
// layout): the query's, made dense with heads and positions swapped first.
at::Tensor output_layout(const at::Tensor& q) {
  return at::empty_like(q.transpose(1, 2), q.options().device(at::kMeta)).transpose(1, 2);
}

// q k^T * scale in f32 with the causal mask applied (-inf above the diagonal), on the CPU.
at::Tensor cpu_scores(const at::Tensor& q, const at::Tensor& k, bool causal, double scale) {
  at::Tensor s = at::matmul(q.to(at::kFloat), k.to(at::kFloat).transpose(-2, -1)) * scale;
  if (causal) {
    const at::Tensor keep = at::ones({q.size(-2), k.size(-2)}, q.options().dtype(at::kBool)).tril();
    s = s.masked_fill(keep.logical_not(), -std::numeric_limits<double>::infinity());
  }
  return s;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
tpu_sdpa_overrideable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& attn_bias,
                      double dropout_p, bool is_causal, bool /*return_debug_mask*/, std::optional<double> scale_opt) {
  const std::string why = unsupported(q, k, v, attn_bias && attn_bias->defined(), dropout_p, false);
  TORCH_CHECK(why.empty(), "vtpu: the fused attention kernel does not run ", why, " (torch should have chosen the math path)");
  const Shape sh(q, k);
  const double scale = scale_of(scale_opt, sh.e);
  const kernels::AttentionSpec spec = spec_of(sh, q.scalar_type(), is_causal, scale);
  const CpuFn cpu = [is_causal, scale](const std::vector<at::Tensor>& c) {
    const at::Tensor s = cpu_scores(c[0], c[1], is_causal, scale);
    const at::Tensor lse = s.logsumexp(-1);
    return pack(at::matmul((s - lse.unsqueeze(-1)).exp(), c[2].to(at::kFloat)).to(c[0].scalar_type()), lse);
  };
  const at::Tensor packed = record("_scaled_dot_product_fused_attention_overrideable", {q, k, v}, at::kFloat,
                                   [&](Graph& g, const std::vector<int>& val) {
    const int q3 = g.reshape(val[0], {sh.batch, sh.s, sh.e}), k3 = g.reshape(val[1], {sh.batch, sh.t, sh.e}),
              v3 = g.reshape(val[2], {sh.batch, sh.t, sh.e});
    return g.attention(q3, k3, v3, is_causal, scale, spec.passes, true, "scaled_dot_product_attention");
  }, cpu);
  const int64_t lse_word = kernels::attention_lse_offset(spec) / 4, n = sh.batch * sh.s * sh.e;
  at::Tensor out = packed.narrow(0, 0, lse_word);
  if (q.scalar_type() != at::kFloat) out = out.view(q.scalar_type()).narrow(0, 0, n);
  out = in_layout(output_layout(q), out.view(sh.with({sh.s, sh.e})));
  // [B, H, S] as torch's meta gives it (B = 1 for 3-D inputs)
  const at::Tensor lse = packed.narrow(0, lse_word, sh.batch * sh.s).view({q.dim() == 4 ? q.size(0) : 1, q.size(-3), sh.s});
  const at::Tensor none = at::empty({0}, q.options().dtype(at::kLong));
  return {out, lse, at::Tensor(), at::Tensor(), c10::SymInt(sh.s), c10::SymInt(sh.t), none, none, at::Tensor()};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> tpu_sdpa_overrideable_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& attn_bias,
    std::array<bool, 4> /*grad_input_mask*/, const at::Tensor& out, const at::Tensor& logsumexp, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/, std::optional<double> scale_opt) {
  TORCH_CHECK(!attn_bias.defined() && dropout_p == 0, "vtpu: the fused attention backward takes no mask and no dropout");
  const Shape sh(q, k);
  const double scale = scale_of(scale_opt, sh.e);
  const int passes = kernels::passes_for_precision(Runtime::get().matmul_precision());
  const int64_t nq = q.numel(), nk = k.numel();
  const CpuFn cpu = [is_causal, scale](const std::vector<at::Tensor>& c) {
    const at::Tensor dout = c[0].to(at::kFloat), q = c[1].to(at::kFloat), k = c[2].to(at::kFloat), v = c[3].to(at::kFloat);
    const at::Tensor p = (cpu_scores(q, k, is_causal, scale) - c[5].unsqueeze(-1)).exp();
    const at::Tensor dv = at::matmul(p.transpose(-2, -1), dout);
    const at::Tensor ds = p * (at::matmul(dout, v.transpose(-2, -1)) - (dout * c[4].to(at::kFloat)).sum(-1, true));
    const at::Tensor dq = at::matmul(ds, k) * scale, dk = at::matmul(ds.transpose(-2, -1), q) * scale;
    return at::cat({dq.reshape({-1}), dk.reshape({-1}), dv.reshape({-1})}).to(c[1].scalar_type());
  };
  const at::Tensor packed = record("_scaled_dot_product_fused_attention_overrideable_backward",
                                   {grad_out, q, k, v, out, logsumexp}, q.scalar_type(),
                                   [&](Graph& g, const std::vector<int>& val) {
    const auto three = [&](int x, int64_t len) { return g.reshape(x, {sh.batch, len, sh.e}); };
    // the logsumexp as the forward returned it ([B, H, S]) holds [batch, S]
    return kernels::attention_gradients(g, three(val[1], sh.s), three(val[2], sh.t), three(val[3], sh.t), three(val[4], sh.s),
                                        g.reshape(val[5], {sh.batch, sh.s}), three(val[0], sh.s), is_causal, scale, passes,
                                        Runtime::get().device(q.device().index()).chip());
  }, cpu);
  // torch's meta gives each gradient empty_like(its input)
  const auto grad = [&](const at::Tensor& x, int64_t at) {
    return in_layout(at::empty_like(x, x.options().device(at::kMeta)), packed.narrow(0, at, x.numel()).view(x.sizes()));
  };
  return {grad(q, 0), grad(k, nq), grad(v, nq + nk), at::Tensor()};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", tpu_fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", tpu_sdpa_overrideable);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", tpu_sdpa_overrideable_backward);
}

}  // namespace vtpu::bridge

namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &vtpu::bridge::tpu_fused_sdp_choice)
}  // namespace at::native
