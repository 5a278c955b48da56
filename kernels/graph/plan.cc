// From a graph to a Plan: fusion groups lowered to launches (lower_group.h), the lifetimes of the
// intermediates they write, and the memory plan over them; and the graph signatures plans are
// cached by.
#include "kernels/graph/plan.h"

#include <fmt/format.h>

#include "kernels/graph/lower_group.h"

namespace vtpu::kernels {

Plan make_plan(const Graph& graph, FusionStrategy strategy, const sim::ChipConfig& chip, ProgramCache& cache) {
  Plan plan;
  plan.strategy = strategy;
  plan.outputs = graph.outputs();
  for (int id = 0; id < static_cast<int>(graph.nodes().size()); ++id) {
    if (graph.node(id).kind == NodeKind::Input) plan.inputs.push_back(id);
  }
  for (int id = 0; id < static_cast<int>(graph.nodes().size()); ++id) {
    if (graph.node(id).kind != NodeKind::Reshape) continue;
    // A part anywhere along the chain makes this a part of the root.
    int root = graph.node(id).inputs[0];
    int64_t offset = graph.node(id).offset;  // bytes
    bool part = graph.is_part(id);
    while (graph.node(root).kind == NodeKind::Reshape) {
      offset += graph.node(root).offset;
      part = part || graph.is_part(root);
      root = graph.node(root).inputs[0];
    }
    plan.alias[id] = root;
    if (part) plan.alias_offset[id] = uint64_t(offset);
  }
  for (const auto& grp : plan_fusion(graph, strategy)) {
    plan.launches.push_back(lower_group(graph, grp, chip, cache));
  }
  // Lifetimes of everything a launch writes; graph inputs stay in the caller's buffers (only their
  // last reader is noted, so the caller may release them early).
  std::map<int, ValueLifetime> life;
  std::map<int, int> input_last_step;
  for (int step = 0; step < static_cast<int>(plan.launches.size()); ++step) {
    for (int arg : plan.launches[step].args) {
      const TensorType& t = graph.node(arg).type;
      plan.value_bytes[arg] = uint64_t(t.numel()) * dtype_bytes(t.dtype);
      const int v = plan.alias.count(arg) ? plan.alias.at(arg) : arg;  // a reshape keeps its source alive
      const TensorType& root = graph.node(v).type;  // (a part's source is larger than the part)
      plan.value_bytes[v] = uint64_t(root.numel()) * dtype_bytes(root.dtype);
      if (graph.node(v).kind == NodeKind::Input) {
        input_last_step[v] = step;
        continue;
      }
      auto [it, fresh] = life.try_emplace(v, ValueLifetime{v, plan.value_bytes[v], step, step});
      if (!fresh) it->second.last_step = step;
    }
  }
  // Graph outputs are written straight into buffers the caller binds (tensors that outlive the
  // plan); only intermediates take arena space.
  for (int o : plan.outputs) life.erase(o);
  std::vector<ValueLifetime> values;
  for (auto& [v, l] : life) values.push_back(l);
  plan.memory = plan_memory(values);
  plan.memory.input_last_step = std::move(input_last_step);
  return plan;
}

std::string graph_signature(const Graph& graph) {
  std::string s;
  for (const auto& n : graph.nodes()) {
    s += fmt::format("{}:{}:{}:{}:{}{}:{}", static_cast<int>(n.kind), to_string(n.type), static_cast<int>(n.expr_op),
                     static_cast<int>(n.row_op), n.transpose_a, n.transpose_b, n.passes);
    if (n.scalar_operand || n.expr_op == ExprOp::Constant) s += fmt::format(":s{}{}", n.scalar, n.scalar_first ? "f" : "");
    if (n.kind == NodeKind::Row) s += fmt::format(":e{}c{}w{}", n.eps, n.correction, n.row_weight ? 1 : 0);
    if (n.kind == NodeKind::Concat) s += fmt::format(":d{}", n.cat_dim);
    if (n.kind == NodeKind::Gather || n.kind == NodeKind::ScatterAdd) {
      s += fmt::format(":p{}/{}/{}", n.index_pairs, n.padding_index, n.wrap_negative);
    }
    if (n.kind == NodeKind::Random) s += fmt::format(":r{}/{}/{}", static_cast<int>(n.random_kind), n.random_a, n.random_b);
    if (n.kind == NodeKind::Int64Narrow) s += fmt::format(":b{}", n.narrow_bound);
    // A program lives as long as the bridge's cache of them: its address names it.
    if (n.kind == NodeKind::UserKernel) s += fmt::format(":u{}@{}", n.program->name, fmt::ptr(n.program.get()));
    if (n.kind == NodeKind::Attention || n.kind == NodeKind::AttentionBackward) {
      s += fmt::format(":a{}/{}/{}", n.causal, n.with_lse, n.scalar);
    }
    if (n.kind == NodeKind::Reshape && n.offset) s += fmt::format(":o{}", n.offset);
    if (n.kind == NodeKind::StridedCopy) {
      s += fmt::format(":o{}", n.offset);
      for (int64_t st : n.strides) s += fmt::format("/{}", st);
    }
    for (int in : n.inputs) s += fmt::format(",{}", in);
    s += ';';
  }
  for (int o : graph.outputs()) s += fmt::format("o{}", o);
  return s;
}

}  // namespace vtpu::kernels
