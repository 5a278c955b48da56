// Dims are first collapsed (adjacent dims that are contiguous in the source merge; size-1 dims
// drop). The innermost one or two dims form one 2-D DMA: rows of the innermost dim when it is
// contiguous, else rows of one element each. Every other dim is an outer index, decoded at run
// time by division. Gathers for a chunk of outer indices fill a VMEM staging buffer, which goes
// back to HBM in one contiguous DMA; two staging buffers alternate (the loop body is emitted
// once per buffer because semaphores are immediates).
#include "kernels/strided_copy.h"

#include <algorithm>
#include <optional>

#include "kernels/asm_writer.h"
#include "kernels/transpose.h"

namespace vtpu::kernels {
namespace {

constexpr uint64_t kChunkBytes = 256 * 1024;
constexpr int kSemGather = 0, kSemWrite = 2;

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

}  // namespace

isa::Program make_strided_copy(const StridedCopySpec& spec, const sim::ChipConfig& chip) {
  if (spec.sizes.size() != spec.strides.size()) throw KernelError("strided copy: sizes and strides differ in rank");
  if (!dtype_on_chip(spec.dtype)) throw KernelError(fmt::format("strided copy: {} is not supported on the chip", dtype_name(spec.dtype)));
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    if (spec.sizes[i] < 0 || spec.strides[i] < 0) throw KernelError("strided copy: negative sizes or strides");
  }
  int64_t numel = 1;
  for (int64_t d : spec.sizes) numel *= d;
  if (numel == 0) throw KernelError("strided copy: empty tensors need no kernel");
  if (numel >= (int64_t{1} << 31)) throw KernelError("strided copy: tensor too large for one launch");
  const Collapsed c = collapse(spec);
  if (auto t = as_transpose(c, spec)) return make_transpose(*t, chip);
  const int eb = dtype_bytes(spec.dtype);
  const size_t rank = c.sizes.size();
  // The DMA's inner dims: (rows, row_bytes, hbm_stride).
  int64_t rows, row_bytes, hstride, inner_elems;
  size_t outer_rank;
  if (c.strides.back() == 1) {
    row_bytes = c.sizes.back() * eb;
    rows = rank >= 2 ? c.sizes[rank - 2] : 1;
    hstride = rank >= 2 ? c.strides[rank - 2] * eb : row_bytes;
    outer_rank = rank >= 2 ? rank - 2 : 0;
  } else {
    row_bytes = eb;
    rows = c.sizes.back();
    hstride = c.strides.back() * eb;
    outer_rank = rank - 1;
  }
  inner_elems = rows * row_bytes / eb;
  const uint64_t inner_bytes = uint64_t(inner_elems) * eb;
  if (inner_bytes > chip.vmem_bytes / 4) {
    throw KernelError(fmt::format("strided copy: an innermost slab of {} bytes does not fit VMEM staging", inner_bytes));
  }
  int64_t outer = 1;
  for (size_t i = 0; i < outer_rank; ++i) outer *= c.sizes[i];
  const int64_t per_chunk = std::max<int64_t>(1, int64_t(kChunkBytes / inner_bytes));
  const int64_t chunks = (outer + per_chunk - 1) / per_chunk;
  const uint64_t staging = (uint64_t(per_chunk) * inner_bytes + 511) / 512 * 512;

  AsmWriter w("strided_copy");
  auto& s = w.sregs();
  const int src_arg = w.argument("src", isa::ArgumentKind::Buffer), dst_arg = w.argument("dst", isa::ArgumentKind::Buffer);
  const int chunk = s.take(), nchunks = s.take(), two = s.take();
  w.load_immediate(nchunks, chunks);
  w.load_immediate(two, 2);
  w.line("sli s{}, 0", chunk);
  const std::string top = w.new_label("chunk"), done = w.new_label("done");
  w.place(top);
  for (int set = 0; set < 2; ++set) {
    const std::string free = w.new_label("staging_free"), gather = w.new_label("gather"), wait = w.new_label("wait");
    w.line("blt s{}, s{}, {}", chunk, two, free);  // this staging buffer's previous write-back has landed
    w.line("sem.wait sem{}, 1", kSemWrite + set);
    w.place(free);
    // outer indices [first, last) of this chunk
    const int first = s.take(), count = s.take(), o = s.take(), t = s.take(), off = s.take(), vm = s.take(),
              hb = s.take(), r = s.take(), rb = s.take(), vs = s.take(), hs = s.take(), k = s.take();
    w.line("smuli s{}, s{}, {}", first, chunk, per_chunk);
    w.load_immediate(count, outer);
    w.line("ssub s{}, s{}, s{}", count, count, first);
    w.load_immediate(t, per_chunk);
    w.line("smin s{}, s{}, s{}", count, count, t);
    w.line("sli s{}, 0", k);
    w.place(gather);
    w.line("sadd s{}, s{}, s{}", o, first, k);
    // source element offset of outer index o: sum over outer dims of ((o / after) % size) * stride
    w.load_immediate(off, spec.offset);
    int64_t after = 1;
    for (size_t i = outer_rank; i-- > 0;) {
      w.load_immediate(t, after);
      w.line("sdiv s{}, s{}, s{}", vm, o, t);
      w.load_immediate(t, c.sizes[i]);
      w.line("srem s{}, s{}, s{}", vm, vm, t);
      w.add_scaled(off, vm, c.strides[i], vm);
      after *= c.sizes[i];
    }
    w.line("sarg s{}, {}", hb, src_arg);
    w.add_scaled(hb, off, eb, off);
    w.line("smuli s{}, s{}, {}", vm, k, int64_t(inner_bytes));
    w.line("saddi s{}, s{}, {}", vm, vm, set * staging);
    w.load_immediate(r, rows);
    w.load_immediate(rb, row_bytes);
    w.load_immediate(vs, row_bytes);
    w.load_immediate(hs, hstride);
    w.line("dma.h2v dq0, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemGather + set, vm, hb, r, rb, vs, hs);
    w.line("saddi s{}, s{}, 1", k, k);
    w.line("blt s{}, s{}, {}", k, count, gather);
    w.line("sli s{}, 0", k);  // each gather's signal, in issue order
    w.place(wait);
    w.line("sem.wait sem{}, 1", kSemGather + set);
    w.line("saddi s{}, s{}, 1", k, k);
    w.line("blt s{}, s{}, {}", k, count, wait);
    // staging -> dst[first * inner ..], one contiguous DMA
    w.load_immediate(vm, set * staging);
    w.line("sarg s{}, {}", hb, dst_arg);
    w.add_scaled(hb, first, int64_t(inner_bytes), t);
    w.line("smuli s{}, s{}, {}", rb, count, int64_t(inner_bytes));
    w.line("sli s{}, 1", r);
    w.line("dma.v2h dq1, sem{}, s{}, s{}, s{}, s{}, s{}, s{}", kSemWrite + set, vm, hb, r, rb, rb, rb);
    for (int x : {first, count, o, t, off, vm, hb, r, rb, vs, hs, k}) s.release(x);
    w.line("saddi s{}, s{}, 1", chunk, chunk);
    w.line("bge s{}, s{}, {}", chunk, nchunks, done);
  }
  w.line("jmp {}", top);
  w.place(done);
  return w.assemble();
}

}  // namespace vtpu::kernels
