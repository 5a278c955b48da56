// The op graph the bridge fills and the planner lowers: values are dense row-major tensors
// (views are materialised before they get here), nodes are ops with attributes. Broadcasting
// follows torch's rules, checked when a node is added.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "isa/program.h"
#include "kernels/attention/attention.h"
#include "kernels/codegen/dtype.h"
#include "kernels/generators/random.h"
#include "kernels/generators/rowwise.h"
#include "kernels/codegen/vector_expr.h"

namespace vtpu::kernels {

struct TensorType {
  std::vector<int64_t> shape;
  DType dtype = DType::F32;
  int64_t numel() const;
  bool operator==(const TensorType&) const = default;
};

std::string to_string(const TensorType& t);

enum class NodeKind : uint8_t {
  Input,        // a tensor handed to the graph (HBM, owned by the caller)
  Elementwise,  // expr_op over 1-3 inputs (broadcast), optionally with a scalar operand
  MatMul,       // [..., M, K] @ [K, N] or [..., K, N] (or B^T given as [N, K], A^T as [..., K, M])
  Row,          // row_op over the last axis
  Reshape,      // the same elements in the same order under another shape (or a dense part of them,
                // from byte `offset`, maybe read as another dtype): no kernel, an alias
  StridedCopy,  // a dense copy of a strided view of inputs[0] (a whole buffer, flat)
  Concat,       // torch.cat of the inputs along `cat_dim`
  Gather,       // rows of inputs[0] ([rows, ...]) picked by the indices inputs[1] (index_select, dim 0)
  Random,       // random numbers of `random_kind` (Philox), keyed by inputs[0] (2 x i32)
  ScatterAdd,   // zeros of the node's shape, rows of inputs[0] added at the indices inputs[1]
  ColumnReduce, // row_op (sum, mean, max, min) over the leading axis of inputs[0] ([rows, cols] -> [cols])
  Iota,         // element i (flat, row-major) = i, f32 or i32; no inputs
  Int64Narrow,  // int64 values given as [.., 2] int32 words -> [..] int32, checked within `narrow_bound`
  Attention,    // softmax(q @ k^T * scalar) @ v, fused (kernels/attention/attention.h); inputs q, k, v
  AttentionBackward,  // its gradients, fused (kernels/attention/attention_backward.h); inputs q, k, v, out, dout, lse
  UserKernel,   // a program given whole (vtpu.pallas): its buffer arguments are the inputs, then the value
};

struct Node {
  NodeKind kind = NodeKind::Input;
  std::vector<int> inputs;  // value ids (a node's id is its output value's id)
  TensorType type;
  std::string label;        // what the user called it (an aten op name), for reports
  // Elementwise
  ExprOp expr_op = ExprOp::Add;
  bool scalar_operand = false;  // inputs[0] (op) scalar
  double scalar = 0;
  bool scalar_first = false;    // scalar (op) inputs[0], for sub/div/pow with the scalar on the left
  // MatMul
  bool transpose_a = false;
  bool transpose_b = false;
  int passes = 1;
  // StridedCopy: the view's strides (elements) and offset into the source buffer
  std::vector<int64_t> strides;
  int64_t offset = 0;  // (a Reshape's: the byte of its input it starts at)
  int64_t cat_dim = 0;
  // Gather, ScatterAdd: the indices are int64 given as [n, 2] int32 words (low, high)
  bool index_pairs = false;
  int64_t padding_index = -1;  // ScatterAdd: rows at this index are skipped
  bool wrap_negative = false;  // Gather: negative indices count from the end
  // Random: the distribution and its parameters (uniform: [a, b); normal: mean a, std b)
  RandomKind random_kind = RandomKind::Uniform;
  double random_a = 0, random_b = 1;
  // Int64Narrow: values must lie in (-narrow_bound, narrow_bound), else the kernel traps
  int64_t narrow_bound = 0;
  // Attention: torch's is_causal mask; the value packs the logsumexp after the output
  bool causal = false;
  bool with_lse = false;
  // Row: inputs are x, then the weight (when row_weight), then the bias (when there is one more)
  RowOp row_op = RowOp::Sum;
  bool row_weight = false;
  double eps = 1e-5;
  int64_t correction = 1;
  // UserKernel: the program (shared: the bridge keeps one per kernel source)
  std::shared_ptr<const isa::Program> program;
};

class Graph {
 public:
  int input(TensorType type, std::string label = "input");
  // Elementwise over tensors with broadcasting; the result dtype follows torch's promotion
  // (comparisons give bool, float ops on ints give f32).
  int unary(ExprOp op, int x, std::string label = "");
  int binary(ExprOp op, int a, int b, std::string label = "");
  int binary_scalar(ExprOp op, int a, double scalar, bool scalar_first = false, std::string label = "");
  int where(int condition, int a, int b, std::string label = "");
  // a * b + c with one f32 rounding (broadcast); f32 operands.
  int fma(int a, int b, int c, std::string label = "fma");
  // An f32 value's bit pattern as int32, and an int32 bit pattern as f32 (free: a vreg is 32 bits).
  int bits_of(int x, std::string label = "as_bits");
  int float_from_bits(int x, std::string label = "from_bits");
  int cast(int x, DType dtype, std::string label = "");
  // byte b (0..3) of each int32 element, as an int32 0..255 (the top byte unsigned too): the exact
  // bf16 digits an int32 splits into.
  int byte_of(int x, int b, std::string label = "byte");
  // a @ b; with transpose_a, a holds A^T ([..., K, M]: a weight gradient's x^T without a transpose
  // kernel first); A^T is batched only with a batched b. bf16 or f16 operands give their dtype,
  // unless f32_result asks for the f32 accumulator itself (addmm's epilogue rounds once).
  int matmul(int a, int b, bool transpose_b = false, int passes = 1, std::string label = "matmul", bool transpose_a = false,
             bool f32_result = false);
  // Reductions keep no dim: [..., n] -> [...]. Norms take optional [n] weight and bias (-1: none).
  int row(RowOp op, int x, int weight = -1, int bias = -1, double eps = 1e-5, std::string label = "",
          int64_t correction = 1);
  // row_op (Sum, Mean, Max or Min) over the leading axis of a 2-D x: [rows, cols] -> [cols] (a
  // sum over dim 0, without permuting x first).
  int column_reduce(RowOp op, int x, std::string label = "");
  // x's elements under another shape (a view of a result): the planner makes x's producer write
  // it to HBM and readers of the reshape read that buffer.
  int reshape(int x, std::vector<int64_t> shape, std::string label = "view");
  // x's bytes from `byte_offset` read as a value of `type`, an alias like reshape: a part of a
  // result (a chunk along its first dim, one output of a kernel's packed value) read where it
  // lies. `type`'s dtype is x's, or both are held as their plain bytes (dtype_is_plain_bytes: a
  // bit view).
  int part(int x, int64_t byte_offset, TensorType type, std::string label = "view");
  // Whether x has such a part: aligned, within x's bytes, and of x's dtype or a bit view.
  bool has_part(int x, int64_t byte_offset, const TensorType& type) const;
  // Whether v is such a part (a Reshape from an offset, of fewer bytes, or of another dtype).
  bool is_part(int v) const {
    const Node& n = node(v);
    if (n.kind != NodeKind::Reshape) return false;
    const TensorType& in = node(n.inputs.at(0)).type;
    return n.offset != 0 || n.type.dtype != in.dtype || n.type.numel() != in.numel();
  }
  // Dense copy of the view (sizes, strides, offset) of `source`'s elements in row-major order.
  int strided_copy(int source, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset,
                   std::string label = "contiguous");
  // x with its dims reordered (result dim i is x's dim order[i]), as a dense strided copy.
  int permute(int x, const std::vector<int64_t>& order, std::string label = "permute");
  // x with `before` and `after` elements of `value` around it along `dim` (blocks concatenated).
  int pad(int x, int64_t dim, int64_t before, int64_t after, double value = 0, std::string label = "pad");
  // torch.cat(inputs, dim): shapes equal except along dim, one dtype.
  int concat(const std::vector<int>& inputs, int64_t dim, std::string label = "cat");
  static constexpr size_t kMostConcatInputs = 120;  // per concat kernel (concat() groups more)
  // table[index]: rows of `table` ([rows, ...]) in the order of `index`, int32 [n], or int64
  // given as its [n, 2] int32 words (`index_pairs`). Indices are checked on the chip; with
  // `wrap_negative` (torch's x[idx]) negative ones count from the end.
  int gather(int table, int index, bool index_pairs, std::string label = "index_select", bool wrap_negative = false);
  // zeros([rows, ...]) with src's rows ([n, ...]) added at `index` (i32 [n], or int64 as [n, 2]
  // words), skipping `padding_index`: nn.Embedding's backward.
  int scatter_add(int src, int index, bool index_pairs, int64_t rows, int64_t padding_index,
                  std::string label = "embedding_dense_backward");
  // The same combining by `combine` (Max, Min or Mul) from its identity (-inf, +inf, 1) instead of
  // adding into zeros: scatter_reduce's amax, amin and prod.
  int scatter_combine(int src, int index, bool index_pairs, int64_t rows, ExprOp combine, std::string label);
  // A tensor of `type` (f32 or bf16) of random numbers: element i is a function of the key (a
  // value of 2 x i32, an input so the graph's signature does not change with it) and of i.
  int random(TensorType type, RandomKind kind, double a, double b, int key, std::string label = "random");
  // A tensor of `type` (f32, exact below 2^24, or i32) whose element i (flat, row-major) is i.
  int iota(TensorType type, std::string label = "iota");
  // A user's kernel (vtpu.pallas) reading `inputs` and writing the value of `type`: its program's
  // buffer arguments are the inputs in order, then the result; it takes no scalar arguments.
  int user_kernel(const std::vector<int>& inputs, TensorType type, std::shared_ptr<const isa::Program> program);
  // int64 values, given as their [.., 2] int32 words (low, high), as int32 [..]: the chip checks
  // every high word and that |value| < bound (at most 2^31), and traps otherwise
  // (kernels/generators/int64_narrow.h).
  int int64_narrow(int words, int64_t bound, std::string label = "int64_narrow");
  // softmax(q @ k^T * scale) @ v in one fused kernel (kernels/attention/attention.h): q [batch, q_len, d],
  // k and v [batch, kv_len, d], one dtype (f32 or bf16), d at most the MXU width (the planner
  // checks). Without `with_lse` the value is the attention [batch, q_len, d]; with it, the
  // kernel's packed output as f32 words: the attention's bytes, then the logsumexp [batch, q_len]
  // f32 from attention_lse_offset (what the backward needs).
  int attention(int q, int k, int v, bool causal, double scale, int passes, bool with_lse, std::string label = "attention");
  // dq, dk and dv of attention(q, k, v) given out, dout ([batch, q_len, d]) and the forward's
  // logsumexp (f32 [batch, q_len]) in one fused kernel (kernels/attention/attention_backward.h): the value
  // is [dq, dk, dv] flattened one after another, q's dtype.
  int attention_backward(int q, int k, int v, int out, int dout, int lse, bool causal, double scale, int passes,
                         std::string label = "attention_backward");
  // A tensor of `type` with every element `value` (zeros, ones, full).
  int full(TensorType type, double value, std::string label = "full");
  void mark_output(int value);
  // Unmarks every output: a flush refused before it ran marks again what is still alive when it
  // is retried (tensors that died meanwhile are no longer results).
  void clear_outputs() { outputs_.clear(); }

  const std::vector<Node>& nodes() const { return nodes_; }
  const Node& node(int id) const { return nodes_.at(id); }
  const std::vector<int>& outputs() const { return outputs_; }
  bool is_output(int id) const;
  // Number of nodes reading each value (a value read twice by one node counts twice).
  std::vector<int> consumer_counts() const;

 private:
  int add(Node node);
  int reinterpret(int x, DType from, DType to, ExprOp op, std::string label);
  // x itself when kernels can stream it broadcast to `out`, else an expanding strided copy of it
  // (broadcasts such as [8,1] -> [2,8,64] have no streaming layout). A column varying along its
  // second-to-last dim ([8,1]) is copied to out's leading dims with a last dim of 1 ([2,8,1]),
  // which a Column layout streams: the copy moves one value per row instead of every element.
  int streamable(int x, const std::vector<int64_t>& out);
  std::vector<Node> nodes_;
  std::vector<int> outputs_;
};

// The fused attention kernels' spec for values q [batch, q_len, d] and k [batch, kv_len, d] of g.
AttentionSpec attention_spec(const Graph& g, int q, int k, bool causal, double scale, int passes);

// torch broadcasting of two shapes; throws KernelError naming both when they do not broadcast.
std::vector<int64_t> broadcast_shapes(const std::vector<int64_t>& a, const std::vector<int64_t>& b);

}  // namespace vtpu::kernels
