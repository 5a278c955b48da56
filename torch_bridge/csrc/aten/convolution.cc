// Convolutions on the chip (kernels/compose/convolution.h). torch routes every backend other than the
// CPU and CUDA through convolution_overrideable and convolution_backward_overrideable, which have
// no CPU kernels for the boxed fallback to call: both are registered here, and what the graph
// does not build (conv3d, integer dtypes, many non-depthwise groups) runs at::convolution or
// at::convolution_backward on the CPU when the user allowed fallback.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <array>
#include <string>

#include "kernels/compose/convolution.h"
#include "kernels/generators/matmul.h"
#include "kernels/compose/reduce_dims.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using kernels::Graph;
using Pair = std::array<int64_t, 2>;

// A convolution's arguments as torch gives them (for the CPU), and as the graph takes them:
// conv1d is lifted to a conv2d of height 1.
struct Conv {
  std::vector<int64_t> stride, padding, dilation, output_padding;
  bool transposed = false;
  int64_t groups = 1;
  bool one_d = false;
  kernels::Conv2dParams params;

  Conv(const at::Tensor& input, at::IntArrayRef st, at::IntArrayRef pa, at::IntArrayRef di, bool tr, at::IntArrayRef op, int64_t g)
      : stride(st.begin(), st.end()), padding(pa.begin(), pa.end()), dilation(di.begin(), di.end()),
        output_padding(op.begin(), op.end()), transposed(tr), groups(g), one_d(input.dim() == 3) {
    params.stride = lifted(stride, 1);
    params.padding = lifted(padding, 0);
    params.dilation = lifted(dilation, 1);
    params.groups = groups;
    params.passes = kernels::passes_for_precision(Runtime::get().matmul_precision());
    if (input.device().is_privateuseone()) params.chip = &Runtime::get().device(input.device().index()).chip();
  }
  // (height, width) of an int[] argument: conv1d's one value is the width (height: `fill`), a
  // conv2d's one value both.
  Pair lifted(const std::vector<int64_t>& v, int64_t fill) const {
    if (v.empty()) return {fill, fill};
    if (one_d) return {fill, v[0]};
    return {v[0], v.size() > 1 ? v[1] : v[0]};
  }

  // Why the chip does not run it, or "" when it does. The graph's convolution is the forward
  // one; a transposed convolution is its input gradient, with weight [C_in, C_out / groups, ...].
  std::string unsupported(const at::Tensor& input, const at::Tensor& weight) const {
    if (input.dim() != 3 && input.dim() != 4) return "convolutions over other than 1 or 2 spatial dims";
    if (!at::isFloatingType(input.scalar_type()) || !at::isFloatingType(weight.scalar_type())) return "integer convolutions";
    return "";
  }

  int lift(Graph& g, int v) const {
    if (!one_d) return v;
    auto s = g.node(v).type.shape;
    s.insert(s.begin() + 2, 1);
    return g.reshape(v, s);
  }
  int unlift(Graph& g, int v) const {
    if (!one_d) return v;
    auto s = g.node(v).type.shape;
    s.erase(s.begin() + 2);
    return g.reshape(v, s);
  }
  int64_t out_channels(const at::Tensor& weight) const { return transposed ? weight.size(1) * groups : weight.size(0); }
};

// The (height, width) of a lifted [N, C, H, W] value.
Pair spatial(const Graph& g, int v) {
  const auto& s = g.node(v).type.shape;
  return {s[2], s[3]};
}

// A transposed convolution's output size: the input size its forward convolution maps onto x's.
Pair transposed_output(const Graph& g, int x, int w, const Conv& c) {
  const Pair in = spatial(g, x), op = c.lifted(c.output_padding, 0);
  const auto& ws = g.node(w).type.shape;
  Pair out;
  for (int d = 0; d < 2; ++d) {
    out[d] = (in[d] - 1) * c.params.stride[d] - 2 * c.params.padding[d] + c.params.dilation[d] * (ws[2 + d] - 1) + op[d] + 1;
  }
  return out;
}

// x extended with zero rows (columns) at the end to the size the forward convolution maps `out`
// onto: output padding at or above the stride (torch allows it below the dilation) makes that
// larger than x, and the rows it adds take part in no sum of the transposed convolution.
int padded_for(Graph& g, int x, int w, const Pair& out, const Conv& c) {
  const Pair in = spatial(g, x);
  const auto& ws = g.node(w).type.shape;
  for (int d = 0; d < 2; ++d) {
    const int64_t mapped =
        kernels::conv_output_size(out[d], ws[2 + d], c.params.stride[d], c.params.padding[d], c.params.dilation[d]);
    if (mapped < in[d]) throw kernels::KernelError("conv_transpose: an output smaller than its input's convolution");
    if (mapped > in[d]) x = g.pad(x, 2 + d, 0, mapped - in[d], 0, "conv_transpose");
  }
  return x;
}

// An int64 convolution (torch runs them on the CPU; images of class ids, counting kernels) as the
// f32 convolution of its values where that is exact: known magnitudes of at most 256 (exact in
// bf16, the MXU's operands) whose products summed over an output's window stay below 2^24 (exact
// in f32, as every partial sum is too). The result converts back through int32, with its bound.
// Others run on the CPU.
at::Tensor integer_convolution(const Conv& c, const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                               const std::vector<at::Tensor>& inputs, const CpuFn& cpu) {
  const auto a_bound = input.scalar_type() == at::kLong ? int64_bound_of(input) : std::nullopt;
  const auto w_bound = weight.scalar_type() == at::kLong ? int64_bound_of(weight) : std::nullopt;
  const int64_t terms = weight.numel() / std::max<int64_t>(c.out_channels(weight), 1);
  const int64_t exact_operand = 256, exact_sum = int64_t{1} << 24;
  if (!a_bound || !w_bound || std::max(*a_bound, *w_bound) > exact_operand ||
      double(*a_bound) * double(*w_bound) * double(terms) >= double(exact_sum)) {
    return run_on_cpu("convolution_overrideable", inputs, cpu,
                      "integer convolutions other than int64 of known magnitude at most 256 whose window sums stay below 2^24");
  }
  at::Tensor out = at::convolution(input.to(at::kFloat), weight.to(at::kFloat), std::nullopt, c.stride, c.padding, c.dilation,
                                   c.transposed, c.output_padding, c.groups)
                       .to(at::kInt)
                       .to(at::kLong);
  set_int64_bound(out, *a_bound * *w_bound * terms);
  if (!bias || !bias->defined()) return out;
  std::vector<int64_t> along_channels(out.dim(), 1);
  along_channels[1] = -1;
  return out + bias->view(along_channels);
}

at::Tensor tpu_convolution_overrideable(const at::Tensor& input, const at::Tensor& weight, const std::optional<at::Tensor>& bias,
                                        at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                                        bool transposed, at::IntArrayRef output_padding, int64_t groups) {
  const Conv c(input, stride, padding, dilation, transposed, output_padding, groups);
  std::vector<at::Tensor> inputs = {input, weight};
  const bool has_bias = bias && bias->defined();
  if (has_bias) inputs.push_back(*bias);
  const CpuFn cpu = [c, has_bias](const std::vector<at::Tensor>& t) {
    return at::convolution(t[0], t[1], has_bias ? std::optional(t[2]) : std::nullopt, c.stride, c.padding, c.dilation,
                           c.transposed, c.output_padding, c.groups);
  };
  if (!at::isFloatingType(input.scalar_type()) && !at::isComplexType(input.scalar_type())) {
    return integer_convolution(c, input, weight, bias, inputs, cpu);
  }
  if (const std::string why = c.unsupported(input, weight); !why.empty()) return run_on_cpu("convolution_overrideable", inputs, cpu, why);
  return record("convolution_overrideable", inputs, input.scalar_type(), [&](Graph& g, const std::vector<int>& v) {
    const int x = c.lift(g, v[0]), w = c.lift(g, v[1]), b = has_bias ? v[2] : -1;
    if (!c.transposed) return c.unlift(g, kernels::conv2d(g, x, w, b, c.params));
    return c.unlift(g, kernels::conv_transpose2d(g, x, w, transposed_output(g, x, w, c), c.params, b));
  }, cpu);
}

// grad_output, input and weight as the forward saw them. A transposed convolution's gradients are
// the forward convolution's with the roles of input and output exchanged.
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, at::IntArrayRef stride,
    at::IntArrayRef padding, at::IntArrayRef dilation, bool transposed, at::IntArrayRef output_padding, int64_t groups,
    std::array<bool, 3> output_mask) {
  const Conv c(input, stride, padding, dilation, transposed, output_padding, groups);
  const std::vector<at::Tensor> inputs = {grad_output, input, weight};
  const std::vector<int64_t> bias_sizes = {c.out_channels(weight)};
  const CpuOutputsFn cpu = [c, output_mask, bias_sizes](const std::vector<at::Tensor>& t) {
    auto [gi, gw, gb] = at::convolution_backward(t[0], t[1], t[2], bias_sizes, c.stride, c.padding, c.dilation,
                                                 c.transposed, c.output_padding, c.groups, output_mask);
    return std::vector<at::Tensor>{gi, gw, gb};
  };
  if (const std::string why = c.unsupported(input, weight); !why.empty()) {
    const auto r = run_on_cpu_outputs("convolution_backward_overrideable", inputs, cpu, why);
    return {r[0], r[1], r[2]};
  }
  const auto output = [&](int which, const BuildFn& build) -> at::Tensor {
    if (!output_mask[which]) return {};
    const auto dtype = which == 0 ? input.scalar_type() : which == 1 ? weight.scalar_type() : grad_output.scalar_type();
    // The CPU path of one result (record's fallback when a kernel cannot be built for it).
    const CpuFn cpu_one = [cpu, which](const std::vector<at::Tensor>& t) { return cpu(t)[which]; };
    return record("convolution_backward_overrideable", inputs, dtype, build, cpu_one);
  };
  at::Tensor grad_input = output(0, [&](Graph& g, const std::vector<int>& v) {
    const int gy = c.lift(g, v[0]), x = c.lift(g, v[1]), w = c.lift(g, v[2]);
    if (c.transposed) return c.unlift(g, kernels::conv2d(g, gy, w, -1, c.params));
    return c.unlift(g, kernels::conv2d_input_grad(g, gy, w, spatial(g, x), c.params));
  });
  at::Tensor grad_weight = output(1, [&](Graph& g, const std::vector<int>& v) {
    const int gy = c.lift(g, v[0]), x = c.lift(g, v[1]), w = c.lift(g, v[2]);
    const Pair kernel = spatial(g, w);
    const int64_t conv_out = g.node(w).type.shape[0];
    const int dw = c.transposed
                       ? kernels::conv2d_weight_grad(g, padded_for(g, x, w, spatial(g, gy), c), gy, kernel, conv_out, c.params)
                       : kernels::conv2d_weight_grad(g, gy, x, kernel, conv_out, c.params);
    return c.unlift(g, dw);
  });
  at::Tensor grad_bias = output(2, [&](Graph& g, const std::vector<int>& v) {
    return kernels::reduce_dims(g, c.lift(g, v[0]), {0, 2, 3}, kernels::RowOp::Sum);
  });
  // A transposed convolution's input gradient is a convolution of grad_output, which covers the
  // rows and columns output_padding (or the stride's remainder) added too: those do not reach the
  // input, so the gradient is cut to the input's size.
  if (grad_input.defined() && c.transposed && !grad_input.sizes().equals(input.sizes())) {
    for (int64_t d = 2; d < input.dim(); ++d) grad_input = grad_input.narrow(d, 0, input.size(d));
    grad_input = grad_input.contiguous();
  }
  return {grad_input, grad_weight, grad_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", tpu_convolution_overrideable);
  m.impl("convolution_backward_overrideable", tpu_convolution_backward_overrideable);
}

}  // namespace vtpu::bridge
