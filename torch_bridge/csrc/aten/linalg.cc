// Matmul-family aten ops on the chip: mm, bmm, addmm (a fused bias epilogue), addmv and addbmm
// (matmuls with their epilogues), addr (an outer product), with transposed dense operands read as they lie instead of
// copied first.
#include <ATen/ATen.h>

#include <torch/library.h>

#include "kernels/compose/integer_matmul.h"
#include "kernels/compose/long_k_matmul.h"
#include "kernels/generators/matmul.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/pointwise.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

// A [.., R, C] operand that is the transpose of a dense [.., C, R] tensor (a weight's .t(),
// k.transpose(-1, -2), a weight gradient's x.t()): the matmul reads the dense tensor with
// transpose_b (or transpose_a) instead of a transpose kernel making a copy first.
bool is_transposed_dense(const at::Tensor& b) {
  const int64_t d = b.dim();
  if (d < 2 || b.size(d - 1) == 1 || b.size(d - 2) == 1) return false;
  return b.stride(d - 2) == 1 && b.stride(d - 1) == b.size(d - 2) && b.transpose(-1, -2).is_contiguous();
}

// An integer a @ b on the MXU, exact (kernels/compose/integer_matmul.h): int32 operands at any
// value (wrapping as torch's int32 matmul does), int8 ones into an int32 result (_int_mm), and
// int64 ones of known magnitudes whose products summed over K stay below 2^31 (their int32 words
// narrowed, the int32 result widened, its bound carried on). Other integer matmuls run on the CPU.
at::Tensor integer_matmul_op(const char* op, const at::Tensor& a, const at::Tensor& b, c10::ScalarType dtype, const CpuFn& cpu) {
  const int64_t k = a.size(-1);
  int64_t bound = kernels::kAnyInt32, result_bound = 0;
  const bool int8_products = dtype == at::kInt && a.scalar_type() == at::kChar && b.scalar_type() == at::kChar;
  if (int8_products) bound = 128;
  const bool int64_operands = dtype == at::kLong && a.scalar_type() == at::kLong && b.scalar_type() == at::kLong;
  if (int64_operands) {
    const auto a_bound = int64_bound_of(a), b_bound = int64_bound_of(b);
    const double largest = a_bound && b_bound ? double(*a_bound) * double(*b_bound) * double(std::max<int64_t>(k, 1)) : INFINITY;
    if (!(largest < double(kernels::kAnyInt32))) {
      return run_on_cpu(op, {a, b}, cpu, "int64 operands whose products summed over K are not known below 2^31");
    }
    bound = std::max(*a_bound, *b_bound), result_bound = int64_t(largest);
  } else if (!int8_products && !(dtype == at::kInt && a.scalar_type() == at::kInt && b.scalar_type() == at::kInt)) {
    return run_on_cpu(op, {a, b}, cpu, "integer operands other than int32, int8 into int32, or int64 of small known magnitude");
  }
  const std::vector<int64_t> a_shape = a.sizes().vec(), b_shape = b.sizes().vec();
  const auto operand = [&](const at::Tensor& t) { return int64_operands ? index_words(t) : t; };
  const at::Tensor out = record(op, {operand(a), operand(b)}, at::kInt, [&](Graph& g, const std::vector<int>& v) {
    const auto i32 = [&](int x, const std::vector<int64_t>& shape) {
      if (int64_operands) return g.reshape(g.int64_narrow(x, bound + 1, op), shape, op);
      return g.node(x).type.dtype == kernels::DType::I32 ? x : g.cast(x, kernels::DType::I32, op);
    };
    const int product = kernels::integer_matmul(g, i32(v[0], a_shape), i32(v[1], b_shape), bound, op);
    return int64_operands ? int64_words(g, product) : product;
  }, [cpu, a, b](const std::vector<at::Tensor>&) { return cpu({a.cpu(), b.cpu()}); });
  if (!int64_operands) return out;
  std::vector<int64_t> shape = a.sizes().vec();
  shape.back() = b.size(-1);
  return as_int64(out, result_bound).view(shape);
}

// a @ b recorded as one matmul node (K slices summed in f32 where K outgrows VMEM); `f32_result` keeps the f32 accumulator of bf16/f16
// operands instead of rounding it to their dtype (for a caller that rounds once after more math).
at::Tensor matmul_op(const char* op, const at::Tensor& a, const at::Tensor& b, const CpuFn& cpu, bool f32_result = false) {
  if (complex::involved(a, b) && at::result_type(a, b) == at::kComplexFloat) {  // four real matmuls over the planes
    TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected m1 and m2 to have the same dtype, but got: ", a.dtype(), " != ",
                b.dtype());  // torch's check: a complex matmul does not promote a real operand
    return complex::bilinear(a, b, [&](const at::Tensor& x, const at::Tensor& y) { return matmul_op(op, x, y, cpu); });
  }
  if (const auto dtype = at::result_type(a, b); at::isIntegralType(dtype, /*includeBool=*/true)) {
    return integer_matmul_op(op, a, b, dtype, cpu);
  }
  const bool a_transposed = is_transposed_dense(a), b_transposed = is_transposed_dense(b);
  const at::Tensor a_arg = a_transposed ? a.transpose(-1, -2) : a, b_arg = b_transposed ? b.transpose(-1, -2) : b;
  const int passes = kernels::passes_for_precision(Runtime::get().matmul_precision());
  const auto dtype = at::result_type(a, b);
  // A K too long for one launch (an LM head's gradient) is split inside the recorded graph.
  const sim::ChipConfig* chip = a.device().is_privateuseone() ? &Runtime::get().device(a.device().index()).chip() : nullptr;
  // The CPU path gets a and b as the caller gave them.
  const CpuFn cpu_given = [cpu, a_transposed, b_transposed](const std::vector<at::Tensor>& c) {
    return cpu({a_transposed ? c[0].transpose(-1, -2) : c[0], b_transposed ? c[1].transpose(-1, -2) : c[1]});
  };
  const bool widened = f32_result && (dtype == at::kBFloat16 || dtype == at::kHalf);
  return record(op, {a_arg, b_arg}, widened ? at::kFloat : dtype, [&](Graph& g, const std::vector<int>& v) {
    return kernels::matmul_with_long_k(g, v[0], v[1], b_transposed, passes, op, chip, a_transposed, widened);
  }, widened ? CpuFn([cpu_given](const std::vector<at::Tensor>& c) { return cpu_given(c).to(at::kFloat); }) : cpu_given);
}

at::Tensor tpu_mm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_op("mm", a, b, [](const std::vector<at::Tensor>& c) { return at::mm(c[0], c[1]); });
}
at::Tensor tpu_bmm(const at::Tensor& a, const at::Tensor& b) {
  return matmul_op("bmm", a, b, [](const std::vector<at::Tensor>& c) { return at::bmm(c[0], c[1]); });
}
// int8 @ int8 summed in int32 (the int8 matmul of dynamic quantization, torchao's int8 linear).
at::Tensor tpu_int_mm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2 && a.scalar_type() == at::kChar && b.scalar_type() == at::kChar,
              "_int_mm: expected 2-D int8 operands, got ", a.sizes(), " ", a.scalar_type(), " and ", b.sizes(), " ", b.scalar_type());
  TORCH_CHECK(a.size(1) == b.size(0), "_int_mm: a.size(1) (", a.size(1), ") must equal b.size(0) (", b.size(0), ")");
  return integer_matmul_op("_int_mm", a, b, at::kInt, [](const std::vector<at::Tensor>& c) { return at::_int_mm(c[0], c[1]); });
}
// beta * self + alpha * product, with torch's rule that beta = 0 ignores self (NaN included). An
// integer product takes alpha and beta as its own type, truncated, as torch's integer kernels do
// (a float 0.6 would otherwise promote the result to float).
at::Tensor scaled_sum(const at::Tensor& self, at::Tensor product, const at::Scalar& beta_given, const at::Scalar& alpha_given) {
  const bool integral = at::isIntegralType(product.scalar_type(), /*includeBool=*/true);
  const at::Scalar alpha = integral ? at::Scalar(alpha_given.to<int64_t>()) : alpha_given;
  const at::Scalar beta = integral ? at::Scalar(beta_given.to<int64_t>()) : beta_given;
  if (!alpha.equal(1)) product = pointwise::mul(product, pointwise::wrapped_scalar(alpha));
  if (beta_given.equal(0)) return product.expand(at::infer_size(product.sizes(), self.sizes())).contiguous();
  return pointwise::add(product, self, beta);
}

// alpha * (a @ b) + beta * bias. bf16 rounds once, at the end, as torch's CPU kernel does: the
// product is kept as its f32 accumulator and the sum is f32 (Muon's Newton-Schulz steps are addmms
// in bf16, and a rounding per step compounds). The CPU's f16 addmm rounds in other places, by its
// alpha and beta; f16 keeps a rounding per op.
at::Tensor tpu_addmm(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b, const at::Scalar& beta, const at::Scalar& alpha) {
  const auto dtype = at::result_type(a, b);
  const bool once = dtype == at::kBFloat16 && at::result_type(bias, a) == dtype;
  at::Tensor product = once ? matmul_op("mm", a, b, [](const std::vector<at::Tensor>& c) { return at::mm(c[0], c[1]); }, true)
                            : tpu_mm(a, b);
  const at::Tensor sum = scaled_sum(once ? bias.to(at::kFloat) : bias, product, beta, alpha);
  return once ? sum.to(dtype) : sum;
}

// matrix-vector products as a one-column matmul on the MXU.
at::Tensor tpu_addmv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec, const at::Scalar& beta,
                     const at::Scalar& alpha) {
  return scaled_sum(self, tpu_mm(mat, vec.unsqueeze(1)).squeeze(1), beta, alpha);
}
// The sum over the batch of bmm's products: one matmul of [n, b*k] by [b*k, m].
at::Tensor tpu_addbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                      const at::Scalar& alpha) {
  const int64_t b = batch1.size(0), n = batch1.size(1), k = batch1.size(2), m = batch2.size(2);
  const at::Tensor left = batch1.permute({1, 0, 2}).reshape({n, b * k}), right = batch2.reshape({b * k, m});
  return scaled_sum(self, tpu_mm(left, right), beta, alpha);
}

// beta * self + alpha * outer(vec1, vec2), computed in f32 and rounded once (as torch's kernels
// compute bf16: a bf16 product rounded before the sum would differ by more than bf16's ulp).
at::Tensor tpu_addr(const at::Tensor& self, const at::Tensor& vec1, const at::Tensor& vec2, const at::Scalar& beta,
                    const at::Scalar& alpha) {
  const auto dtype = at::promote_types(at::result_type(self, vec1), vec2.scalar_type());
  const bool widen = dtype == at::kBFloat16 || dtype == at::kHalf;
  const auto f32 = [&](const at::Tensor& t) { return widen ? t.to(at::kFloat) : t; };
  const at::Tensor outer = f32(vec1).unsqueeze(1) * f32(vec2).unsqueeze(0);
  const at::Tensor out = scaled_sum(f32(self), outer, beta, alpha);
  return out.scalar_type() == dtype ? out : out.to(dtype);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("addr", tpu_addr);
  m.impl("addr_", Variants<tpu_addr>::inplace);
  m.impl("addr.out", Variants<tpu_addr>::out);
  m.impl("mm", tpu_mm);
  m.impl("mm.out", Variants<tpu_mm>::out);
  m.impl("bmm", tpu_bmm);
  m.impl("_int_mm", tpu_int_mm);
  m.impl("addmm", tpu_addmm);
  m.impl("addmv", tpu_addmv);
  m.impl("addmv_", Variants<tpu_addmv>::inplace);
  m.impl("addmv.out", Variants<tpu_addmv>::out);
  m.impl("addbmm", tpu_addbmm);
  m.impl("addbmm_", Variants<tpu_addbmm>::inplace);
  m.impl("addbmm.out", Variants<tpu_addbmm>::out);
}

}  // namespace vtpu::bridge
