// Lowering of the groups that are one node each (fusion's Copy kind): strided copies, concat,
// gathers and scatter-adds, random numbers, iota, int64 narrowing, column reductions and fused
// attention; each kernel's launch scalars and its program from the cache (lower_group.h).
#include "kernels/graph/lower_single_node.h"

#include <fmt/format.h>

#include "kernels/attention/attention.h"
#include "kernels/attention/attention_backward.h"
#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/vreg_shape.h"
#include "kernels/generators/column_reduce.h"
#include "kernels/generators/concat.h"
#include "kernels/generators/gather.h"
#include "kernels/generators/int64_narrow.h"
#include "kernels/generators/iota.h"
#include "kernels/generators/random.h"
#include "kernels/generators/scatter_add.h"
#include "kernels/generators/strided_copy.h"

namespace vtpu::kernels {
namespace {

Launch lower_concat(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  ConcatSpec spec;
  spec.dtype = n.type.dtype;
  int64_t inner = 1;
  for (size_t d = 0; d < n.type.shape.size(); ++d) {
    if (int64_t(d) < n.cat_dim) spec.outer *= n.type.shape[d];
    if (int64_t(d) > n.cat_dim) inner *= n.type.shape[d];
  }
  for (int in : n.inputs) spec.widths.push_back(g.node(in).type.shape[n.cat_dim] * inner);
  Launch l;
  l.args = n.inputs;
  l.args.push_back(grp.nodes.front());
  l.scalars = concat_scalars(spec);
  const std::string key = fmt::format("cat|{}|{}|{}", dtype_name(spec.dtype), spec.widths.size(), chip.name);
  l.program = cache.get_or_build(key, [&] { return make_concat(spec.dtype, int(spec.widths.size()), chip); }, &l.cache_hit);
  return l;
}

// One program per row width, dtype and index type: the index count and the table's row count are
// launch arguments.
Launch lower_gather(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  const TensorType& table = g.node(n.inputs[0]).type;
  GatherSpec spec{n.type.dtype, table.shape[0] > 0 ? table.numel() / table.shape[0] : 1, n.index_pairs, n.wrap_negative};
  Launch l;
  l.args = {n.inputs[0], n.inputs[1], grp.nodes.front()};
  l.scalars = {int32_t(n.type.shape[0]), int32_t(table.shape[0])};
  const std::string key = fmt::format("gather|{}|{}|{}|{}|{}", dtype_name(spec.dtype), spec.width, spec.index_pairs,
                                      spec.wrap_negative, chip.name);
  l.program = cache.get_or_build(key, [&] { return make_gather(spec, chip); }, &l.cache_hit);
  return l;
}

// One program per row width, dtype and index type, like the gather.
Launch lower_scatter_add(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  const TensorType& src = g.node(n.inputs[0]).type;
  const ScatterCombine combine = n.expr_op == ExprOp::Max ? ScatterCombine::Max
                               : n.expr_op == ExprOp::Min ? ScatterCombine::Min
                               : n.expr_op == ExprOp::Mul ? ScatterCombine::Mul : ScatterCombine::Add;
  const ScatterAddSpec spec{n.type.dtype, src.shape[0] > 0 ? src.numel() / src.shape[0] : 1, n.index_pairs, combine};
  Launch l;
  l.args = {n.inputs[0], n.inputs[1], grp.nodes.front()};
  l.scalars = {int32_t(src.shape[0]), int32_t(n.type.shape[0]), int32_t(n.padding_index)};
  const std::string key = fmt::format("scatter_add|{}|{}|{}|{}|{}", dtype_name(spec.dtype), spec.width, spec.index_pairs,
                                      static_cast<int>(combine), chip.name);
  l.program = cache.get_or_build(key, [&] { return make_scatter_add(spec, chip); }, &l.cache_hit);
  return l;
}

// One program per distribution, parameters and dtype: the count and the key are launch inputs.
Launch lower_random(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  const RandomSpec spec{n.random_kind, n.random_a, n.random_b, n.type.dtype};
  Launch l;
  l.args = {grp.nodes.front(), n.inputs[0]};
  l.scalars = {int32_t(n.type.numel())};
  const std::string key = fmt::format("random|{}|{}|{}|{}|{}", static_cast<int>(spec.kind), spec.a, spec.b,
                                      dtype_name(spec.out), chip.name);
  l.program = cache.get_or_build(key, [&] { return make_random(spec, chip); }, &l.cache_hit);
  return l;
}

// One program per dtype: the count is a launch scalar.
Launch lower_iota(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  Launch l;
  l.args = {grp.nodes.front()};
  l.scalars = {int32_t(n.type.numel())};
  l.program = cache.get_or_build(fmt::format("iota|{}|{}", dtype_name(n.type.dtype), chip.name),
                                 [&] { return make_iota(n.type.dtype, chip); }, &l.cache_hit);
  return l;
}

// One program: the count and the largest magnitude allowed (the bound less one, which int32 holds
// for every bound up to 2^31) are launch scalars.
Launch lower_int64_narrow(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  Launch l;
  l.args = {n.inputs[0], grp.nodes.front()};
  l.scalars = {int32_t(n.type.numel()), int32_t(n.narrow_bound - 1)};
  l.program = cache.get_or_build(fmt::format("int64_narrow|{}", chip.name), [&] { return make_int64_narrow(chip); }, &l.cache_hit);
  return l;
}

// One program per op, dtypes and strip width (columns rounded up to 128, at most 1024): rows
// and columns are launch scalars.
Launch lower_column_reduce(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  const auto& x = g.node(n.inputs[0]).type;
  ColumnReduceSpec spec;
  spec.op = n.row_op;
  spec.in_dtype = x.dtype;
  spec.out_dtype = n.type.dtype;
  spec.cols = std::min<int64_t>(1024, round_up(x.shape[1], kLanes));
  Launch l;
  l.args = {n.inputs[0], grp.nodes.front()};
  l.scalars = column_reduce_scalars(spec, x.shape[0], x.shape[1]);
  const std::string key = fmt::format("colred|{}|{}{}|{}|{}", row_op_name(spec.op), dtype_name(spec.in_dtype),
                                      dtype_name(spec.out_dtype), spec.cols, chip.name);
  l.program = cache.get_or_build(key, [&] { return make_column_reduce(spec, chip); }, &l.cache_hit);
  return l;
}

// One program per shape, dtype, mask, scale and pass count (forward or backward).
Launch lower_attention(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  AttentionSpec spec = attention_spec(g, n.inputs[0], n.inputs[1], n.causal, n.scalar, n.passes);
  spec.write_lse = n.with_lse;
  const bool backward = n.kind == NodeKind::AttentionBackward;
  Launch l;
  l.args = n.inputs;
  l.args.push_back(grp.nodes.front());
  const std::string key = fmt::format("attention{}|{}x{}x{}x{}|{}|{}|{}|{}|{}|{}", backward ? "_backward" : "", spec.batch, spec.q_len,
                                      spec.kv_len, spec.head_dim, dtype_name(spec.dtype), spec.causal, spec.scale, spec.passes,
                                      spec.write_lse, chip.name);
  l.program = cache.get_or_build(key, [&] { return backward ? make_attention_backward(spec, chip) : make_attention(spec, chip); },
                                 &l.cache_hit);
  return l;
}

}  // namespace

Launch lower_single_node(const Graph& g, const KernelGroup& grp, const sim::ChipConfig& chip, ProgramCache& cache) {
  const Node& n = g.node(grp.nodes.front());
  if (n.kind == NodeKind::Attention || n.kind == NodeKind::AttentionBackward) return lower_attention(g, grp, chip, cache);
  if (n.kind == NodeKind::Random) return lower_random(g, grp, chip, cache);
  if (n.kind == NodeKind::Iota) return lower_iota(g, grp, chip, cache);
  if (n.kind == NodeKind::Int64Narrow) return lower_int64_narrow(g, grp, chip, cache);
  if (n.kind == NodeKind::ScatterAdd) return lower_scatter_add(g, grp, chip, cache);
  if (n.kind == NodeKind::ColumnReduce) return lower_column_reduce(g, grp, chip, cache);
  if (n.kind == NodeKind::Concat) return lower_concat(g, grp, chip, cache);
  if (n.kind == NodeKind::Gather) return lower_gather(g, grp, chip, cache);
  if (n.kind == NodeKind::UserKernel) {  // the program as given: the inputs, then the result
    Launch l;
    l.args = n.inputs;
    l.args.push_back(grp.nodes.front());
    l.program = n.program;
    l.cache_hit = true;
    return l;
  }
  // The view's sizes, strides and offset are launch scalars: one program per view structure.
  const CopyPlan copy = plan_strided_copy({n.type.shape, n.strides, n.offset, n.type.dtype}, chip);
  Launch l;
  l.args = {n.inputs[0], grp.nodes.front()};
  l.scalars = copy.scalars;
  const std::string key = fmt::format("{}|{}", copy.shape.signature(), chip.name);
  l.program = cache.get_or_build(key, [&] { return make_strided_copy(copy.shape, chip); }, &l.cache_hit);
  return l;
}

}  // namespace vtpu::kernels
