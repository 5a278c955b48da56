// The fusion planner: groups graph nodes into kernels. Strategies are named so the same
// workload can be compared under each (a product feature: `none` vs `greedy` in bench/).
//   none   - one kernel per node; every intermediate goes through HBM.
//   greedy - elementwise chains become one elementwise kernel; elementwise consumers of a matmul
//            become its epilogue; an elementwise group feeding only a row op becomes its prologue.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/graph/broadcast_layout.h"
#include "kernels/graph/graph.h"

namespace vtpu::kernels {

enum class FusionStrategy : uint8_t { None, Greedy };

FusionStrategy fusion_strategy_from_name(std::string_view name);  // throws KernelError listing the names
std::string_view fusion_strategy_name(FusionStrategy s);

struct KernelGroup {
  enum class Kind : uint8_t { Elementwise, MatMul, Row, Copy } kind = Kind::Elementwise;
  // In execution order. MatMul: the matmul first, then its epilogue. Row: the prologue, then the
  // row op last.
  std::vector<int> nodes;
  std::vector<int> inputs;   // values read from outside the group, in first-use order
  std::vector<int> outputs;  // values the group writes to HBM
  // Inputs that are row-strided views read in place (no copy kernel writes them): the launch
  // binds the view's source and reads its rows at the view's stride and offset.
  std::vector<int> views;
};

// A StridedCopy node whose view is rows of contiguous elements at one stride (a slice such as
// x[:, :d], x[::2] or a qkv split): that stride in elements, at least the row's length. nullopt
// for any other view (transposes, broadcasts, steps along the last dim).
std::optional<int64_t> view_row_stride(const Node& n);

// The StridedCopy node behind a view read in place (KernelGroup::views), through the reshapes
// of it that keep its rows.
const Node& view_node(const Graph& g, int v);

// Groups in an order that respects every dependency. Nodes no graph output depends on are dropped.
std::vector<KernelGroup> plan_fusion(const Graph& graph, FusionStrategy strategy);

}  // namespace vtpu::kernels
