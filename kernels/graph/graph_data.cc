// Graph nodes that move or make data rather than compute on it: views and copies (reshape,
// permute, strided copy, concat, pad), gathers and scatter-adds by index, int64 narrowing, and
// generated tensors (full, iota, random). See graph.h.
#include "kernels/graph/graph.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

// The number of indices in `i`, checked to be i32 [n], or int64 handed over as its [n, 2] words.
int64_t index_count(const std::string& label, const TensorType& i, bool pairs) {
  const bool ok = i.dtype == DType::I32 && (pairs ? i.shape.size() == 2 && i.shape[1] == 2 : i.shape.size() == 1);
  if (!ok) {
    throw KernelError(fmt::format("{}: indices must be i32[n]{} (got {})", label, pairs ? " as [n, 2] word pairs" : "", to_string(i)));
  }
  return i.shape[0];
}

}  // namespace

int Graph::reshape(int x, std::vector<int64_t> shape, std::string label) {
  Node n;
  n.kind = NodeKind::Reshape;
  n.inputs = {x};
  n.type = {std::move(shape), node(x).type.dtype};
  n.label = std::move(label);
  if (n.type.numel() != node(x).type.numel()) {
    throw KernelError(fmt::format("{}: {} cannot be viewed as {}", n.label, to_string(node(x).type), to_string(n.type)));
  }
  return add(std::move(n));
}

bool Graph::has_part(int x, int64_t byte_offset, const TensorType& type) const {
  const TensorType& in = node(x).type;
  const int64_t bytes = type.numel() * dtype_bytes(type.dtype);
  const bool inside = byte_offset >= 0 && byte_offset % dtype_bytes(type.dtype) == 0 &&
                      byte_offset + bytes <= in.numel() * dtype_bytes(in.dtype);
  return inside && (type.dtype == in.dtype || (dtype_is_plain_bytes(type.dtype) && dtype_is_plain_bytes(in.dtype)));
}

int Graph::part(int x, int64_t byte_offset, TensorType type, std::string label) {
  if (!has_part(x, byte_offset, type)) {
    throw KernelError(fmt::format("{}: {} from byte {} of {}", label, to_string(type), byte_offset, to_string(node(x).type)));
  }
  Node n;
  n.kind = NodeKind::Reshape;
  n.inputs = {x};
  n.type = std::move(type);
  n.offset = byte_offset;
  n.label = std::move(label);
  return add(std::move(n));
}

int Graph::permute(int x, const std::vector<int64_t>& order, std::string label) {
  const auto& shape = node(x).type.shape;
  if (order.size() != shape.size()) throw KernelError(fmt::format("{}: {} dims ordered for a {}-d value", label, order.size(), shape.size()));
  std::vector<int64_t> strides(shape.size(), 1), sizes, view_strides;
  for (size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  for (int64_t d : order) {
    sizes.push_back(shape.at(d));
    view_strides.push_back(strides.at(d));
  }
  return strided_copy(x, sizes, view_strides, 0, std::move(label));
}

int Graph::strided_copy(int source, std::vector<int64_t> sizes, std::vector<int64_t> strides, int64_t offset,
                        std::string label) {
  Node n;
  n.kind = NodeKind::StridedCopy;
  n.inputs = {source};
  n.type = {std::move(sizes), node(source).type.dtype};
  n.strides = std::move(strides);
  n.offset = offset;
  n.label = std::move(label);
  int64_t first = offset, last = offset;  // the view must stay inside the source
  for (size_t i = 0; i < n.strides.size(); ++i) (n.strides[i] < 0 ? first : last) += (n.type.shape[i] - 1) * n.strides[i];
  if (n.type.numel() > 0 && (first < 0 || last >= node(source).type.numel())) {
    throw KernelError(fmt::format("{}: the view reaches elements {}..{} of a {}-element buffer", n.label, first, last,
                                  node(source).type.numel()));
  }
  return add(std::move(n));
}

int Graph::concat(const std::vector<int>& inputs, int64_t dim, std::string label) {
  if (inputs.empty()) throw KernelError(fmt::format("{}: no inputs", label));
  // A concat kernel takes two launch arguments per input and a launch at most 256: more inputs
  // are concatenated in groups first, then the groups' results (torch.cat of 150 tensors failed
  // at the flush).
  if (inputs.size() > kMostConcatInputs) {
    std::vector<int> groups;
    for (size_t first = 0; first < inputs.size(); first += kMostConcatInputs) {
      const auto end = inputs.begin() + static_cast<std::ptrdiff_t>(std::min(first + kMostConcatInputs, inputs.size()));
      groups.push_back(concat(std::vector<int>(inputs.begin() + static_cast<std::ptrdiff_t>(first), end), dim, label));
    }
    return concat(groups, dim, std::move(label));
  }
  Node n;
  n.kind = NodeKind::Concat;
  n.inputs = inputs;
  n.cat_dim = dim;
  n.label = std::move(label);
  n.type = node(inputs[0]).type;
  if (dim < 0 || dim >= static_cast<int64_t>(n.type.shape.size())) throw KernelError(fmt::format("{}: dim {} out of range", n.label, dim));
  n.type.shape[dim] = 0;
  for (int in : inputs) {
    auto s = node(in).type.shape;
    if (s.size() != n.type.shape.size() || node(in).type.dtype != n.type.dtype) {
      throw KernelError(fmt::format("{}: {} does not match {}", n.label, to_string(node(in).type), to_string(node(inputs[0]).type)));
    }
    n.type.shape[dim] += s[dim];
    s[dim] = n.type.shape[dim];
    auto expected = n.type.shape;
    if (s != expected) throw KernelError(fmt::format("{}: shapes differ outside dim {}", n.label, dim));
  }
  return add(std::move(n));
}

int Graph::gather(int table, int index, bool index_pairs, std::string label, bool wrap_negative) {
  Node n;
  n.kind = NodeKind::Gather;
  n.inputs = {table, index};
  n.index_pairs = index_pairs;
  n.wrap_negative = wrap_negative;
  n.label = std::move(label);
  const TensorType& t = node(table).type;
  if (t.shape.empty()) throw KernelError(fmt::format("{}: the table needs at least one dim", n.label));
  n.type = t;
  n.type.shape[0] = index_count(n.label, node(index).type, index_pairs);
  return add(std::move(n));
}

int Graph::scatter_add(int src, int index, bool index_pairs, int64_t rows, int64_t padding_index, std::string label) {
  Node n;
  n.kind = NodeKind::ScatterAdd;
  n.inputs = {src, index};
  n.index_pairs = index_pairs;
  n.padding_index = padding_index;
  n.label = std::move(label);
  const TensorType& s = node(src).type;
  if (s.shape.empty()) throw KernelError(fmt::format("{}: the rows need at least one dim", n.label));
  if (const int64_t count = index_count(n.label, node(index).type, index_pairs); count != s.shape[0]) {
    throw KernelError(fmt::format("{}: {} indices for {} rows", n.label, count, s.shape[0]));
  }
  if (!dtype_is_float(s.dtype)) throw KernelError(fmt::format("{}: rows are f32, bf16 or f16", n.label));
  n.type = s;
  n.type.shape[0] = rows;
  return add(std::move(n));
}

int Graph::scatter_combine(int src, int index, bool index_pairs, int64_t rows, ExprOp combine, std::string label) {
  if (combine != ExprOp::Add && combine != ExprOp::Max && combine != ExprOp::Min && combine != ExprOp::Mul) {
    throw KernelError(fmt::format("{}: a scatter combines by add, max, min or mul", label));
  }
  const int v = scatter_add(src, index, index_pairs, rows, -1, std::move(label));
  nodes_[v].expr_op = combine;
  return v;
}

int Graph::random(TensorType type, RandomKind kind, double a, double b, int key, std::string label) {
  Node n;
  n.kind = NodeKind::Random;
  n.inputs = {key};
  n.type = std::move(type);
  n.random_kind = kind;
  n.random_a = a;
  n.random_b = b;
  n.label = std::move(label);
  if (!dtype_is_float(n.type.dtype)) {
    throw KernelError(fmt::format("{}: random numbers are f32, bf16 or f16, not {}", n.label, dtype_name(n.type.dtype)));
  }
  if (node(key).type != TensorType{{2}, DType::I32}) {
    throw KernelError(fmt::format("{}: the key is i32[2], not {}", n.label, to_string(node(key).type)));
  }
  return add(std::move(n));
}

int Graph::user_kernel(const std::vector<int>& inputs, TensorType type, std::shared_ptr<const isa::Program> program) {
  Node n;
  n.kind = NodeKind::UserKernel;
  n.inputs = inputs;
  n.type = std::move(type);
  n.label = program->name;
  for (int i : inputs) node(i);  // each must exist
  const auto& args = program->arguments;
  const bool buffers_only = std::all_of(args.begin(), args.end(), [](const isa::ArgumentSpec& a) {
    return a.kind == isa::ArgumentKind::Buffer;
  });
  if (args.size() != inputs.size() + 1 || !buffers_only) {
    throw KernelError(fmt::format("{}: a graph's user kernel takes its {} inputs and its result as buffers, and no "
                                  "scalars ({} arguments declared)", n.label, inputs.size(), args.size()));
  }
  n.program = std::move(program);
  return add(std::move(n));
}

int Graph::iota(TensorType type, std::string label) {
  Node n;
  n.kind = NodeKind::Iota;
  n.type = std::move(type);
  n.label = std::move(label);
  if (n.type.dtype != DType::F32 && n.type.dtype != DType::I32) {
    throw KernelError(fmt::format("{}: indices are f32 or i32, not {}", n.label, dtype_name(n.type.dtype)));
  }
  if (n.type.dtype == DType::F32 && n.type.numel() > (int64_t{1} << 24)) {
    throw KernelError(fmt::format("{}: more than 2^24 indices are not exact in f32", n.label));
  }
  return add(std::move(n));
}

int Graph::int64_narrow(int words, int64_t bound, std::string label) {
  const TensorType& t = node(words).type;
  if (t.dtype != DType::I32 || t.shape.empty() || t.shape.back() != 2) {
    throw KernelError(fmt::format("{}: int64 words are i32[.., 2], not {}", label, to_string(t)));
  }
  if (bound < 1 || bound > (int64_t{1} << 31)) throw KernelError(fmt::format("{}: bound {} outside [1, 2^31]", label, bound));
  Node n;
  n.kind = NodeKind::Int64Narrow;
  n.inputs = {words};
  n.type = {std::vector<int64_t>(t.shape.begin(), t.shape.end() - 1), DType::I32};
  n.narrow_bound = bound;
  n.label = std::move(label);
  return add(std::move(n));
}

int Graph::full(TensorType type, double value, std::string label) {
  Node n;
  n.kind = NodeKind::Elementwise;
  n.expr_op = ExprOp::Constant;
  n.scalar = value;
  n.type = std::move(type);
  n.label = std::move(label);
  return add(std::move(n));
}

int Graph::pad(int x, int64_t dim, int64_t before, int64_t after, double value, std::string label) {
  if (before < 0 || after < 0) throw KernelError(fmt::format("{}: negative padding", label));
  std::vector<int> parts;
  for (int64_t width : {before, int64_t(-1), after}) {
    if (width < 0) {
      parts.push_back(x);
    } else if (width > 0) {
      TensorType block = node(x).type;
      block.shape.at(dim) = width;
      parts.push_back(full(block, value, label));
    }
  }
  return parts.size() == 1 ? x : concat(parts, dim, std::move(label));
}

}  // namespace vtpu::kernels
