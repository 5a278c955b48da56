#include "kernels/attention/attention_grad.h"

#include "kernels/attention/attention_backward.h"

namespace vtpu::kernels {
namespace {

int cast_to(Graph& g, int x, DType dtype) { return g.node(x).type.dtype == dtype ? x : g.cast(x, dtype); }

}  // namespace

AttentionGrads attention_backward(Graph& g, int q, int k, int v, int out, int lse, int dout, bool causal, double scale,
                                  int passes) {
  const auto& qs = g.node(q).type.shape;
  const int64_t b = qs[0], s = qs[1], t = g.node(k).type.shape[1];
  const DType dtype = g.node(q).type.dtype;
  // p = exp(q k^T * scale - lse), zero where the causal mask hid a key
  const int scores = g.binary_scalar(ExprOp::Mul, g.matmul(q, k, true, passes, "attention_backward"), scale);
  int p = g.unary(ExprOp::Exp, g.binary(ExprOp::Sub, scores, g.reshape(lse, {b, s, 1})));
  if (causal) {
    const int row = g.iota({{s, 1}, DType::I32}, "attention_backward"), col = g.iota({{t}, DType::I32}, "attention_backward");
    p = g.where(g.binary(ExprOp::Le, col, row), p, g.full({{1}, DType::F32}, 0.0));
  }
  p = cast_to(g, p, dtype);
  AttentionGrads grads;
  grads.v = cast_to(g, g.matmul(g.permute(p, {0, 2, 1}, "attention_backward"), dout, false, passes, "attention_backward"), dtype);
  const int dp = g.matmul(dout, v, true, passes, "attention_backward");
  const int row_dot = g.row(RowOp::Sum, g.binary(ExprOp::Mul, dout, out));  // rowsum(dout * out) = rowsum(p * dp)
  const int ds = cast_to(g, g.binary(ExprOp::Mul, p, g.binary(ExprOp::Sub, dp, g.reshape(row_dot, {b, s, 1}))), dtype);
  grads.q = cast_to(g, g.binary_scalar(ExprOp::Mul, g.matmul(ds, k, false, passes, "attention_backward"), scale), dtype);
  const int ds_t = g.permute(ds, {0, 2, 1}, "attention_backward");  // a matmul takes only B transposed
  grads.k = cast_to(g, g.binary_scalar(ExprOp::Mul, g.matmul(ds_t, q, false, passes, "attention_backward"), scale), dtype);
  return grads;
}

int attention_gradients(Graph& g, int q, int k, int v, int out, int lse, int dout, bool causal, double scale, int passes,
                        const sim::ChipConfig& chip) {
  const AttentionSpec spec = attention_spec(g, q, k, causal, scale, passes);
  if (attention_backward_unsupported(spec, chip).empty()) {
    return g.attention_backward(q, k, v, out, dout, lse, causal, scale, passes, "attention_backward_fused");
  }
  const AttentionGrads d = attention_backward(g, q, k, v, out, lse, dout, causal, scale, passes);
  const auto flat = [&](int x) { return g.reshape(x, {g.node(x).type.numel()}); };
  return g.concat({flat(d.q), flat(d.k), flat(d.v)}, 0, "attention_backward");
}

}  // namespace vtpu::kernels
