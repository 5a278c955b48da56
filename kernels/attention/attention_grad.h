// The gradients of fused attention (kernels/attention/attention.h) as graph nodes: the probabilities are
// recomputed from the forward's logsumexp (p = exp(q k^T * scale - lse), no softmax pass), then
//   dv = p^T @ dout,  dp = dout @ v^T,  ds = p * (dp - rowsum(dout * out)),
//   dq = ds @ k * scale,  dk = ds^T @ q * scale.
// In one fused kernel (kernels/attention/attention_backward.h) where it serves the call (head_dim <= 128, a
// head within VMEM), else composed from matmuls, elementwise ops, a row sum and two transposes:
// correct and planned like any other graph, but the [batch, q_len, kv_len] products go through HBM.
#pragma once

#include "kernels/graph/graph.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

struct AttentionGrads {
  int q = -1, k = -1, v = -1;
};

// q [b, s, d], k and v [b, t, d], out and dout [b, s, d], lse [b, s] f32 (the forward's). Each
// gradient has its input's shape and dtype.
AttentionGrads attention_backward(Graph& g, int q, int k, int v, int out, int lse, int dout, bool causal, double scale,
                                  int passes);

// [dq, dk, dv] flattened one after another (q's dtype): the fused kernel's node when it serves
// the call on `chip`, else the composed gradients concatenated.
int attention_gradients(Graph& g, int q, int k, int v, int out, int lse, int dout, bool causal, double scale, int passes,
                        const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
