#include "kernels/codegen/index_reader.h"

namespace vtpu::kernels {

void issue_index_chunk(AsmWriter& w, const IndexChunkRegs& r, int index_arg, int index_bytes, uint64_t index_vmem,
                       int64_t chunk) {
  w.load_immediate(r.scratch, chunk);
  w.line("ssub s{}, s{}, s{}", r.cnt, r.n, r.base);
  w.line("smin s{}, s{}, s{}", r.cnt, r.cnt, r.scratch);
  w.line("sarg s{}, {}", r.hb, index_arg);
  w.add_scaled(r.hb, r.base, index_bytes, r.scratch);
  w.load_immediate(r.vm, index_vmem);
  w.line("smuli s{}, s{}, {}", r.bytes, r.cnt, index_bytes);
  w.dma_to_vmem(0, 0, {.vmem = r.vm, .hbm = r.hb, .rows = r.one, .row_bytes = r.bytes, .vmem_stride = r.bytes, .hbm_stride = r.bytes});
}

void read_index(AsmWriter& w, int idx, int cursor, int rows, int scratch, bool pairs, const std::string& bad,
                bool wrap_negative) {
  w.line("sld s{}, s{}, 0", idx, cursor);
  if (pairs) w.line("sld s{}, s{}, 4", scratch, cursor);
  if (!wrap_negative) {
    if (pairs) w.line("bne s{}, s0, {}", scratch, bad);  // negative, or past 2^31 rows
    w.line("blt s{}, s0, {}", idx, bad);
    w.line("bge s{}, s{}, {}", idx, rows, bad);
    return;
  }
  const std::string non_negative = w.new_label("index_non_negative"), checked = w.new_label("index_checked");
  w.line("bge s{}, s0, {}", idx, non_negative);
  if (pairs) {  // a negative int64 in int32 range: high word -1
    w.line("saddi s{}, s{}, 1", scratch, scratch);
    w.line("bne s{}, s0, {}", scratch, bad);
  }
  w.line("sadd s{}, s{}, s{}", idx, idx, rows);
  w.line("blt s{}, s0, {}", idx, bad);
  w.line("jmp {}", checked);
  w.place(non_negative);
  if (pairs) w.line("bne s{}, s0, {}", scratch, bad);
  w.place(checked);
  w.line("bge s{}, s{}, {}", idx, rows, bad);
}

void place_index_trap(AsmWriter& w, const std::string& bad) {
  w.cold([&] {
    w.place(bad);
    w.trap(TrapCode::IndexOutOfRange);
  });
}

}  // namespace vtpu::kernels
