// The op graph: dtype promotion and broadcasting as torch does them, and the nodes that compute
// (elementwise, matmul, row and column reductions, attention). Nodes that move or make data are
// in graph_data.cc.
#include "kernels/graph/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/kernel_error.h"
#include "kernels/graph/broadcast_layout.h"

namespace vtpu::kernels {
namespace {

// torch's promotion for the dtypes the chip holds: float beats int beats bool; f32 beats bf16.
DType promote(DType a, DType b) {
  if (a == b) return a;
  if (dtype_is_float(a) && dtype_is_float(b)) return DType::F32;
  if (dtype_is_float(a)) return a;
  if (dtype_is_float(b)) return b;
  if (a == DType::Bool) return b;
  if (b == DType::Bool) return a;
  return dtype_bytes(a) >= dtype_bytes(b) ? a : b;
}

// Ops whose result is float even for integer inputs (torch: true division, transcendental ops).
bool float_result(ExprOp op) {
  return !(op == ExprOp::Neg || op == ExprOp::Abs || op == ExprOp::Relu || op == ExprOp::Square || op == ExprOp::Add ||
           op == ExprOp::Sub || op == ExprOp::Mul || op == ExprOp::Max || op == ExprOp::Min || op == ExprOp::Not ||
           op == ExprOp::And || op == ExprOp::Or || op == ExprOp::Byte || is_bitwise(op) || is_comparison(op));
}

DType result_dtype(ExprOp op, DType in) {
  if (is_comparison(op) || op == ExprOp::Not || op == ExprOp::And || op == ExprOp::Or) return DType::Bool;
  if (float_result(op) && dtype_is_integer(in)) return DType::F32;
  if (in == DType::Bool && (op == ExprOp::Add || op == ExprOp::Mul || op == ExprOp::Sub)) return DType::I32;
  return in;
}

}  // namespace

int64_t TensorType::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string to_string(const TensorType& t) {
  std::string s = std::string(dtype_name(t.dtype)) + "[";
  for (size_t i = 0; i < t.shape.size(); ++i) s += (i ? "," : "") + std::to_string(t.shape[i]);
  return s + "]";
}

std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  const size_t n = std::max(a.size(), b.size());
  std::vector<int64_t> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) {
      throw KernelError(fmt::format("shapes {} and {} do not broadcast", to_string({a, DType::F32}).substr(3),
                                    to_string({b, DType::F32}).substr(3)));
    }
    out[i] = da == 1 ? db : da;
  }
  return out;
}

int Graph::add(Node node) {
  if (!dtype_on_chip(node.type.dtype)) {
    throw KernelError(fmt::format("{}: {} tensors are not supported on the chip", node.label, dtype_name(node.type.dtype)));
  }
  for (int in : node.inputs) {
    if (in < 0 || in >= static_cast<int>(nodes_.size())) throw KernelError(fmt::format("{}: unknown input value {}", node.label, in));
  }
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::input(TensorType type, std::string label) {
  Node n;
  n.kind = NodeKind::Input;
  n.type = std::move(type);
  n.label = std::move(label);
  return add(std::move(n));
}

int Graph::unary(ExprOp op, int x, std::string label) {
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = op;
  n.inputs = {x};
  n.type = {node(x).type.shape, result_dtype(op, node(x).type.dtype)};
  n.label = label.empty() ? std::string(expr_op_name(op)) : std::move(label);
  return add(std::move(n));
}

int Graph::streamable(int x, const std::vector<int64_t>& out) {
  const std::vector<int64_t>& in = node(x).type.shape;
  try {
    broadcast_layout(in, out);
    return x;
  } catch (const KernelError&) {
  }
  // A column varying along its second-to-last dim ([H, 1] against [N, C, H, W]) is copied to
  // out's leading dims only: that copy moves whole contiguous runs of H values (strided_copy's
  // Rows), where expanding every element moves them one at a time. A column constant along it
  // ([C, 1, 1]) expands fully: its repeats merge into long runs either way, and the full copy
  // then streams as it is, with no column broadcast in the kernel reading it.
  std::vector<int64_t> target = out;
  if (in.size() >= 2 && in.back() == 1 && in[in.size() - 2] > 1) target.back() = 1;
  std::vector<int64_t> strides(target.size(), 0);  // size-1 and missing dims repeat: stride 0
  int64_t stride = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t i = in.size() - 1 - k, o = target.size() - 1 - k;
    if (in[i] != 1) strides[o] = stride;
    stride *= in[i];
  }
  return strided_copy(x, target, strides, 0, "expand");
}

int Graph::binary(ExprOp op, int a, int b, std::string label) {
  if (is_bitwise(op) && (dtype_is_float(node(a).type.dtype) || dtype_is_float(node(b).type.dtype))) {
    throw KernelError(fmt::format("{}: bit patterns of integers, not {} and {}", label, to_string(node(a).type), to_string(node(b).type)));
  }
  const auto shape = broadcast_shapes(node(a).type.shape, node(b).type.shape);
  a = streamable(a, shape);
  b = streamable(b, shape);
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = op;
  n.inputs = {a, b};
  n.label = label.empty() ? std::string(expr_op_name(op)) : std::move(label);
  n.type = {shape, result_dtype(op, promote(node(a).type.dtype, node(b).type.dtype))};
  return add(std::move(n));
}

int Graph::byte_of(int x, int b, std::string label) {
  if (node(x).type.dtype != DType::I32 || b < 0 || b > 3) {
    throw KernelError(fmt::format("{}: byte {} of {}: takes int32 values and a byte 0..3", label, b, to_string(node(x).type)));
  }
  return binary_scalar(ExprOp::Byte, x, b, false, std::move(label));
}

int Graph::binary_scalar(ExprOp op, int a, double scalar, bool scalar_first, std::string label) {
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = op;
  n.inputs = {a};
  n.scalar_operand = true;
  n.scalar = scalar;
  n.scalar_first = scalar_first;
  n.label = label.empty() ? std::string(expr_op_name(op)) : std::move(label);
  // A Python float scalar makes an int tensor's result float; it never widens a float tensor.
  const DType in = node(a).type.dtype;
  const bool float_scalar = scalar != static_cast<double>(static_cast<int64_t>(scalar));
  n.type = {node(a).type.shape, result_dtype(op, float_scalar && dtype_is_integer(in) ? DType::F32 : in)};
  return add(std::move(n));
}

int Graph::where(int condition, int a, int b, std::string label) {
  const auto shape = broadcast_shapes(node(condition).type.shape, broadcast_shapes(node(a).type.shape, node(b).type.shape));
  condition = streamable(condition, shape);
  a = streamable(a, shape);
  b = streamable(b, shape);
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = ExprOp::Where;
  n.inputs = {condition, a, b};
  n.label = label.empty() ? "where" : std::move(label);
  n.type = {shape, promote(node(a).type.dtype, node(b).type.dtype)};
  return add(std::move(n));
}

int Graph::fma(int a, int b, int c, std::string label) {
  for (int x : {a, b, c}) {
    if (node(x).type.dtype != DType::F32) throw KernelError(fmt::format("{}: f32 operands, not {}", label, to_string(node(x).type)));
  }
  const auto shape = broadcast_shapes(node(a).type.shape, broadcast_shapes(node(b).type.shape, node(c).type.shape));
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = ExprOp::Fma;
  n.inputs = {streamable(a, shape), streamable(b, shape), streamable(c, shape)};
  n.label = std::move(label);
  n.type = {shape, DType::F32};
  return add(std::move(n));
}

// The same 32 bits read as another dtype (f32 <-> int32): a node that computes nothing.
int Graph::reinterpret(int x, DType from, DType to, ExprOp op, std::string label) {
  if (node(x).type.dtype != from) {
    throw KernelError(fmt::format("{}: takes {} values, not {}", label, dtype_name(from), to_string(node(x).type)));
  }
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = op;
  n.inputs = {x};
  n.label = std::move(label);
  n.type = {node(x).type.shape, to};
  return add(std::move(n));
}

int Graph::bits_of(int x, std::string label) { return reinterpret(x, DType::F32, DType::I32, ExprOp::AsBits, std::move(label)); }

int Graph::float_from_bits(int x, std::string label) {
  return reinterpret(x, DType::I32, DType::F32, ExprOp::FromBits, std::move(label));
}

int Graph::cast(int x, DType dtype, std::string label) {
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = ExprOp::ToF32;  // the planner casts to n.type.dtype on store
  n.inputs = {x};
  n.type = {node(x).type.shape, dtype};
  n.label = label.empty() ? fmt::format("to_{}", dtype_name(dtype)) : std::move(label);
  return add(std::move(n));
}

int Graph::matmul(int a, int b, bool transpose_b, int passes, std::string label, bool transpose_a, bool f32_result) {
  const auto& ta = node(a).type;
  const auto& tb = node(b).type;
  if (ta.shape.size() < 2 || tb.shape.size() < 2) throw KernelError(fmt::format("{}: operands need at least 2 dims", label));
  if (transpose_a && ta.shape.size() > 2 && tb.shape.size() == 2) {
    throw KernelError(fmt::format("{}: a batched A^T needs a batched B", label));
  }
  const int64_t k = transpose_a ? ta.shape[ta.shape.size() - 2] : ta.shape.back();
  const int64_t m = transpose_a ? ta.shape.back() : ta.shape[ta.shape.size() - 2];
  const int64_t kb = transpose_b ? tb.shape.back() : tb.shape[tb.shape.size() - 2];
  const int64_t nn = transpose_b ? tb.shape[tb.shape.size() - 2] : tb.shape.back();
  if (k != kb) {
    throw KernelError(fmt::format("{}: {}{} @ {}{}: inner dimensions differ", label, to_string(ta), transpose_a ? "^T" : "",
                                  to_string(tb), transpose_b ? "^T" : ""));
  }
  if (tb.shape.size() > 2) {
    // batched B must match A's batch dims exactly (no broadcasting of batch dims yet)
    if (tb.shape.size() != ta.shape.size() ||
        !std::equal(ta.shape.begin(), ta.shape.end() - 2, tb.shape.begin())) {
      throw KernelError(fmt::format("{}: batch dims of {} and {} differ", label, to_string(ta), to_string(tb)));
    }
  }
  Node n;
  n.kind = NodeKind::MatMul;
  n.inputs = {a, b};
  n.transpose_a = transpose_a;
  n.transpose_b = transpose_b;
  n.passes = passes;
  n.label = std::move(label);
  auto shape = ta.shape;
  shape[shape.size() - 2] = m;
  shape.back() = nn;
  const DType out = ta.dtype == tb.dtype && dtype_is_float(ta.dtype) && !f32_result ? ta.dtype : DType::F32;
  n.type = {shape, out};
  return add(std::move(n));
}

int Graph::attention(int q, int k, int v, bool causal, double scale, int passes, bool with_lse, std::string label) {
  const TensorType &tq = node(q).type, &tk = node(k).type, &tv = node(v).type;
  const auto three_d = [](const TensorType& t) { return t.shape.size() == 3; };
  if (!three_d(tq) || !three_d(tk) || tk != tv || tq.dtype != tk.dtype || tq.shape[0] != tk.shape[0] || tq.shape[2] != tk.shape[2]) {
    throw KernelError(fmt::format("{}: q [b, s, d] and k, v [b, t, d] of one dtype expected, got {}, {}, {}", label,
                                  to_string(tq), to_string(tk), to_string(tv)));
  }
  if (tq.dtype != DType::F32 && tq.dtype != DType::BF16) throw KernelError(fmt::format("{}: f32 or bf16, not {}", label, dtype_name(tq.dtype)));
  Node n;
  n.kind = NodeKind::Attention;
  n.inputs = {q, k, v};
  n.causal = causal;
  n.scalar = scale;
  n.passes = passes;
  n.with_lse = with_lse;
  n.label = std::move(label);
  if (with_lse) {
    const AttentionSpec spec = attention_spec(*this, q, k, causal, scale, passes);
    n.type = {{(attention_lse_offset(spec) + spec.batch * spec.q_len * 4) / 4}, DType::F32};
  } else {
    n.type = tq;
  }
  return add(std::move(n));
}

int Graph::attention_backward(int q, int k, int v, int out, int dout, int lse, bool causal, double scale, int passes,
                              std::string label) {
  const TensorType &tq = node(q).type, &tk = node(k).type;
  if (node(out).type != tq || node(dout).type != tq || node(v).type != tk ||
      node(lse).type != TensorType{{tq.shape.at(0), tq.shape.at(1)}, DType::F32}) {
    throw KernelError(fmt::format("{}: out and dout must be q's type ({}), v k's, lse f32 [b, s]", label, to_string(tq)));
  }
  Node n;
  n.kind = NodeKind::AttentionBackward;
  n.inputs = {q, k, v, out, dout, lse};
  n.causal = causal;
  n.scalar = scale;
  n.passes = passes;
  n.label = std::move(label);
  n.type = {{tq.numel() + 2 * tk.numel()}, tq.dtype};
  return add(std::move(n));
}

AttentionSpec attention_spec(const Graph& g, int q, int k, bool causal, double scale, int passes) {
  const TensorType &tq = g.node(q).type, &tk = g.node(k).type;
  AttentionSpec spec;
  spec.batch = tq.shape.at(0);
  spec.q_len = tq.shape.at(1);
  spec.kv_len = tk.shape.at(1);
  spec.head_dim = tq.shape.at(2);
  spec.dtype = tq.dtype;
  spec.causal = causal;
  spec.scale = scale;
  spec.passes = passes;
  return spec;
}

int Graph::row(RowOp op, int x, int weight, int bias, double eps, std::string label, int64_t correction) {
  Node n;
  n.correction = correction;
  n.kind = NodeKind::Row;
  n.row_op = op;
  n.inputs = {x};
  n.row_weight = weight >= 0;
  if (weight >= 0) n.inputs.push_back(weight);
  if (bias >= 0) n.inputs.push_back(bias);
  n.eps = eps;
  n.label = label.empty() ? std::string(row_op_name(op)) : std::move(label);
  auto shape = node(x).type.shape;
  if (shape.empty()) throw KernelError(fmt::format("{}: needs at least one dim", n.label));
  if (shape.back() > kMaxRowCols) {  // refused when recorded, so the op can fall back then, not fail at the flush
    throw KernelError(fmt::format("{}: rows of {} elements exceed {}", n.label, shape.back(), kMaxRowCols));
  }
  if (row_op_reduces(op)) shape.pop_back();
  const DType in = node(x).type.dtype;
  n.type = {shape, dtype_is_float(in) ? in : DType::F32};
  return add(std::move(n));
}

int Graph::column_reduce(RowOp op, int x, std::string label) {
  Node n;
  n.kind = NodeKind::ColumnReduce;
  n.row_op = op;
  n.inputs = {x};
  n.label = label.empty() ? std::string(row_op_name(op)) : std::move(label);
  const TensorType& t = node(x).type;
  if (op != RowOp::Sum && op != RowOp::Mean && op != RowOp::Max && op != RowOp::Min) {
    throw KernelError(fmt::format("{}: only sums, means, maxima and minima reduce over the leading axis", n.label));
  }
  if (t.shape.size() != 2) throw KernelError(fmt::format("{}: reduces a 2-D tensor over its leading axis", n.label));
  if (!dtype_is_float(t.dtype)) throw KernelError(fmt::format("{}: f32, bf16 or f16", n.label));
  n.type = {{t.shape[1]}, t.dtype};
  return add(std::move(n));
}

void Graph::mark_output(int value) {
  node(value);  // range check
  outputs_.push_back(value);
}

bool Graph::is_output(int id) const { return std::find(outputs_.begin(), outputs_.end(), id) != outputs_.end(); }

std::vector<int> Graph::consumer_counts() const {
  std::vector<int> counts(nodes_.size(), 0);
  for (const auto& n : nodes_) {
    for (int in : n.inputs) ++counts[in];
  }
  return counts;
}

}  // namespace vtpu::kernels
