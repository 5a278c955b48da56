// The output is cleared first (DMAs from a VMEM block of the combine's identity: zeros for a
// sum). Then, index by index and in order: the source row and the indexed output row come into
// VMEM, are combined tile by tile on the VPU, and the result goes back before the next index is
// read, so repeated indices accumulate.
// Serial by design: each index costs two HBM round trips; fine for embedding gradients of the
// token counts a simulator runs, and exactly torch's summation order.
// Semaphores: sem0 index chunks, sem1 row reads, sem2 writes.
#include "kernels/generators/scatter_add.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/asm_writer.h"
#include "kernels/generators/elementwise.h"
#include "kernels/codegen/index_reader.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kChunk = 256;            // indices per chunk
constexpr int64_t kTile = kSublanes * kLanes;
constexpr uint64_t kZeroBytes = 64 * 1024;  // the block of identities the output is cleared from

const char* combine_mnemonic(ScatterCombine c) {
  switch (c) {
    case ScatterCombine::Add: return "vadd";
    case ScatterCombine::Max: return "vmax";
    case ScatterCombine::Min: return "vmin";
    case ScatterCombine::Mul: return "vmul";
  }
  return "vadd";
}

const char* kernel_name(ScatterCombine c) {
  switch (c) {
    case ScatterCombine::Add: return "scatter_add";
    case ScatterCombine::Max: return "scatter_max";
    case ScatterCombine::Min: return "scatter_min";
    case ScatterCombine::Mul: return "scatter_mul";
  }
  return "scatter_add";
}

// The 32-bit word the output is cleared with: the combine's identity as an f32, or as two bf16 or
// f16 halves (the clearing DMAs copy bytes, whatever the dtype).
uint32_t identity_word(ScatterCombine c, DType dtype) {
  const uint32_t f32 = c == ScatterCombine::Add ? 0u : c == ScatterCombine::Mul ? 0x3F800000u
                     : c == ScatterCombine::Max ? 0xFF800000u : 0x7F800000u;
  const uint32_t f16 = c == ScatterCombine::Add ? 0u : c == ScatterCombine::Mul ? 0x3C00u  // 0, 1, -inf, inf
                     : c == ScatterCombine::Max ? 0xFC00u : 0x7C00u;
  if (dtype == DType::F16) return f16 << 16 | f16;
  return dtype == DType::BF16 ? (f32 & 0xFFFF0000u) | (f32 >> 16) : f32;
}

// out = identity over `rows` rows of s`rb` bytes: a VMEM block of it, then one DMA per
// block-sized piece of the output (sem2), each waited for before the kernel goes on at `then`,
// since rows are read back after.
struct ZeroRegs {
  int rows, rb, vm, hb, cnt, t, u, one;
};
void clear_output(AsmWriter& w, const ZeroRegs& r, uint32_t identity, int out_arg, uint64_t zero_vmem,
                  const std::string& zero_loop, const std::string& zero_wait, const std::string& then) {
  w.load_immediate(r.t, static_cast<int32_t>(identity));
  w.line("vbcast v0, s{}", r.t);
  w.load_immediate(r.vm, zero_vmem);
  for (uint64_t off = 0; off < kZeroBytes; off += kTile * 4) {
    w.line("vst v0, m0, s{}, 0, {}", r.vm, kLanes * 4);
    w.line("saddi s{}, s{}, {}", r.vm, r.vm, kTile * 4);
  }
  w.load_immediate(r.vm, zero_vmem);
  w.line("smul s{}, s{}, s{}", r.t, r.rows, r.rb);  // bytes left
  w.line("sarg s{}, {}", r.hb, out_arg);
  w.line("sli s{}, 0", r.cnt);  // write-backs issued
  w.line("bge s0, s{}, {}", r.t, zero_wait);
  w.place(zero_loop);
  w.load_immediate(r.u, kZeroBytes);
  w.line("smin s{}, s{}, s{}", r.u, r.u, r.t);
  w.dma_to_hbm(1, 2, {.vmem = r.vm, .hbm = r.hb, .rows = r.one, .row_bytes = r.u, .vmem_stride = r.u, .hbm_stride = r.u});
  w.line("sadd s{}, s{}, s{}", r.hb, r.hb, r.u);
  w.line("ssub s{}, s{}, s{}", r.t, r.t, r.u);
  w.line("saddi s{}, s{}, 1", r.cnt, r.cnt);
  w.line("blt s0, s{}, {}", r.t, zero_loop);
  w.place(zero_wait);  // every zero has landed before the first row is read back
  w.line("bge s0, s{}, {}", r.cnt, then);
  w.line("sem.wait sem2, 1");
  w.line("saddi s{}, s{}, -1", r.cnt, r.cnt);
  w.line("jmp {}", zero_wait);
}

// b = b (combine) a over a row's whole tiles at a_vmem and b_vmem (the bytes past the row are
// never written back); s`t` and s`u` are scratch.
void combine_row(AsmWriter& w, ScatterCombine combine, DType dtype, int64_t tiles, uint64_t a_vmem, uint64_t b_vmem,
                 int t, int u) {
  const int eb = dtype_bytes(dtype);
  w.load_immediate(t, a_vmem);
  w.load_immediate(u, b_vmem);
  for (int64_t tile = 0; tile < tiles; ++tile) {
    w.line("{} v1, m0, s{}, 0, {}", load_mnemonic(dtype), t, kLanes * eb);
    w.line("{} v2, m0, s{}, 0, {}", load_mnemonic(dtype), u, kLanes * eb);
    w.line("{} v2, v2, v1", combine_mnemonic(combine));
    w.line("{} v2, m0, s{}, 0, {}", store_mnemonic(dtype), u, kLanes * eb);
    w.line("saddi s{}, s{}, {}", t, t, kTile * eb);
    w.line("saddi s{}, s{}, {}", u, u, kTile * eb);
  }
}

}  // namespace

isa::Program make_scatter_add(const ScatterAddSpec& spec, const sim::ChipConfig& chip) {
  if (!dtype_is_float(spec.dtype)) throw KernelError("scatter_add: rows are f32, bf16 or f16");
  if (spec.width < 1) throw KernelError("scatter_add: empty rows need no kernel");
  const int eb = dtype_bytes(spec.dtype);
  const int64_t row_bytes = spec.width * eb, tiles = (spec.width + kTile - 1) / kTile;
  const uint64_t row_vmem = uint64_t(tiles * kTile * 4);  // room for whole f32 tiles
  const int index_bytes = spec.index_pairs ? 8 : 4;
  const uint64_t index_vmem = 0, a_vmem = 4096, b_vmem = a_vmem + row_vmem, zero_vmem = b_vmem + row_vmem;
  if (zero_vmem + kZeroBytes > chip.kernel_vmem_bytes()) {
    throw KernelError(fmt::format("scatter_add: rows of {} bytes do not fit {}'s VMEM twice", row_bytes, chip.name));
  }

  AsmWriter w(kernel_name(spec.combine));
  const int src_arg = w.argument("src", isa::ArgumentKind::Buffer);
  const int index_arg = w.argument("index", isa::ArgumentKind::Buffer);
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int count_arg = w.argument("count", isa::ArgumentKind::Scalar);
  const int rows_arg = w.argument("rows", isa::ArgumentKind::Scalar);
  const int pad_arg = w.argument("padding_index", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int n = s.take(), rows = s.take(), pad = s.take(), base = s.take(), cnt = s.take(), r = s.take(), idx = s.take(),
            cursor = s.take(), vm = s.take(), hb = s.take(), one = s.take(), rb = s.take(), t = s.take(), u = s.take();
  const std::string zero_loop = w.new_label("zero"), zero_wait = w.new_label("zero_wait"), chunk_loop = w.new_label("chunk"),
                    row_loop = w.new_label("row"), next = w.new_label("next_index"), done = w.new_label("done"),
                    bad = w.new_label("bad_index");
  w.line("sarg s{}, {}", n, count_arg);
  w.line("sarg s{}, {}", rows, rows_arg);
  w.line("sarg s{}, {}", pad, pad_arg);
  w.line("sli s{}, 1", one);
  w.load_immediate(rb, row_bytes);
  clear_output(w, {rows, rb, vm, hb, cnt, t, u, one}, identity_word(spec.combine, spec.dtype), out_arg, zero_vmem,
               zero_loop, zero_wait, chunk_loop);
  // the indices, chunk by chunk
  w.place(chunk_loop);
  w.line("sli s{}, 0", base);
  const std::string chunk_top = w.new_label("chunk_top");
  w.line("bge s{}, s{}, {}", base, n, done);
  w.place(chunk_top);
  issue_index_chunk(w, {n, base, one, cnt, hb, vm, u, t}, index_arg, index_bytes, index_vmem, kChunk);
  w.line("sem.wait sem0, 1");
  w.load_immediate(cursor, index_vmem);
  w.line("sli s{}, 0", r);
  w.place(row_loop);
  read_index(w, idx, cursor, rows, t, spec.index_pairs, bad);  // checked first: a -1 is no padding index
  w.line("beq s{}, s{}, {}", idx, pad, next);
  // src row base + r and out row idx into VMEM
  w.line("sarg s{}, {}", hb, src_arg);
  w.line("sadd s{}, s{}, s{}", t, base, r);
  w.add_scaled(hb, t, row_bytes, u);
  w.load_immediate(vm, a_vmem);
  w.dma_to_vmem(0, 1, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
  w.line("sarg s{}, {}", hb, out_arg);
  w.add_scaled(hb, idx, row_bytes, u);
  w.load_immediate(vm, b_vmem);
  w.dma_to_vmem(0, 1, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
  w.line("sem.wait sem1, 2");
  combine_row(w, spec.combine, spec.dtype, tiles, a_vmem, b_vmem, t, u);
  w.load_immediate(u, b_vmem);
  w.dma_to_hbm(1, 2, {.vmem = u, .hbm = hb, .rows = one, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
  w.line("sem.wait sem2, 1");  // the next index may name the same row
  w.place(next);
  w.line("saddi s{}, s{}, {}", cursor, cursor, index_bytes);
  w.line("saddi s{}, s{}, 1", r, r);
  w.line("blt s{}, s{}, {}", r, cnt, row_loop);
  w.line("sadd s{}, s{}, s{}", base, base, cnt);
  w.line("blt s{}, s{}, {}", base, n, chunk_top);
  w.place(done);
  place_index_trap(w, bad);
  for (int x : {n, rows, pad, base, cnt, r, idx, cursor, vm, hb, one, rb, t, u}) s.release(x);
  return w.assemble();
}

}  // namespace vtpu::kernels
