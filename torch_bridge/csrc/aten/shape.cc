// Ops that rearrange data on the chip: cat, constant padding (and cropping), clone keeping a
// dense tensor's strides, flip and roll.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>

#include <algorithm>
#include <limits>

#include <torch/library.h>

#include "kernels/compose/int64_words.h"
#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"

namespace vtpu::bridge {
namespace {

using kernels::ExprOp;
using kernels::Graph;
using kernels::RowOp;

at::Tensor tpu_cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<at::Tensor> inputs;
  c10::optional<at::Tensor> first;
  for (const auto& t : tensors) {
    if (!first) first = t;
    if (t.numel() > 0 || t.dim() > 1) inputs.push_back(t);  // torch skips legacy empty 1-d tensors
  }
  TORCH_CHECK(first, "torch.cat(): expected a non-empty list of Tensors");
  if (inputs.empty()) {  // only legacy empty 1-d tensors: an empty result of their promoted dtype
    c10::ScalarType dtype = first->scalar_type();
    for (const auto& t : tensors) dtype = c10::promoteTypes(dtype, t.scalar_type());
    return at::empty({0}, first->options().dtype(dtype));
  }
  const int64_t d = at::maybe_wrap_dim(dim, inputs[0].dim());
  c10::ScalarType dtype = inputs[0].scalar_type();
  for (const auto& t : inputs) dtype = c10::promoteTypes(dtype, t.scalar_type());
  if (dtype == at::kComplexFloat) {  // complex pieces join as their (re, im) planes
    std::vector<at::Tensor> planes;
    for (const auto& t : inputs) {
      TORCH_CHECK(t.dim() == inputs[0].dim(), "Tensors must have same number of dimensions: got ", inputs[0].dim(), " and ", t.dim());
      planes.push_back(at::view_as_real(complex::resolved(t.to(dtype))));
    }
    return at::view_as_complex(tpu_cat(planes, d));
  }
  if (dtype == at::kLong) {
    // int64 pieces join as their int32 word pairs (a last dim of 2), whatever the magnitudes;
    // narrower integer pieces are widened to int64 words first.
    std::vector<at::Tensor> words;
    std::optional<int64_t> bound = 0;
    for (const auto& t : inputs) {
      const at::Tensor wide = t.scalar_type() == at::kLong ? t : t.to(at::kLong);
      const auto b = int64_bound_of(wide);
      bound = bound && b ? std::optional(std::max(*bound, *b)) : std::nullopt;
      words.push_back(int64_word_pairs(wide));
    }
    const at::Tensor out = as_int64(tpu_cat(words, d));
    set_int64_bound(out, bound);
    return out;
  }
  return record("cat", inputs, dtype, [&](Graph& g, const std::vector<int>& v) {
    std::vector<int> cast;
    for (int x : v) cast.push_back(g.node(x).type.dtype == to_kernel_dtype(dtype) ? x : g.cast(x, to_kernel_dtype(dtype)));
    return g.concat(cast, d);
  }, [d](const std::vector<at::Tensor>& c) { return at::cat(c, d); });
}

// Constant padding: per padded dim, constant blocks concatenated around the input (cat kernels);
// negative pads crop (a convolution's padding='same' backward), one strided copy after.
at::Tensor tpu_constant_pad_nd(const at::Tensor& self, at::IntArrayRef pad, const at::Scalar& value) {
  const std::vector<int64_t> p(pad.begin(), pad.end());
  const auto cpu = [p, value](const std::vector<at::Tensor>& c) { return at::constant_pad_nd(c[0], p, value); };
  bool malformed = p.size() % 2 || int64_t(p.size()) > 2 * self.dim();
  for (size_t i = 0; !malformed && i < p.size() / 2; ++i) malformed |= self.size(self.dim() - 1 - i) + p[2 * i] + p[2 * i + 1] <= 0;
  if (malformed) return run_on_cpu("constant_pad_nd", {self}, cpu, "malformed padding, or cropping everything");
  if (self.scalar_type() == at::kComplexFloat) {  // each plane padded with its part of the value
    const c10::complex<double> v = value.toComplexDouble();
    return complex::per_plane(self, [&](const at::Tensor& plane, int part) {
      return tpu_constant_pad_nd(plane, pad, part ? v.imag() : v.real());
    });
  }
  // int64: each word padded on its own (the value's low and high words), the pairs joined back
  const bool words = self.scalar_type() == at::kLong;
  const auto bits = static_cast<uint64_t>(words ? value.toLong() : 0);
  const double fill = value.toDouble();
  const auto pad_value = [&](Graph& g, int x, double fill) {
    for (size_t i = 0; i < p.size() / 2; ++i) {
      x = g.pad(x, self.dim() - 1 - static_cast<int64_t>(i), std::max<int64_t>(p[2 * i], 0), std::max<int64_t>(p[2 * i + 1], 0), fill);
    }
    std::vector<int64_t> sizes = g.node(x).type.shape, strides(sizes.size(), 1);
    for (size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
    int64_t offset = 0;
    bool cropping = false;
    for (size_t i = 0; i < p.size() / 2; ++i) {
      const size_t d = sizes.size() - 1 - i;
      const int64_t before = std::min<int64_t>(p[2 * i], 0), after = std::min<int64_t>(p[2 * i + 1], 0);
      offset -= before * strides[d];
      sizes[d] += before + after;
      cropping |= before < 0 || after < 0;
    }
    return cropping ? g.strided_copy(x, sizes, strides, offset, "crop") : x;
  };
  const at::Tensor out = record("constant_pad_nd", {words ? int64_word_pairs(self) : self}, words ? at::kInt : self.scalar_type(),
                                [&](Graph& g, const std::vector<int>& v) {
    if (!words) return pad_value(g, v[0], fill);
    const kernels::Int64Words x = kernels::split_words(g, v[0], "constant_pad_nd");
    return kernels::join_words(g, {pad_value(g, x.lo, static_cast<int32_t>(static_cast<uint32_t>(bits))),
                                   pad_value(g, x.hi, static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)))}, "constant_pad_nd");
  }, [cpu, self](const std::vector<at::Tensor>&) { return cpu({self.cpu()}); });
  if (!words) return out;
  const auto bound = int64_bound_of(self);  // the padding's value joins the elements' known range
  const int64_t padded = value.toLong() == std::numeric_limits<int64_t>::min() ? std::numeric_limits<int64_t>::max() : std::abs(value.toLong());
  return bound ? as_int64(out, std::max(*bound, padded)) : as_int64(out);
}

// torch's clone: preserve_format keeps a dense tensor's strides (the copy runs in its dim order).
at::Tensor tpu_clone(const at::Tensor& self, std::optional<c10::MemoryFormat> format) {
  at::Tensor out = at::empty_like(self, self.options(), format);
  out.copy_(self);
  return out;
}

// flip: each flipped dim read through a reversed index (arange(n - 1, -1, -1) on the chip) by the
// gather kernel, as index_select does.
at::Tensor tpu_flip(const at::Tensor& self, at::IntArrayRef dims) {
  at::Tensor out = self;
  for (int64_t dim : dims) {
    const int64_t d = at::maybe_wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    const int64_t n = self.dim() == 0 ? 1 : self.size(d);
    if (n <= 1) continue;
    out = at::index_select(out, d, at::arange(n - 1, -1, -1, self.options().dtype(at::kInt)));
  }
  return out.is_same(self) ? self.clone() : out;
}

// roll: the two slices of each rolled dim swapped (a cat of narrowed views); no dims: the
// flattened tensor rolled and viewed back.
at::Tensor tpu_roll(const at::Tensor& self, at::IntArrayRef shifts, at::IntArrayRef dims) {
  TORCH_CHECK(!shifts.empty(), "`shifts` required");  // torch's checks, in its order
  if (dims.empty() && shifts.size() == 1) return tpu_roll(self.reshape({-1}), shifts, {0}).view(self.sizes());
  TORCH_CHECK(shifts.size() == dims.size(), "shifts and dimensions must align. shifts: ", shifts.size(), ", dims:", dims.size());
  at::Tensor out = self;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t d = at::maybe_wrap_dim(dims[k], self.dim());
    const int64_t n = self.size(d);
    if (n == 0) continue;
    const int64_t s = ((shifts[k] % n) + n) % n;
    if (s == 0) continue;
    out = at::cat({out.narrow(d, n - s, s), out.narrow(d, 0, n - s)}, d);
  }
  return out.is_same(self) ? self.clone() : out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("flip", tpu_flip);
  m.impl("roll", tpu_roll);
  m.impl("clone", tpu_clone);
  m.impl("cat", tpu_cat);
  m.impl("constant_pad_nd", tpu_constant_pad_nd);
}

}  // namespace vtpu::bridge
