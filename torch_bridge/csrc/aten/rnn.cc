// The fused LSTM and GRU cells torch calls for every RNN step on an accelerator (nn.LSTM, nn.GRU,
// nn.LSTMCell, nn.GRUCell route tpu tensors here, as CUDA ones; they have no CPU kernel, so no
// fallback could run them) and their backward kernels, composed from lowered ops: the gate
// activations and state updates are elementwise and fuse into the step's kernels. The workspace
// the forward saves for the backward holds the activated gates in CUDA's layout: LSTM [i, f, g, o],
// GRU [r, z, n, hx, hn] (chunks along dim 1).
#include <ATen/ATen.h>
#include <torch/library.h>

#include <optional>
#include <tuple>

namespace vtpu::bridge {
namespace {

at::Tensor with_bias(at::Tensor gates, const std::optional<at::Tensor>& bias) {
  return bias && bias->defined() ? gates + *bias : gates;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_fused_lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                                   const at::Tensor& cx, const std::optional<at::Tensor>& input_bias,
                                                                   const std::optional<at::Tensor>& hidden_bias) {
  const auto chunks = with_bias(with_bias(input_gates + hidden_gates, input_bias), hidden_bias).chunk(4, 1);
  const at::Tensor i = chunks[0].sigmoid(), f = chunks[1].sigmoid(), g = chunks[2].tanh(), o = chunks[3].sigmoid();
  const at::Tensor cy = f * cx + i * g;
  const at::Tensor hy = o * cy.tanh();
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// (grad of the gates' pre-activations, grad_cx, grad of the bias: the gates' grad summed over the batch)
std::tuple<at::Tensor, at::Tensor, at::Tensor> tpu_fused_lstm_cell_backward_impl(
    const std::optional<at::Tensor>& grad_hy, const std::optional<at::Tensor>& grad_cy, const at::Tensor& cx, const at::Tensor& cy,
    const at::Tensor& workspace, bool has_bias) {
  const auto gates = workspace.chunk(4, 1);
  const at::Tensor &i = gates[0], &f = gates[1], &g = gates[2], &o = gates[3];
  const at::Tensor tanh_cy = cy.tanh();
  const bool has_hy = grad_hy && grad_hy->defined(), has_cy = grad_cy && grad_cy->defined();
  const at::Tensor dhy = has_hy ? *grad_hy : at::zeros_like(cy);
  at::Tensor dcy = dhy * o * (1 - tanh_cy * tanh_cy);
  if (has_cy) dcy = dcy + *grad_cy;
  const at::Tensor di = dcy * g * i * (1 - i);
  const at::Tensor df = dcy * cx * f * (1 - f);
  const at::Tensor dg = dcy * i * (1 - g * g);
  const at::Tensor d_o = dhy * tanh_cy * o * (1 - o);
  const at::Tensor grad_gates = at::cat({di, df, dg, d_o}, 1);
  const at::Tensor grad_bias = has_bias ? grad_gates.sum(0) : at::Tensor();
  return {grad_gates, dcy * f, grad_bias};
}

std::tuple<at::Tensor, at::Tensor> tpu_fused_gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates, const at::Tensor& hx,
                                                      const std::optional<at::Tensor>& input_bias,
                                                      const std::optional<at::Tensor>& hidden_bias) {
  const auto in = with_bias(input_gates, input_bias).chunk(3, 1), hid = with_bias(hidden_gates, hidden_bias).chunk(3, 1);
  const at::Tensor r = (in[0] + hid[0]).sigmoid(), z = (in[1] + hid[1]).sigmoid();
  const at::Tensor n = (in[2] + r * hid[2]).tanh();
  const at::Tensor hy = n + z * (hx - n);
  return {hy, at::cat({r, z, n, hx, hid[2]}, 1)};
}

// (grad of the input gates, of the hidden gates, grad_hx, grad of the input and hidden biases)
std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> tpu_fused_gru_cell_backward(const at::Tensor& grad_hy,
                                                                                                 const at::Tensor& workspace,
                                                                                                 bool has_bias) {
  const auto saved = workspace.chunk(5, 1);
  const at::Tensor &r = saved[0], &z = saved[1], &n = saved[2], &hx = saved[3], &hn = saved[4];
  const at::Tensor dn = grad_hy * (1 - z) * (1 - n * n);
  const at::Tensor dz = grad_hy * (hx - n) * z * (1 - z);
  const at::Tensor dr = dn * hn * r * (1 - r);
  const at::Tensor grad_input_gates = at::cat({dr, dz, dn}, 1);
  const at::Tensor grad_hidden_gates = at::cat({dr, dz, dn * r}, 1);
  at::Tensor grad_input_bias, grad_hidden_bias;
  if (has_bias) {
    grad_input_bias = grad_input_gates.sum(0);
    grad_hidden_bias = grad_hidden_gates.sum(0);
  }
  return {grad_input_gates, grad_hidden_gates, grad_hy * z, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", tpu_fused_lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", tpu_fused_lstm_cell_backward_impl);
  m.impl("_thnn_fused_gru_cell", tpu_fused_gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", tpu_fused_gru_cell_backward);
}

}  // namespace vtpu::bridge
