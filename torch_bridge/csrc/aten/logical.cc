// Predicates and boolean algebra on the chip: isnan/isinf/isneginf/isposinf, logical_not/and/or/xor,
// bitwise_not, equal, and all/any over any dims (a min/max of the 0/1 values). What
// attention's masking path runs (torch's _safe_softmax asks isneginf(...).all(dim)).
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <torch/library.h>

#include <algorithm>
#include <limits>

#include "kernels/compose/reduce_dims.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/aten/variants.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

using kernels::DType;
using kernels::ExprOp;
using kernels::Graph;

constexpr double kInf = std::numeric_limits<double>::infinity();

// A predicate of each element; integer tensors hold no NaN or infinity, so theirs is all false.
at::Tensor predicate(const char* op, const at::Tensor& self, const std::function<int(Graph&, int)>& test, const CpuFn& cpu) {
  const bool floating = at::isFloatingType(self.scalar_type());
  if (!floating) return at::zeros_like(self, self.options().dtype(at::kBool));  // int64's words need not be read either
  return record_elementwise(op, {self}, at::kBool, [&](Graph& g, const std::vector<int>& v) {
    return floating ? test(g, v[0]) : g.full({g.node(v[0]).type.shape, DType::Bool}, 0, op);
  }, cpu);
}

// A predicate of either part of a complex64 element (NaN or infinite), from its (re, im) pairs.
at::Tensor either_part(const at::Tensor& z, at::Tensor (*test)(const at::Tensor&)) { return test(complex::as_pairs(z)).any(-1); }
// The truth of an operand the graph cannot cast to bool itself, as a bool tensor: complex64 (what
// torch's complex rules give) and int64 (!= 0 on its words, at any magnitude).
bool needs_truth(const at::Tensor& t) { return t.scalar_type() == at::kComplexFloat || t.scalar_type() == at::kLong; }
at::Tensor truth_of(const at::Tensor& t) {
  if (t.scalar_type() == at::kComplexFloat) return complex::truth(t);
  return t.scalar_type() == at::kLong ? at::ne(t, 0) : t;
}

at::Tensor tpu_isnan(const at::Tensor& self) {
  if (self.scalar_type() == at::kComplexFloat) return either_part(self, at::isnan);
  return predicate("isnan", self, [](Graph& g, int x) { return g.binary(ExprOp::Ne, x, x); },
                   [](const std::vector<at::Tensor>& c) { return at::isnan(c[0]); });
}
at::Tensor tpu_isinf(const at::Tensor& self) {
  if (self.scalar_type() == at::kComplexFloat) return either_part(self, at::isinf);
  return predicate("isinf", self, [](Graph& g, int x) { return g.binary_scalar(ExprOp::Eq, g.unary(ExprOp::Abs, x), kInf); },
                   [](const std::vector<at::Tensor>& c) { return at::isinf(c[0]); });
}
at::Tensor tpu_isneginf(const at::Tensor& self) {
  return predicate("isneginf", self, [](Graph& g, int x) { return g.binary_scalar(ExprOp::Eq, x, -kInf); },
                   [](const std::vector<at::Tensor>& c) { return at::isneginf(c[0]); });
}
at::Tensor tpu_isposinf(const at::Tensor& self) {
  return predicate("isposinf", self, [](Graph& g, int x) { return g.binary_scalar(ExprOp::Eq, x, kInf); },
                   [](const std::vector<at::Tensor>& c) { return at::isposinf(c[0]); });
}

int truth(Graph& g, int x) { return g.node(x).type.dtype == DType::Bool ? x : g.cast(x, DType::Bool); }

at::Tensor tpu_logical_not(const at::Tensor& self) {
  if (needs_truth(self)) return tpu_logical_not(truth_of(self));
  return record_elementwise(
      "logical_not", {self}, at::kBool, [](Graph& g, const std::vector<int>& v) { return g.unary(ExprOp::Not, truth(g, v[0])); },
      [](const std::vector<at::Tensor>& c) { return at::logical_not(c[0]); });
}

at::Tensor logical(const char* op, ExprOp e, const at::Tensor& self, const at::Tensor& other, const CpuFn& cpu) {
  if (!other.device().is_privateuseone()) return logical(op, e, self, other.to(self.device()), cpu);
  if (needs_truth(self) || needs_truth(other)) return logical(op, e, truth_of(self), truth_of(other), cpu);
  return record_elementwise(op, {self, other}, at::kBool, [&](Graph& g, const std::vector<int>& v) {
    return g.binary(e, truth(g, v[0]), truth(g, v[1]));
  }, cpu);
}
at::Tensor tpu_logical_and(const at::Tensor& self, const at::Tensor& other) {
  return logical("logical_and", ExprOp::And, self, other, [](const std::vector<at::Tensor>& c) { return at::logical_and(c[0], c[1]); });
}
at::Tensor tpu_logical_or(const at::Tensor& self, const at::Tensor& other) {
  return logical("logical_or", ExprOp::Or, self, other, [](const std::vector<at::Tensor>& c) { return at::logical_or(c[0], c[1]); });
}
at::Tensor tpu_logical_xor(const at::Tensor& self, const at::Tensor& other) {
  return logical("logical_xor", ExprOp::Ne, self, other, [](const std::vector<at::Tensor>& c) { return at::logical_xor(c[0], c[1]); });
}
// bitwise_not: logical not on bool tensors; on integers x ^ -1, word by word for int64 (its word
// pairs flip as one int32 tensor). bitwise and/or/xor are pointwise.cc's table rows.
at::Tensor tpu_bitwise_not(const at::Tensor& self) {
  if (self.scalar_type() == at::kBool) return tpu_logical_not(self);
  const CpuFn cpu = [](const std::vector<at::Tensor>& c) { return at::bitwise_not(c[0]); };
  if (!at::isIntegralType(self.scalar_type(), false)) return run_on_cpu("bitwise_not", {self}, cpu, "floating-point inputs");
  const bool words = self.scalar_type() == at::kLong;
  const at::Tensor input = words ? int64_word_pairs(self) : self;
  const at::Tensor out = record_elementwise("bitwise_not", {input}, input.scalar_type(), [](Graph& g, const std::vector<int>& v) {
    return g.binary_scalar(ExprOp::BitXor, v[0], -1);
  }, [self, cpu](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  return words ? as_int64(out) : out;
}

// all / any over `dims` (none: every dim): the min / max of the elements as 0.0 / 1.0. torch
// keeps a uint8 input's dtype (its result is 0 or 1 in uint8).
at::Tensor all_any(const char* op, const at::Tensor& self, at::OptionalIntArrayRef dims_opt, bool keepdim, bool all) {
  if (self.scalar_type() == at::kByte) return all_any(op, self.ne(0), dims_opt, keepdim, all).to(at::kByte);
  if (needs_truth(self)) return all_any(op, truth_of(self), dims_opt, keepdim, all);
  const auto [dims, shape] = reduction_over(self, dims_opt, keepdim);
  const CpuFn cpu = [dims, keepdim, all, whole = !dims_opt || dims_opt->empty()](const std::vector<at::Tensor>& c) {
    if (whole && !keepdim) return all ? at::all(c[0]) : at::any(c[0]);
    return all ? at::all(c[0], dims, keepdim) : at::any(c[0], dims, keepdim);
  };
  if (self.numel() == 0) return at::full(shape, all, self.options().dtype(at::kBool));  // all(empty) holds, any does not
  if (self.dim() == 0) return all_any(op, self.reshape({1}), at::IntArrayRef{0}, false, all).reshape({});
  at::Tensor out = record(op, {self}, at::kBool, [&](Graph& g, const std::vector<int>& v) {
    const int values = g.cast(truth(g, v[0]), DType::F32);
    const int reduced = kernels::reduce_dims(g, values, dims, all ? kernels::RowOp::Min : kernels::RowOp::Max);
    return g.binary_scalar(ExprOp::Ne, reduced, 0);
  }, cpu);
  return out.view(shape);
}
at::Tensor tpu_all(const at::Tensor& self) { return all_any("all", self, std::nullopt, false, true); }
at::Tensor tpu_any(const at::Tensor& self) { return all_any("any", self, std::nullopt, false, false); }
at::Tensor tpu_all_dim(const at::Tensor& self, int64_t dim, bool keepdim) { return all_any("all", self, at::IntArrayRef{dim}, keepdim, true); }
at::Tensor tpu_any_dim(const at::Tensor& self, int64_t dim, bool keepdim) { return all_any("any", self, at::IntArrayRef{dim}, keepdim, false); }
at::Tensor tpu_all_dims(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) { return all_any("all", self, dims, keepdim, true); }
at::Tensor tpu_any_dims(const at::Tensor& self, at::OptionalIntArrayRef dims, bool keepdim) { return all_any("any", self, dims, keepdim, false); }

// torch.equal: same shape and every element equal (NaN never is), read back: a sync point.
bool tpu_equal(const at::Tensor& self, const at::Tensor& other) {
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.scalar_type() != other.scalar_type()) {
    return run_on_cpu("equal", {self, other}, [](const std::vector<at::Tensor>& c) {
      return at::scalar_tensor(at::equal(c[0], c[1]), at::kBool);
    }, "operands of different dtypes").item<bool>();
  }
  if (self.numel() == 0) return true;
  return tpu_all(at::eq(self, other)).item<bool>();
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("equal", tpu_equal);
  m.impl("isnan", tpu_isnan);
  m.impl("isinf", tpu_isinf);
  m.impl("isneginf", tpu_isneginf);
  m.impl("isposinf", tpu_isposinf);
  m.impl("logical_not", tpu_logical_not);
  m.impl("logical_and", tpu_logical_and);
  m.impl("logical_or", tpu_logical_or);
  m.impl("logical_xor", tpu_logical_xor);
  m.impl("bitwise_not", tpu_bitwise_not);
  m.impl("bitwise_not_", Variants<tpu_bitwise_not>::inplace);
  m.impl("bitwise_not.out", Variants<tpu_bitwise_not>::out);
  m.impl("all", tpu_all);
  m.impl("any", tpu_any);
  m.impl("all.dim", tpu_all_dim);
  m.impl("any.dim", tpu_any_dim);
  m.impl("all.dims", tpu_all_dims);
  m.impl("any.dims", tpu_any_dims);
}

}  // namespace vtpu::bridge
