// Lowering of fusion groups: each group's nodes become one Expr (elementwise ops, in order, with
// bf16 results rounded like torch rounds them) inside the kernel spec of the group's kind, and the
// program comes from the cache (generated per size bucket, see kernels/README.md).
#include "kernels/graph/lower_group.h"
#include "kernels/graph/lower_single_node.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <bit>
#include <map>
#include <numeric>
#include <optional>
#include <climits>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/elementwise.h"
#include "kernels/generators/matmul.h"
#include "kernels/generators/rowwise.h"
#include "kernels/generators/strided_copy.h"
#include "kernels/graph/window_pieces.h"

namespace vtpu::kernels {
namespace {

// Builds the Expr of a group's elementwise nodes. External values become Input operands in
// first-use order (`operands`); `preset` maps values already defined (a matmul's accumulator).
class ExprBuilder {
 public:
  ExprBuilder(const Graph& g, Expr& e, int first_operand) : g_(g), e_(e), next_operand_(first_operand) {}

  void define(int value, int expr_node) { ids_[value] = expr_node; }
  const std::vector<int>& operands() const { return operands_; }

  int value(int v) {
    auto it = ids_.find(v);
    if (it != ids_.end()) return it->second;
    operands_.push_back(v);
    const int id = e_.input(next_operand_++, register_type(g_.node(v).type.dtype));
    ids_[v] = id;
    return id;
  }

  void node(int id) {
    const Node& n = g_.node(id);
    int out;
    if (n.expr_op == ExprOp::Constant) {  // Graph::full
      const bool int_type = dtype_is_integer(n.type.dtype);
      out = e_.constant(n.scalar, int_type ? ValueType::I32 : ValueType::F32);
      if (n.type.dtype == DType::Bool) out = e_.cast(out, ValueType::Mask);
    } else if (n.expr_op == ExprOp::Where) {
      out = e_.where(value(n.inputs[0]), value(n.inputs[1]), value(n.inputs[2]));
    } else if (n.expr_op == ExprOp::Fma) {
      out = e_.fma(value(n.inputs[0]), value(n.inputs[1]), value(n.inputs[2]));
    } else if (n.expr_op == ExprOp::ToF32) {  // Graph::cast
      const int x = value(n.inputs[0]);
      if (n.type.dtype == DType::Bool) out = e_.cast(x, ValueType::Mask);
      else if (dtype_is_integer(n.type.dtype)) out = to_integer(x);
      else out = e_.cast(x, ValueType::F32);
    } else if (n.scalar_operand) {
      const bool int_scalar = dtype_is_integer(g_.node(n.inputs[0]).type.dtype) && n.scalar == double(int64_t(n.scalar));
      const int c = e_.constant(n.scalar, int_scalar ? ValueType::I32 : ValueType::F32);
      const int x = value(n.inputs[0]);
      out = n.scalar_first ? e_.binary(n.expr_op, c, x) : e_.binary(n.expr_op, x, c);
    } else if (n.inputs.size() == 1) {
      out = e_.unary(n.expr_op, value(n.inputs[0]));
    } else {
      out = e_.binary(n.expr_op, value(n.inputs[0]), value(n.inputs[1]));
    }
    out = e_.round_to(n.type.dtype, out);  // torch rounds each bf16 or f16 result
    ids_[id] = out;
  }

 private:
  // A float to an integer as torch's CPU converts it on x86 (cvttss2si, then the low bytes for the
  // narrower types): NaN, the infinities and everything outside int32 give INT32_MIN (0 as int16,
  // int8 or uint8). The chip's vcvt.f2i saturates and maps NaN to 0, as XLA's convert does.
  int to_integer(int x) {
    if (e_.node(x).type != ValueType::F32) return e_.cast(x, ValueType::I32);
    const int fits = e_.binary(ExprOp::And, e_.binary(ExprOp::Ge, x, e_.constant(-2147483648.0)),
                               e_.binary(ExprOp::Lt, x, e_.constant(2147483648.0)));
    return e_.where(fits, e_.cast(x, ValueType::I32), e_.constant(INT32_MIN, ValueType::I32));
  }

  const Graph& g_;
  Expr& e_;
  int next_operand_;
  std::map<int, int> ids_;
  std::vector<int> operands_;
};

// Streaming kernels take their row count at launch (BlockStream); the planner sizes their blocks
// for the next power of two, so a new sequence length reuses the programs generated for its
// bucket instead of generating its own. Blocks never exceed the VMEM budget, so for rows past one
// block the program is the one a specialised generator would make; below, it has one block either
// way and only the DMA sizes, which follow the real row count, differ.
int64_t row_bucket(int64_t rows) { return std::max<int64_t>(kSublanes, int64_t(std::bit_ceil(uint64_t(rows)))); }

// Elementwise kernels take their column count at launch too. Blocks are at most
// kMaxElementwiseBlockCols wide, so every wider tensor shares one program; narrower ones round up
// to a power of two of whole vregs (128 lanes), which sizes the VMEM buffers. The tile loops
// follow the real count.
int64_t col_bucket(int64_t cols) {
  return std::min<int64_t>(kMaxElementwiseBlockCols, std::max<int64_t>(kLanes, int64_t(std::bit_ceil(uint64_t(cols)))));
}

std::string layout_name(Layout l) {
  switch (l) {
    case Layout::Full: return "full";
    case Layout::Row: return "row";
    case Layout::Column: return "col";
    case Layout::Scalar: return "scalar";
    case Layout::Periodic: return "periodic";
  }
  return "?";
}

std::string operand_key(const std::vector<Operand>& ops) {
  std::string s;
  for (const auto& o : ops) {  // periods, strides and offsets are launch scalars
    s += fmt::format("{}/{}{},", dtype_name(o.dtype), layout_name(o.layout), o.strided ? "/strided" : "");
  }
  return s;
}

bool is_view(const KernelGroup& grp, int v) { return std::find(grp.views.begin(), grp.views.end(), v) != grp.views.end(); }

// `grp`, when given, names the values among them that are row-strided views read in place
// (KernelGroup::views).
std::vector<Operand> operands_for(const Graph& g, const std::vector<int>& values, const std::vector<int64_t>& out_shape,
                                  const KernelGroup* grp = nullptr) {
  std::vector<Operand> ops;
  for (int v : values) {
    const Node& n = g.node(v);
    const Layout l = broadcast_layout(n.type.shape, out_shape);
    ops.push_back({n.type.dtype, l, l == Layout::Periodic ? n.type.numel() / n.type.shape.back() : 0});
    if (grp && is_view(*grp, v)) {
      if (l != Layout::Full) throw KernelError("a view read in place must have the kernel's shape");
      const Node& view = view_node(g, v);
      ops.back().strided = true;
      ops.back().row_stride = *view_row_stride(view);
      ops.back().offset = view.offset;
    }
  }
  return ops;
}

// The values a launch binds for `operands`: a view read in place binds its source.
std::vector<int> bound_values(const Graph& g, const KernelGroup& grp, std::vector<int> operands) {
  for (int& v : operands) {
    if (is_view(grp, v)) v = view_node(g, v).inputs[0];
  }
  return operands;
}

std::string label_of(const Graph& g, const KernelGroup& grp) {
  std::string s;
  for (int n : grp.nodes) s += (s.empty() ? "" : "+") + g.node(n).label;
  return s;
}

// A group whose nodes all have the output's size and whose operands are whole tensors or scalars
// reads and writes plain contiguous buffers (equal element counts leave no dim to broadcast), so
// it streams lane-dense whatever the tensors' shape: rows of `width` over the flat data, the last
// row cut at the end (ElementwiseSpec::flat). A 1-D bias, a [N, 1] column or a [N, 64] tensor
// then fills whole 8 x 128 tiles and moves in block-sized DMAs, where its own shape would leave
// sublanes or lanes idle. The program depends on the width alone (blocks are sized at launch),
// and the width on the natural view's bucket (rows and columns bucketed as for any elementwise
// kernel), so every shape that shared a program before still does.
struct FlatView {
  int64_t elements, width;
};

std::optional<FlatView> flat_view(const Graph& g, const KernelGroup& grp, const std::vector<int>& operands) {
  if (!streams_flat(g, grp.nodes, operands)) return std::nullopt;
  const auto& out = g.node(grp.nodes.back()).type;
  const int64_t numel = out.numel();
  const auto [rows, cols] = rows_cols(out.shape);
  // Small tensors take narrower rows, so that they still fill eight sublanes.
  const int64_t width = std::clamp<int64_t>(row_bucket(rows) * col_bucket(cols) / kSublanes, kLanes, kMaxElementwiseBlockCols);
  return FlatView{numel, width};
}

Launch lower_elementwise(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  ElementwiseSpec spec;
  ExprBuilder b(g, spec.expr, 0);
  for (int n : grp.nodes) b.node(n);
  for (int o : grp.outputs) {
    spec.expr.add_output(b.value(o));
    spec.outputs.push_back(g.node(o).type.dtype);
  }
  Launch l;
  l.args = bound_values(g, grp, b.operands());
  l.args.insert(l.args.end(), grp.outputs.begin(), grp.outputs.end());
  if (const auto flat = grp.views.empty() ? flat_view(g, grp, b.operands()) : std::nullopt) {
    spec.flat = true;
    for (int v : b.operands()) {
      const auto& t = g.node(v).type;
      spec.inputs.push_back({t.dtype, t.numel() == 1 && flat->elements > 1 ? Layout::Scalar : Layout::Full, 0});
    }
    std::vector<RangedArg> args;
    for (int v : l.args) {
      const auto& t = g.node(v).type;
      const uint64_t bytes = dtype_bytes(t.dtype);
      args.push_back(t.numel() == 1 && flat->elements > 1 ? RangedArg{0, bytes} : RangedArg{bytes, bytes * uint64_t(t.numel())});
    }
    l.pieces = flat_window_pieces(args, flat->elements, flat->width);
    l.scalars = l.pieces.empty() ? flat_stream_scalars(flat->elements, flat->width) : l.pieces.front().scalars;
    spec.rows = ((int64_t{1} << 31) - 1) / flat->width;  // any size: blocks are sized at launch
    spec.cols = flat->width;
  } else {
    const auto& shape = g.node(grp.nodes.back()).type.shape;
    const auto [rows, cols] = rows_cols(shape);
    spec.inputs = operands_for(g, b.operands(), shape, &grp);
    // A broadcast over more than one launch addresses runs in pieces of rows.
    l.pieces = row_window_pieces(g, l.args, spec.inputs, grp.outputs.size(), rows, cols, std::max(cols, col_bucket(cols)));
    l.scalars = l.pieces.empty() ? stream_scalars(rows, cols, spec.inputs) : l.pieces.front().scalars;
    spec.rows = row_bucket(l.pieces.empty() ? rows : l.pieces.front().scalars.front());
    spec.cols = col_bucket(cols);
  }
  std::string key = fmt::format("ew{}|{}x{}|{}|", spec.flat ? "flat" : "", spec.rows, spec.cols, operand_key(spec.inputs));
  for (DType t : spec.outputs) key += fmt::format("{},", dtype_name(t));
  key += "|" + spec.expr.signature() + "|" + chip.name;
  l.program = cache.get_or_build(key, [&] { return make_elementwise(spec, chip); }, &l.cache_hit);
  return l;
}

Launch lower_matmul(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& mm = g.node(grp.nodes.front());
  const auto& ta = g.node(mm.inputs[0]).type;
  const auto& tb = g.node(mm.inputs[1]).type;
  MatmulSpec spec;
  spec.a_transposed = mm.transpose_a;
  spec.k = ta.shape[ta.shape.size() - (mm.transpose_a ? 2 : 1)];
  spec.n = mm.type.shape.back();
  if (tb.shape.size() == 2) {  // one weight for every row of A: a single (batch x M) x K problem (A^T: 2-D)
    spec.m = ta.numel() / spec.k;
    spec.b_shared = true;
  } else {
    spec.m = mm.type.shape[mm.type.shape.size() - 2];
    spec.batch = ta.numel() / (spec.m * spec.k);
  }
  spec.a_dtype = ta.dtype;
  spec.b_dtype = tb.dtype;
  spec.b_transposed = mm.transpose_b;
  // f16 products are exact in f32 on the CPU; here they are exact at 6 passes (two bf16 parts
  // each: 4 products), whatever float32_matmul_precision asks of f32.
  const bool f16 = ta.dtype == DType::F16 || tb.dtype == DType::F16;
  spec.passes = f16 ? 6 : (ta.dtype == DType::F32 || tb.dtype == DType::F32) ? mm.passes : 1;
  const int last = grp.nodes.back();
  spec.out_dtype = g.node(last).type.dtype;
  Launch l;
  l.args = {mm.inputs[0], mm.inputs[1]};
  if (grp.nodes.size() > 1) {
    Expr e;
    ExprBuilder b(g, e, 1);
    int acc = e.input(0, ValueType::F32);
    acc = e.round_to(mm.type.dtype, acc);
    b.define(grp.nodes.front(), acc);
    for (size_t i = 1; i < grp.nodes.size(); ++i) b.node(grp.nodes[i]);
    e.add_output(b.value(last));
    spec.epilogue = e;
    spec.epilogue_inputs = operands_for(g, b.operands(), g.node(last).type.shape);
    l.args.insert(l.args.end(), b.operands().begin(), b.operands().end());
  }
  l.args.push_back(last);
  // M, N and K are launch scalars. Programs are generated for M's power-of-two bucket, N rounded
  // up to its column block (one MXU width up to all of the core's MXUs, then multiples of those)
  // and K rounded up to whole MXU slices: what the generator would lay out for the exact shape,
  // so sharing costs nothing. A [S, S] score matmul or a probs @ V over S keys reuses one program
  // for every S in a window of 128.
  const int64_t d = chip.mxu_dim, all_mxus = int64_t{chip.mxu_per_core} * d;
  const int64_t n_block = std::min(all_mxus, round_up(spec.n, d));
  const int64_t m = spec.m, n = spec.n, k = spec.k;
  spec.m = row_bucket(m);
  spec.n = round_up(n, n_block);
  spec.k = round_up(k, d);
  l.scalars = matmul_scalars(spec, chip, m, n, k);
  const std::string key = fmt::format("mm|{}x{}x{}x{}|{}{}{}|t{}{}s{}p{}|{}|{}|{}", spec.batch, spec.m, spec.n, spec.k,
                                      dtype_name(spec.a_dtype), dtype_name(spec.b_dtype), dtype_name(spec.out_dtype),
                                      spec.a_transposed, spec.b_transposed, spec.b_shared, spec.passes, operand_key(spec.epilogue_inputs),
                                      spec.epilogue ? spec.epilogue->signature() : "", chip.name);
  l.program = cache.get_or_build(key, [&] { return make_matmul(spec, chip); }, &l.cache_hit);
  return l;
}

Launch lower_row(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& r = g.node(grp.nodes.back());
  const int x = r.inputs[0];
  RowwiseSpec spec;
  spec.op = r.row_op;
  spec.eps = r.eps;
  spec.correction = r.correction;
  std::tie(spec.rows, spec.cols) = rows_cols(g.node(x).type.shape);
  spec.out_dtype = r.type.dtype;
  Expr e;
  ExprBuilder b(g, e, 0);
  for (size_t i = 0; i + 1 < grp.nodes.size(); ++i) b.node(grp.nodes[i]);
  e.add_output(b.value(x));
  spec.prologue = e;
  spec.inputs = operands_for(g, b.operands(), g.node(x).type.shape, &grp);
  Launch l;
  l.args = bound_values(g, grp, b.operands());
  const size_t bias_at = r.row_weight ? 2 : 1;  // a bias without a weight comes right after x
  if (r.row_weight) {
    spec.has_weight = true;
    spec.weight_dtype = g.node(r.inputs[1]).type.dtype;
    l.args.push_back(r.inputs[1]);
  }
  if (r.inputs.size() > bias_at) {
    spec.has_bias = true;
    const DType bias_dtype = g.node(r.inputs[bias_at]).type.dtype;
    if (spec.has_weight && bias_dtype != spec.weight_dtype) throw KernelError(fmt::format("{}: weight and bias dtypes differ", r.label));
    spec.weight_dtype = bias_dtype;
    l.args.push_back(r.inputs[bias_at]);
  }
  l.args.push_back(grp.nodes.back());
  const int64_t rows = spec.rows, cols = spec.cols;
  // Rows that are whole vregs wide (hidden sizes) keep a program of their exact width that masks
  // nothing; other widths (sequence lengths: softmax over scores) share one per power of two,
  // reductions over narrow rows one of 32 or 64 columns (the narrow row kernel's).
  spec.whole_chunks = spec.cols % kLanes == 0;
  if (!spec.whole_chunks) {
    const bool narrow = spec.cols <= kMaxNarrowRowCols && narrow_rows_serve(spec);
    spec.cols = narrow ? narrow_row_program_cols(spec.cols) : std::max<int64_t>(kLanes, int64_t(std::bit_ceil(uint64_t(spec.cols))));
  }
  // More rows than one launch addresses (4 GB of f32 logits) run in pieces of rows.
  l.pieces = row_window_pieces(g, l.args, spec.inputs, 1, rows, cols, spec.cols);
  l.scalars = l.pieces.empty() ? stream_scalars(rows, cols, spec.inputs) : l.pieces.front().scalars;
  spec.rows = row_bucket(l.pieces.empty() ? rows : l.pieces.front().scalars.front());
  const std::string key = fmt::format("row|{}|{}x{}{}|{}|{}|{}|{}|{}{}{}|{}|{}", row_op_name(spec.op), spec.rows, spec.cols,
                                      spec.whole_chunks ? "" : "(ragged)",
                                      operand_key(spec.inputs), dtype_name(spec.out_dtype), spec.eps, spec.correction,
                                      spec.has_weight, spec.has_bias, dtype_name(spec.weight_dtype), e.signature(), chip.name);
  l.program = cache.get_or_build(key, [&] { return make_rowwise(spec, chip); }, &l.cache_hit);
  return l;
}

}  // namespace

Launch lower_group(const Graph& graph, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  Launch l;
  try {
    switch (grp.kind) {
      case KernelGroup::Kind::Elementwise: l = lower_elementwise(graph, grp, chip, cache); break;
      case KernelGroup::Kind::MatMul: l = lower_matmul(graph, grp, chip, cache); break;
      case KernelGroup::Kind::Row: l = lower_row(graph, grp, chip, cache); break;
      case KernelGroup::Kind::Copy: l = lower_single_node(graph, grp, chip, cache); break;
    }
  } catch (const KernelError& e) {  // name the fused kernel: the user sees aten ops, not groups
    std::string inputs, outputs;
    for (int in : grp.inputs) inputs += (inputs.empty() ? "" : ", ") + to_string(graph.node(in).type);
    for (int out : grp.outputs) outputs += (outputs.empty() ? "" : ", ") + to_string(graph.node(out).type);
    throw KernelError(fmt::format("kernel {} (inputs {}; outputs {}): {}", label_of(graph, grp), inputs, outputs, e.what()));
  }
  l.label = label_of(graph, grp);
  return l;
}

}  // namespace vtpu::kernels
