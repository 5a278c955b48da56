// Indices go through VMEM in chunks; per index, `sld` reads it, it is checked against the table,
// and one DMA brings that table row into a staging buffer; a chunk's rows leave in one DMA.
// Two staging buffers alternate, so a chunk's write-back overlaps the next chunk's row reads.
// Semaphores: sem0 the index chunk, sem1 the rows, sem2 the write-backs (dq1 lands them in order,
// so the k-th wait takes chunk k's).
#include "kernels/generators/gather.h"

#include <fmt/format.h>

#include <algorithm>

#include "kernels/codegen/asm_writer.h"
#include "kernels/codegen/index_reader.h"

namespace vtpu::kernels {
namespace {

constexpr uint64_t kStagingBytes = 256 * 1024;  // per buffer: a chunk's rows
constexpr int64_t kMaxChunk = 256;              // indices per chunk

}  // namespace

isa::Program make_gather(const GatherSpec& spec, const sim::ChipConfig& chip) {
  if (!dtype_on_chip(spec.dtype)) throw KernelError(fmt::format("gather: {} is not supported on the chip", dtype_name(spec.dtype)));
  if (spec.width < 1) throw KernelError("gather: empty rows need no kernel");
  const int64_t row_bytes = spec.width * dtype_bytes(spec.dtype);
  if (uint64_t(row_bytes) > kStagingBytes) {
    throw KernelError(fmt::format("gather: rows of {} bytes exceed the {}-byte staging buffer", row_bytes, kStagingBytes));
  }
  const int64_t chunk = std::min<int64_t>(kMaxChunk, int64_t(kStagingBytes) / row_bytes);
  const int index_bytes = spec.index_pairs ? 8 : 4;
  const uint64_t index_vmem = 0, staging_vmem = 4096;  // chunk * 8 <= 2048 bytes of indices
  if (staging_vmem + 2 * kStagingBytes > chip.kernel_vmem_bytes()) throw KernelError(fmt::format("gather: {} has too little VMEM", chip.name));

  AsmWriter w("gather");
  const int table_arg = w.argument("table", isa::ArgumentKind::Buffer);
  const int index_arg = w.argument("index", isa::ArgumentKind::Buffer);
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int count_arg = w.argument("count", isa::ArgumentKind::Scalar);
  const int rows_arg = w.argument("rows", isa::ArgumentKind::Scalar);
  auto& s = w.sregs();
  const int n = s.take(), rows = s.take(), base = s.take(), parity = s.take(), cnt = s.take(), r = s.take(), idx = s.take(),
            cursor = s.take(), vm = s.take(), hb = s.take(), one = s.take(), bytes = s.take(), rb = s.take(), t = s.take();
  const std::string chunk_loop = w.new_label("chunk"), row_loop = w.new_label("row"), wait_loop = w.new_label("wait"),
                    staging_free = w.new_label("staging_free"), done = w.new_label("done"), bad = w.new_label("bad_index");
  w.line("sarg s{}, {}", n, count_arg);
  w.line("sarg s{}, {}", rows, rows_arg);
  w.line("sli s{}, 0", base);
  w.line("sli s{}, 0", parity);
  w.line("sli s{}, 1", one);
  w.load_immediate(rb, row_bytes);
  w.line("bge s0, s{}, {}", n, done);
  w.place(chunk_loop);
  issue_index_chunk(w, {n, base, one, cnt, hb, vm, bytes, t}, index_arg, index_bytes, index_vmem, chunk);
  // the staging buffer of this parity is free once chunk k-2's write-back has landed
  w.load_immediate(t, 2 * chunk);
  w.line("blt s{}, s{}, {}", base, t, staging_free);
  w.line("sem.wait sem2, 1");
  w.place(staging_free);
  w.line("sem.wait sem0, 1");
  w.load_immediate(cursor, index_vmem);
  w.line("smuli s{}, s{}, {}", vm, parity, int64_t(kStagingBytes));
  w.line("saddi s{}, s{}, {}", vm, vm, int64_t(staging_vmem));
  w.line("sli s{}, 0", r);
  w.place(row_loop);
  read_index(w, idx, cursor, rows, t, spec.index_pairs, bad, spec.wrap_negative);
  w.line("sarg s{}, {}", hb, table_arg);
  w.add_scaled(hb, idx, row_bytes, t);
  w.dma_to_vmem(0, 1, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
  w.line("sadd s{}, s{}, s{}", vm, vm, rb);
  w.line("saddi s{}, s{}, {}", cursor, cursor, index_bytes);
  w.line("saddi s{}, s{}, 1", r, r);
  w.line("blt s{}, s{}, {}", r, cnt, row_loop);
  // every row of the chunk landed (one signal each), then the chunk leaves in one DMA
  w.line("sli s{}, 0", r);
  w.place(wait_loop);
  w.line("sem.wait sem1, 1");
  w.line("saddi s{}, s{}, 1", r, r);
  w.line("blt s{}, s{}, {}", r, cnt, wait_loop);
  w.line("smuli s{}, s{}, {}", vm, parity, int64_t(kStagingBytes));
  w.line("saddi s{}, s{}, {}", vm, vm, int64_t(staging_vmem));
  w.line("sarg s{}, {}", hb, out_arg);
  w.add_scaled(hb, base, row_bytes, t);
  w.dma_to_hbm(1, 2, {.vmem = vm, .hbm = hb, .rows = cnt, .row_bytes = rb, .vmem_stride = rb, .hbm_stride = rb});
  w.line("sadd s{}, s{}, s{}", base, base, cnt);
  w.line("sxor s{}, s{}, s{}", parity, parity, one);
  w.line("blt s{}, s{}, {}", base, n, chunk_loop);
  w.place(done);
  place_index_trap(w, bad);
  for (int x : {n, rows, base, parity, cnt, r, idx, cursor, vm, hb, one, bytes, rb, t}) s.release(x);
  return w.assemble();
}

}  // namespace vtpu::kernels
