// Dims are first collapsed (adjacent dims that are contiguous in the source merge; size-1 dims
// drop). Views whose two innermost dims are swapped go to the transpose kernel. Otherwise the
// innermost one or two dims form one 2-D DMA: rows of the innermost dim when it is contiguous,
// else rows of one element each; a slab too long for staging is split into more outer indices
// first. Every other dim is an outer index, decoded at run time by
// division. Gathers for a chunk of outer indices fill a VMEM staging buffer, which goes back to
// HBM in one contiguous DMA; two staging buffers alternate (the loop body is emitted once per
// buffer because semaphores are immediates). Sizes and strides are launch scalars.
#include "kernels/generators/strided_copy.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <limits>
#include <optional>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/core_share.h"
#include "kernels/codegen/outer_offset.h"
#include "kernels/generators/transpose.h"

namespace vtpu::kernels {
namespace {

constexpr uint64_t kChunkBytes = 256 * 1024;
constexpr int kSemGather = 0, kSemWrite = 2;
// Scalar argument positions after src (0) and dst (1): offset, rows, row elements, row stride
// (elements), then the outer sizes and the outer strides.
constexpr int kOffsetArg = 2, kRowsArg = 3, kRowElemsArg = 4, kRowStrideArg = 5, kOuterArg = 6;

struct Collapsed {
  std::vector<int64_t> sizes, strides;
};

Collapsed collapse(const StridedCopySpec& s) {
  Collapsed c;
  for (size_t i = 0; i < s.sizes.size(); ++i) {
    if (s.sizes[i] == 1) continue;
    if (!c.sizes.empty() && c.strides.back() == s.strides[i] * s.sizes[i]) {
      c.sizes.back() *= s.sizes[i];
      c.strides.back() = s.strides[i];
    } else {
      c.sizes.push_back(s.sizes[i]);
      c.strides.push_back(s.strides[i]);
    }
  }
  if (c.sizes.empty()) {
    c.sizes = {1};
    c.strides = {1};
  }
  return c;
}

// A view whose two innermost (collapsed) dims are swapped relative to the source, [.., p, q] with
// strides [.., 1, pitch]: the transpose kernel moves it in tiles. Only when both dims are long
// enough for tiles to beat per-column DMAs (a tile costs ~70 instructions, a column ~20).
std::optional<TransposeSpec> as_transpose(const Collapsed& c, const StridedCopySpec& s) {
  const size_t rank = c.sizes.size();
  if (rank < 2 || c.strides[rank - 2] != 1 || c.strides[rank - 1] <= 1) return std::nullopt;
  if (c.sizes[rank - 2] < 8 || c.sizes[rank - 1] < 8) return std::nullopt;
  TransposeSpec t;
  t.outer_sizes.assign(c.sizes.begin(), c.sizes.end() - 2);
  t.outer_strides.assign(c.strides.begin(), c.strides.end() - 2);
  t.p = c.sizes[rank - 2];
  t.q = c.sizes[rank - 1];
  t.pitch = c.strides[rank - 1];
  t.offset = s.offset;
  t.dtype = s.dtype;
  return t;
}

// The largest divisor of n that is at most `most` (1 when none larger is).
int64_t largest_divisor_up_to(int64_t n, int64_t most) {
  int64_t q = 1;
  for (int64_t d = 1; d * d <= n; ++d) {
    if (n % d) continue;
    if (d <= most) q = std::max(q, d);
    if (n / d <= most) q = std::max(q, n / d);
  }
  return q;
}

// Splits dim i (n elements, stride s) into (n / q, q * s) and (q, s), q dividing n: the same
// elements in the same order, with a shorter inner dim.
void split_dim(Collapsed& c, size_t i, int64_t q) {
  const int64_t n = c.sizes[i], s = c.strides[i];
  c.sizes[i] = q;
  c.sizes.insert(c.sizes.begin() + static_cast<std::ptrdiff_t>(i), n / q);
  c.strides.insert(c.strides.begin() + static_cast<std::ptrdiff_t>(i), q * s);
}

// A slab (the DMA's inner dims) longer than `most` elements is split into more outer indices:
// first a too-long innermost dim (into pieces of at least kMinPieceBytes, else it stays and is
// refused), then the row dim above a contiguous one.
constexpr uint64_t kMinPieceBytes = 4096;

void fit_slab(Collapsed& c, int64_t most, int eb) {
  if (c.sizes.back() > most) {
    const int64_t q = largest_divisor_up_to(c.sizes.back(), most);
    if (uint64_t(q) * eb >= kMinPieceBytes) split_dim(c, c.sizes.size() - 1, q);
  }
  const size_t last = c.sizes.size() - 1;
  if (c.strides[last] == 1 && last >= 1 && c.strides[last - 1] >= 0 && c.sizes[last] <= most &&
      c.sizes[last - 1] * c.sizes[last] > most) {
    split_dim(c, last - 1, largest_divisor_up_to(c.sizes[last - 1], most / c.sizes[last]));
  }
}

int32_t scalar(int64_t v, const char* what) {
  if (v > std::numeric_limits<int32_t>::max()) throw KernelError(fmt::format("strided copy: {} {} does not fit 32 bits", what, v));
  return static_cast<int32_t>(v);
}

}  // namespace

std::string CopyShape::signature() const {
  const char* k = kind == CopyKind::Rows ? "rows" : kind == CopyKind::Elements ? "elements" : "transpose";
  return fmt::format("copy|{}|{}|{}|{}", k, outer_rank, dtype_name(dtype), staging_bytes);
}

CopyPlan plan_strided_copy(const StridedCopySpec& spec, const sim::ChipConfig& chip) {
  if (spec.sizes.size() != spec.strides.size()) throw KernelError("strided copy: sizes and strides differ in rank");
  if (!dtype_on_chip(spec.dtype)) throw KernelError(fmt::format("strided copy: {} is not supported on the chip", dtype_name(spec.dtype)));
  // Outer dims may step backwards (a flipped view, as the convolution's input gradient reads its
  // windows); the view must still start inside the source.
  int64_t first = spec.offset;
  bool backwards = false;
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    if (spec.sizes[i] < 0) throw KernelError("strided copy: negative sizes");
    if (spec.strides[i] < 0 && spec.sizes[i] > 1) {
      first += (spec.sizes[i] - 1) * spec.strides[i];
      backwards = true;
    }
  }
  if (first < 0) throw KernelError("strided copy: the view starts before the source buffer");
  int64_t numel = 1;
  for (int64_t d : spec.sizes) numel *= d;
  if (numel == 0) throw KernelError("strided copy: empty tensors need no kernel");
  if (numel >= (int64_t{1} << 31)) throw KernelError("strided copy: tensor too large for one launch");
  Collapsed c = collapse(spec);
  CopyPlan plan;
  plan.shape.dtype = spec.dtype;
  if (auto t = backwards ? std::nullopt : as_transpose(c, spec)) {
    plan.shape.kind = CopyKind::Transpose;
    plan.shape.outer_rank = static_cast<int>(t->outer_sizes.size());
    plan.scalars = transpose_scalars(*t);
    return plan;
  }
  const int eb = dtype_bytes(spec.dtype);
  fit_slab(c, static_cast<int64_t>(chip.kernel_vmem_bytes() / 4 / eb), eb);
  const size_t rank = c.sizes.size();
  // The DMA's inner dims: rows of row_elems elements, row_stride elements apart in the source.
  int64_t rows, row_elems, row_stride;
  size_t outer_rank;
  // The DMA walks its rows forwards: a dim stepping backwards becomes an outer dim (decoded in
  // signed scalar registers), and the DMA moves one row (or element) at a time.
  if (c.strides.back() == 1) {
    plan.shape.kind = CopyKind::Rows;
    row_elems = c.sizes.back();
    const bool row_dim = rank >= 2 && c.strides[rank - 2] >= 0;
    rows = row_dim ? c.sizes[rank - 2] : 1;
    row_stride = row_dim ? c.strides[rank - 2] : row_elems;
    outer_rank = row_dim ? rank - 2 : rank - 1;
  } else {
    plan.shape.kind = CopyKind::Elements;
    row_elems = 1;
    const bool row_dim = c.strides.back() >= 0;
    rows = row_dim ? c.sizes.back() : 1;
    row_stride = row_dim ? c.strides.back() : 1;
    outer_rank = row_dim ? rank - 1 : rank;
  }
  const uint64_t inner_bytes = uint64_t(rows * row_elems) * eb;
  if (inner_bytes > chip.kernel_vmem_bytes() / 4) {
    throw KernelError(fmt::format("strided copy: an innermost slab of {} bytes does not fit VMEM staging", inner_bytes));
  }
  // Staging holds at least one slab; slabs up to kChunkBytes share the one common size.
  plan.shape.staging_bytes = std::max(kChunkBytes, std::bit_ceil(inner_bytes));
  plan.shape.outer_rank = static_cast<int>(outer_rank);
  plan.scalars = {scalar(spec.offset, "offset"), scalar(rows, "size"), scalar(row_elems, "size"), scalar(row_stride, "stride")};
  for (size_t i = 0; i < outer_rank; ++i) plan.scalars.push_back(scalar(c.sizes[i], "size"));
  for (size_t i = 0; i < outer_rank; ++i) plan.scalars.push_back(scalar(c.strides[i], "stride"));
  return plan;
}

isa::Program make_strided_copy(const CopyShape& shape, const sim::ChipConfig& chip) {
  if (shape.kind == CopyKind::Transpose) return make_transpose(shape.dtype, shape.outer_rank, chip);
  if (!dtype_on_chip(shape.dtype)) throw KernelError(fmt::format("strided copy: {} is not supported on the chip", dtype_name(shape.dtype)));
  if (2 * shape.staging_bytes > chip.kernel_vmem_bytes()) throw KernelError("strided copy: staging does not fit VMEM");
  const int eb = dtype_bytes(shape.dtype);
  const int outer_rank = shape.outer_rank;
  const int64_t staging = static_cast<int64_t>(shape.staging_bytes);

  AsmWriter w("strided_copy");
  auto& s = w.sregs();
  w.argument("src", isa::ArgumentKind::Buffer);
  w.argument("dst", isa::ArgumentKind::Buffer);
  for (const char* name : {"offset", "rows", "row_elems", "row_stride"}) w.argument(name, isa::ArgumentKind::Scalar);
  for (int i = 0; i < outer_rank; ++i) w.argument(fmt::format("size{}", i), isa::ArgumentKind::Scalar);
  for (int i = 0; i < outer_rank; ++i) w.argument(fmt::format("stride{}", i), isa::ArgumentKind::Scalar);
  const int chunk = s.take(), nchunks = s.take(), two = s.take(), inner = s.take(), per_chunk = s.take(), outer = s.take();
  // inner = slab bytes, outer = outer indices, per_chunk = slabs per staging buffer, chunks = ceil(outer / per_chunk)
  w.line("sarg s{}, {}", inner, kRowsArg);
  w.line("sarg s{}, {}", two, kRowElemsArg);
  w.line("smul s{}, s{}, s{}", inner, inner, two);
  w.line("smuli s{}, s{}, {}", inner, inner, eb);
  w.line("sli s{}, 1", outer);
  for (int i = 0; i < outer_rank; ++i) {
    w.line("sarg s{}, {}", two, kOuterArg + i);
    w.line("smul s{}, s{}, s{}", outer, outer, two);
  }
  w.load_immediate(per_chunk, staging);
  w.line("sdiv s{}, s{}, s{}", per_chunk, per_chunk, inner);
  w.line("sadd s{}, s{}, s{}", nchunks, outer, per_chunk);
  w.line("saddi s{}, s{}, -1", nchunks, nchunks);
  w.line("sdiv s{}, s{}, s{}", nchunks, nchunks, per_chunk);
  // Chunks are independent: each TensorCore copies a contiguous share, chunks [chunk, nchunks),
  // and waits for a staging buffer's write-back from its third chunk on (s`two` = its first + 2).
  const std::string top = w.new_label("chunk"), done = w.new_label("done");
  emit_core_share(w, chunk, nchunks);
  w.line("saddi s{}, s{}, 2", two, chunk);
  w.line("bge s{}, s{}, {}", chunk, nchunks, done);
  w.split_across_cores();
  w.place(top);
  for (int set = 0; set < 2; ++set) {
    const std::string free = w.new_label("staging_free"), gather = w.new_label("gather"), wait = w.new_label("wait");
    w.line("blt s{}, s{}, {}", chunk, two, free);  // this staging buffer's previous write-back has landed
    w.line("sem.wait sem{}, 1", kSemWrite + set);
    w.place(free);
    // outer indices [first, first + count) of this chunk
    const int first = s.take(), count = s.take(), o = s.take(), t = s.take(), off = s.take(), vm = s.take(),
              hb = s.take(), r = s.take(), rb = s.take(), hs = s.take(), k = s.take(), after = s.take(), idx = s.take();
    w.line("smul s{}, s{}, s{}", first, chunk, per_chunk);
    w.line("ssub s{}, s{}, s{}", count, outer, first);
    w.line("smin s{}, s{}, s{}", count, count, per_chunk);
    w.line("sarg s{}, {}", r, kRowsArg);
    w.line("sarg s{}, {}", rb, kRowElemsArg);
    w.line("smuli s{}, s{}, {}", rb, rb, eb);
    w.line("sarg s{}, {}", hs, kRowStrideArg);
    w.line("smuli s{}, s{}, {}", hs, hs, eb);
    w.line("sli s{}, 0", k);
    w.place(gather);
    w.line("sadd s{}, s{}, s{}", o, first, k);
    // source element offset of outer index o: sum over outer dims of ((o / after) % size) * stride
    w.line("sarg s{}, {}", off, kOffsetArg);
    add_outer_offset(w, off, o, outer_rank, kOuterArg, after, idx, t);
    w.line("sarg s{}, 0", hb);
    w.add_scaled(hb, off, eb, off);
    w.line("smul s{}, s{}, s{}", vm, k, inner);
    w.line("saddi s{}, s{}, {}", vm, vm, set * staging);
    w.dma_to_vmem(0, kSemGather + set, {.vmem = vm, .hbm = hb, .rows = r, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = hs});
    w.line("saddi s{}, s{}, 1", k, k);
    w.line("blt s{}, s{}, {}", k, count, gather);
    w.line("sli s{}, 0", k);  // each gather's signal, in issue order
    w.place(wait);
    w.line("sem.wait sem{}, 1", kSemGather + set);
    w.line("saddi s{}, s{}, 1", k, k);
    w.line("blt s{}, s{}, {}", k, count, wait);
    // staging -> dst[first * inner ..], one contiguous DMA
    w.load_immediate(vm, set * staging);
    w.line("sarg s{}, 1", hb);
    w.line("smul s{}, s{}, s{}", t, first, inner);
    w.line("sadd s{}, s{}, s{}", hb, hb, t);
    w.line("smul s{}, s{}, s{}", rb, count, inner);
    w.line("sli s{}, 1", r);
    w.dma_to_hbm(1, kSemWrite + set, {.vmem = vm, .hbm = hb, .rows = r, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
    for (int x : {first, count, o, t, off, vm, hb, r, rb, hs, k, after, idx}) s.release(x);
    w.line("saddi s{}, s{}, 1", chunk, chunk);
    w.line("bge s{}, s{}, {}", chunk, nchunks, done);
  }
  w.line("jmp {}", top);
  w.place(done);
  return w.assemble();
}

}  // namespace vtpu::kernels
