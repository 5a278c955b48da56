// Greedy grouping in node order. Invariant: a group only reads values of groups with a lower
// index, so group order is a valid execution order. A node may therefore join only a group made
// no earlier than its latest producer's (that group, or the most recent elementwise one), and
// only when it fits that group's kind and shape.
#include "kernels/graph/fusion.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "isa/address_window.h"
#include "kernels/codegen/kernel_error.h"
#include "kernels/generators/elementwise.h"
#include "kernels/generators/rowwise.h"
#include "kernels/graph/window_pieces.h"

namespace vtpu::kernels {
namespace {


// The most operands (besides A and B) a matmul's epilogue reads: every variant of the matmul
// kernel (staged or transposed operands, several passes, batches) has the scalar registers for
// two while a block drains, not for three.
constexpr size_t kMaxMatmulEpilogueInputs = 2;

class GreedyPlanner {
 public:
  GreedyPlanner(const Graph& g, FusionStrategy s) : g_(g), strategy_(s) {
    // Only nodes an output depends on run (dead code from deferred ops whose results died).
    live_.assign(g.nodes().size(), 0);
    for (int o : g.outputs()) live_[o] = 1;
    for (size_t i = g.nodes().size(); i-- > 0;) {
      if (!live_[i]) continue;
      for (int in : g.node(static_cast<int>(i)).inputs) live_[in] = 1;
    }
    consumers_.assign(g.nodes().size(), 0);
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (!live_[i]) continue;
      for (int in : g.node(static_cast<int>(i)).inputs) ++consumers_[in];
    }
  }

  std::vector<KernelGroup> run() {
    group_of_.assign(g_.nodes().size(), -1);
    alias_group_.assign(g_.nodes().size(), -1);
    view_.assign(g_.nodes().size(), 0);
    for (int id = 0; id < static_cast<int>(g_.nodes().size()); ++id) {
      if (!live_[id]) continue;
      const Node& n = g_.node(id);
      switch (n.kind) {
        case NodeKind::Input: break;
        case NodeKind::Reshape:
          alias_group_[id] = producer_group(n.inputs[0]);
          view_[id] = view_[n.inputs[0]];  // read_in_place chose the view with this reshape of it
          break;
        case NodeKind::MatMul: open(KernelGroup::Kind::MatMul, id); break;
        case NodeKind::StridedCopy:
          if (strategy_ != FusionStrategy::None && read_in_place(id)) {
            view_[id] = 1;  // its consumer's kernel reads the source; it runs after the source's writer
            alias_group_[id] = producer_group(n.inputs[0]);
            break;
          }
          open(KernelGroup::Kind::Copy, id);
          break;
        case NodeKind::Concat: case NodeKind::Gather: case NodeKind::Random: case NodeKind::ScatterAdd:
        case NodeKind::ColumnReduce: case NodeKind::Iota: case NodeKind::Int64Narrow: case NodeKind::Attention:
        case NodeKind::AttentionBackward: case NodeKind::UserKernel:
          open(KernelGroup::Kind::Copy, id);
          break;
        case NodeKind::Row:
          if (strategy_ == FusionStrategy::None || !absorb_prologue(id)) open(KernelGroup::Kind::Row, id);
          break;
        case NodeKind::Elementwise:
          if (strategy_ == FusionStrategy::None || !join(id)) open(KernelGroup::Kind::Elementwise, id);
          break;
      }
    }
    if (strategy_ != FusionStrategy::None) merge_into_sole_readers();
    std::vector<KernelGroup> out;
    for (auto& grp : groups_) {
      if (grp.nodes.empty()) continue;
      if (grp.kind == KernelGroup::Kind::Elementwise) {
        for (auto& piece : pieces_that_fit_the_window(grp)) out.push_back(std::move(piece));
        continue;
      }
      finish(grp);
      out.push_back(std::move(grp));
    }
    return out;
  }

 private:
  void open(KernelGroup::Kind kind, int id) {
    KernelGroup grp;
    grp.kind = kind;
    grp.nodes = {id};
    group_of_[id] = static_cast<int>(groups_.size());
    groups_.push_back(std::move(grp));
  }

  // The group whose kernel writes a value's data: its own group, or for a reshape the group of
  // the value it aliases (-1: a graph input).
  int producer_group(int v) const { return group_of_[v] >= 0 ? group_of_[v] : alias_group_[v]; }

  int latest_producer_group(int id) const {
    int latest = -1;
    for (int in : g_.node(id).inputs) latest = std::max(latest, producer_group(in));
    return latest;
  }

  // Reading a reshape or an in-place view of group gi's output inside gi itself would read what
  // the kernel is still writing: such a node starts a new group.
  bool reads_alias_of(int id, int gi) const {
    for (int in : g_.node(id).inputs) {
      if ((g_.node(in).kind == NodeKind::Reshape || view_[in]) && alias_group_[in] == gi) return true;
    }
    return false;
  }

  bool reads_view(int id) const {
    for (int in : g_.node(id).inputs) {
      if (view_[in]) return true;
    }
    return false;
  }

  // A row-strided view read once, by an elementwise node of its own shape or as a row op's input,
  // is read in place by that kernel's DMAs (a streaming kernel's blocks are rows anyway) rather
  // than copied by a kernel of its own and read back: half the HBM traffic, one launch fewer.
  // Reshapes that keep the rows' length (a row op's [rows, cols] view of it) stay views; a part
  // of it (Graph::part) reads a copy of it.
  bool read_in_place(int id) const {
    const Node& n = g_.node(id);
    // (one element streams as a Scalar operand, loaded from its buffer's start: not in place)
    if (n.kind == NodeKind::StridedCopy && (!dtype_on_chip(n.type.dtype) || !view_row_stride(n) || n.type.numel() < 2)) return false;
    if (g_.is_output(id) || consumers_[id] != 1) return false;
    for (int c = id + 1; c < static_cast<int>(g_.nodes().size()); ++c) {
      const Node& user = g_.node(c);
      if (!live_[c] || std::find(user.inputs.begin(), user.inputs.end(), id) == user.inputs.end()) continue;
      if (user.kind == NodeKind::Elementwise) return user.type.shape == n.type.shape;
      if (user.kind == NodeKind::Reshape) return !g_.is_part(c) && user.type.shape.back() == n.type.shape.back() && read_in_place(c);
      return user.kind == NodeKind::Row && user.inputs[0] == id;
    }
    return false;
  }

  // How many times the nodes of `members` read value v.
  int reads_within(const std::vector<int>& members, int v) const {
    int n = 0;
    for (int m : members) {
      for (int in : g_.node(m).inputs) n += in == v;
    }
    return n;
  }

  // Values `members` read from outside themselves, in first-use order.
  std::vector<int> external_inputs(const std::vector<int>& members) const {
    std::vector<int> reads;
    for (int m : members) {
      for (int in : g_.node(m).inputs) {
        if (std::find(members.begin(), members.end(), in) == members.end() &&
            std::find(reads.begin(), reads.end(), in) == reads.end()) {
          reads.push_back(in);
        }
      }
    }
    return reads;
  }

  // Values of `members` that something outside them reads, or that are graph outputs.
  std::vector<int> escaping_values(const std::vector<int>& members) const {
    std::vector<int> out;
    for (int m : members) {
      if (consumers_[m] > reads_within(members, m) || g_.is_output(m)) out.push_back(m);
    }
    return out;
  }

  // Operands of `grp` plus node `extra`, as far as is known now.
  size_t operand_count(const KernelGroup& grp, int extra) const {
    std::vector<int> members = grp.nodes;
    members.push_back(extra);
    return external_inputs(members).size() + escaping_values(members).size();
  }

  // Whether one kernel of `grp` plus node `extra` can see all its operands: they share a launch's
  // 4 GiB address window (isa/address_window.h), which an optimizer step's fused update of a 1 GB
  // embedding (weights, gradients, two moments, in and out) would overflow.
  bool operands_fit_window(const KernelGroup& grp, int extra) const {
    KernelGroup grown = grp;
    grown.nodes.push_back(extra);
    return operands_fit_window(grown);
  }
  bool operands_fit_window(const KernelGroup& grp) const {
    const std::vector<int>& members = grp.nodes;
    // Nor may it count more elements than its int32 launch scalars hold, unless it streams flat.
    for (int m : members) {
      if (g_.node(m).type.numel() >= (int64_t{1} << 31)) return false;
    }
    std::vector<uint64_t> bytes;
    for (const std::vector<int>& values : {external_inputs(members), escaping_values(members)}) {
      for (int v : values) bytes.push_back(uint64_t(g_.node(v).type.numel()) * dtype_bytes(g_.node(v).type.dtype));
    }
    return isa::window_fits(bytes);
  }

  // A node reading only graph inputs starts a group of its own (unrelated ops stay apart). When a
  // later elementwise group of its shape reads everything such a group makes, and nothing else
  // does (lerp's cast of one operand, read by the rest of its expression), the group joins that
  // reader: its values then stay in registers instead of going through HBM.
  void merge_into_sole_readers() {
    std::vector<std::vector<int>> users(g_.nodes().size());
    for (size_t i = 0; i < g_.nodes().size(); ++i) {
      if (!live_[i]) continue;
      for (int in : g_.node(static_cast<int>(i)).inputs) users[in].push_back(static_cast<int>(i));
    }
    // Latest first: a group that reads another group's values and joins a later reader itself
    // leaves that reader the sole one of the other group too (lerp: cast(a) is read by where and
    // by the sub that joined cast(b)'s group, which the rest of the expression reads).
    for (size_t gi = groups_.size(); gi-- > 0;) {
      KernelGroup& from = groups_[gi];
      if (from.kind != KernelGroup::Kind::Elementwise || from.nodes.empty()) continue;
      int reader = -1;
      bool sole = true;
      for (int m : from.nodes) {
        if (g_.is_output(m)) sole = false;
        for (int u : users[m]) {
          if (group_of_[u] == static_cast<int>(gi)) continue;
          if (group_of_[u] < 0 || (reader >= 0 && group_of_[u] != reader)) sole = false;
          reader = group_of_[u];
        }
      }
      if (!sole || reader <= static_cast<int>(gi)) continue;
      KernelGroup& into = groups_[reader];
      if (into.kind != KernelGroup::Kind::Elementwise ||
          g_.node(into.nodes.back()).type.shape != g_.node(from.nodes.back()).type.shape) {
        continue;
      }
      std::vector<int> merged = from.nodes;
      merged.insert(merged.end(), into.nodes.begin(), into.nodes.end());
      std::sort(merged.begin(), merged.end());  // node ids are in dependency order
      if (external_inputs(merged).size() + escaping_values(merged).size() > kMaxElementwiseOperands) continue;
      for (int m : from.nodes) group_of_[m] = reader;
      into.nodes = std::move(merged);
      from.nodes.clear();
    }
  }

  // An elementwise group as kernels whose operands each fit a launch's address window: itself,
  // or consecutive runs of its nodes (a value one run makes and a later one reads is an operand
  // of both). Checked on the finished group, not node by node: half-built, a chain's f32
  // intermediates look like operands (lerp of two 1 GB bf16 tensors fits; its steps would not).
  std::vector<KernelGroup> pieces_that_fit_the_window(KernelGroup grp) const {
    if (operands_fit_window(grp) || streams_flat_whole(grp)) {
      finish(grp);
      return {std::move(grp)};
    }
    std::vector<KernelGroup> pieces;
    KernelGroup piece;
    piece.kind = grp.kind;
    for (int id : grp.nodes) {
      KernelGroup grown = piece;
      grown.nodes.push_back(id);
      if (!piece.nodes.empty() && !operands_fit_window(grown)) {
        finish(piece);
        pieces.push_back(std::move(piece));
        grown.nodes = {id};
      }
      piece = std::move(grown);
    }
    finish(piece);
    pieces.push_back(std::move(piece));
    return pieces;
  }

  // A group that streams its tensors' flat data, reading no view in place, stays one kernel
  // whatever its size: its launch runs in pieces over ranges of the elements
  // (kernels/graph/window_pieces.h), each reading and writing its range once.
  bool streams_flat_whole(const KernelGroup& grp) const {
    const std::vector<int> inputs = external_inputs(grp.nodes);
    return std::none_of(inputs.begin(), inputs.end(), [&](int in) { return view_[in]; }) && streams_flat(g_, grp.nodes, inputs);
  }

  // Matmul epilogues stream Full, Row, Scalar and (unbatched) Column operands only.
  bool layouts_fit(int id, const std::vector<int64_t>& out_shape, bool matmul, bool allow_column) const {
    for (int in : g_.node(id).inputs) {
      try {
        const Layout l = broadcast_layout(g_.node(in).type.shape, out_shape);
        if (l == Layout::Column && !allow_column) return false;
        if (l == Layout::Periodic && matmul) return false;
      } catch (const KernelError&) {
        return false;
      }
    }
    return true;
  }

  // Joins node `id` to the group of its latest producer or, failing that (that group is a copy or
  // a row kernel), to the most recent group when it is an elementwise one made after it:
  // independent subexpressions over the same copied operands (a compare-and-swap's keys, a
  // backward's terms) then fuse into one kernel instead of one each. Either keeps the invariant:
  // the group runs after everything the node reads. A node reading only graph inputs starts its
  // own group (unrelated ops stay apart, and their programs are reused), unless it reads views in
  // place: those stand for the copies they replace.
  bool join(int id) {
    const int gi = latest_producer_group(id);
    if (gi < 0 && !reads_view(id)) return false;
    if (gi >= 0 && try_join(id, gi)) return true;
    const int last = static_cast<int>(groups_.size()) - 1;
    return last > gi && groups_[last].kind == KernelGroup::Kind::Elementwise && try_join(id, last);
  }

  bool try_join(int id, int gi) {
    const Node& n = g_.node(id);
    KernelGroup& grp = groups_[gi];
    const Node& head = g_.node(grp.nodes.back());
    if (grp.kind == KernelGroup::Kind::Row || grp.kind == KernelGroup::Kind::Copy) return false;
    if (reads_alias_of(id, gi)) return false;
    if (head.type.shape != n.type.shape) return false;
    if (grp.kind == KernelGroup::Kind::MatMul) {
      if (!dtype_is_float(n.type.dtype)) return false;  // the MXU path writes floats
      if (reads_view(id)) return false;  // epilogue operands are contiguous
      // Only the matmul's (or its epilogue's) latest value, read by nobody else, can flow on.
      const int tail = grp.nodes.back();
      if (std::find(n.inputs.begin(), n.inputs.end(), tail) == n.inputs.end()) return false;
      if (consumers_[tail] != 1 || g_.is_output(tail)) return false;
      const bool batched_b = g_.node(g_.node(grp.nodes.front()).inputs[1]).type.shape.size() > 2;
      if (!layouts_fit(id, n.type.shape, true, !batched_b)) return false;
      // each epilogue operand holds a scalar register while a block drains: past
      // kMaxMatmulEpilogueInputs the drain would run out of them (a, b themselves are not counted)
      std::vector<int> members = grp.nodes;
      members.push_back(id);
      if (external_inputs(members).size() > 2 + kMaxMatmulEpilogueInputs) return false;
      if (!operands_fit_window(grp, id)) return false;
    } else {
      if (!layouts_fit(id, n.type.shape, false, true)) return false;
      if (operand_count(grp, id) > kMaxElementwiseOperands) return false;
    }
    grp.nodes.push_back(id);
    group_of_[id] = gi;
    return true;
  }

  // An elementwise group whose only use is this row op's input becomes its prologue.
  bool absorb_prologue(int id) {
    const Node& n = g_.node(id);
    const int x = n.inputs[0];
    const int gi = group_of_[x];
    if (gi < 0 || groups_[gi].kind != KernelGroup::Kind::Elementwise) return false;
    KernelGroup& grp = groups_[gi];
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      if (producer_group(n.inputs[i]) >= gi) return false;
    }
    for (int m : grp.nodes) {
      const int outside = consumers_[m] - reads_within(grp.nodes, m);
      if (g_.is_output(m)) return false;
      if (m == x ? outside != 1 : outside != 0) return false;
      if (g_.node(m).type.shape != g_.node(x).type.shape) return false;
    }
    if (operand_count(grp, id) > kMaxRowOperands) return false;  // the prologue stays a kernel of its own
    if (!operands_fit_window(grp, id)) return false;
    grp.kind = KernelGroup::Kind::Row;
    grp.nodes.push_back(id);
    group_of_[id] = gi;
    return true;
  }

  void finish(KernelGroup& grp) const {
    grp.inputs = external_inputs(grp.nodes);
    for (int in : grp.inputs) {
      if (view_[in]) grp.views.push_back(in);
    }
    grp.outputs = escaping_values(grp.nodes);
    if (grp.outputs.empty()) grp.outputs.push_back(grp.nodes.back());  // dead code still runs if asked to
  }

  const Graph& g_;
  FusionStrategy strategy_;
  std::vector<char> live_;
  std::vector<int> consumers_;
  std::vector<int> group_of_;
  std::vector<int> alias_group_;  // Reshape values and in-place views: the group writing the data
  std::vector<char> view_;        // StridedCopy nodes read in place (read_in_place)
  std::vector<KernelGroup> groups_;
};

}  // namespace

std::vector<KernelGroup> plan_fusion(const Graph& graph, FusionStrategy strategy) { return GreedyPlanner(graph, strategy).run(); }

FusionStrategy fusion_strategy_from_name(std::string_view name) {
  if (name == "none") return FusionStrategy::None;
  if (name == "greedy") return FusionStrategy::Greedy;
  throw KernelError(fmt::format("unknown fusion strategy '{}' (none, greedy)", name));
}

std::string_view fusion_strategy_name(FusionStrategy s) { return s == FusionStrategy::None ? "none" : "greedy"; }

}  // namespace vtpu::kernels
