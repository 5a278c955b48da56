// Per chunk of up to kChunk values: one DMA brings the word pairs into VMEM for the checks,
// another (4-byte rows, 8 bytes apart in HBM) the low words packed, which leave in one DMA once
// every value of the chunk has been checked with `sld`. Chunks run one after another: int64
// bookkeeping tensors are short (positions, lengths), so overlap would not pay for its registers.
#include "kernels/generators/int64_narrow.h"

#include <fmt/format.h>

#include "kernels/codegen/asm_writer.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kChunk = 4096;
constexpr uint64_t kPairsVmem = 0, kLowVmem = kChunk * 8;

}  // namespace

isa::Program make_int64_narrow(const sim::ChipConfig& chip) {
  if (kLowVmem + kChunk * 4 > chip.kernel_vmem_bytes()) throw KernelError(fmt::format("int64 narrow: {} has too little VMEM", chip.name));
  AsmWriter w("int64_narrow");
  const int words_arg = w.argument("words", isa::ArgumentKind::Buffer);
  const int out_arg = w.argument("out", isa::ArgumentKind::Buffer);
  const int count_arg = w.argument("count", isa::ArgumentKind::Scalar);
  const int largest_arg = w.argument("largest", isa::ArgumentKind::Scalar);  // bound - 1: 2^31 - 1 at most, as int32 holds
  auto& s = w.sregs();
  const int n = s.take(), largest = s.take(), neg_largest = s.take(), base = s.take(), cnt = s.take(), i = s.take(), cursor = s.take(),
            low = s.take(), high = s.take(), vm = s.take(), hb = s.take(), one = s.take(), bytes = s.take(), t = s.take();
  const std::string chunk_loop = w.new_label("chunk"), check = w.new_label("check"), negative = w.new_label("negative"),
                    checked = w.new_label("checked"), done = w.new_label("done"), bad = w.new_label("bad_int64");
  w.line("sarg s{}, {}", n, count_arg);
  w.line("sarg s{}, {}", largest, largest_arg);
  w.line("ssub s{}, s0, s{}", neg_largest, largest);
  w.line("sli s{}, 0", base);
  w.line("sli s{}, 1", one);
  w.line("bge s0, s{}, {}", n, done);
  w.place(chunk_loop);
  w.load_immediate(t, kChunk);
  w.line("ssub s{}, s{}, s{}", cnt, n, base);
  w.line("smin s{}, s{}, s{}", cnt, cnt, t);
  // the pairs, as they are, for the checks
  w.line("sarg s{}, {}", hb, words_arg);
  w.add_scaled(hb, base, 8, t);
  w.load_immediate(vm, kPairsVmem);
  w.line("smuli s{}, s{}, 8", bytes, cnt);
  w.dma_to_vmem(0, 0, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = bytes});
  // the low words, packed: cnt rows of 4 bytes, 8 bytes apart in HBM
  w.load_immediate(vm, kLowVmem);
  w.load_immediate(t, 8);
  w.load_immediate(bytes, 4);
  w.dma_to_vmem(0, 0, {.vmem = vm, .hbm = hb, .rows = cnt, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = t});
  w.line("sem.wait sem0, 2");
  w.load_immediate(cursor, kPairsVmem);
  w.line("sli s{}, 0", i);
  w.place(check);
  w.line("sld s{}, s{}, 0", low, cursor);
  w.line("sld s{}, s{}, 4", high, cursor);
  w.line("blt s{}, s{}, {}", largest, low, bad);
  w.line("blt s{}, s{}, {}", low, neg_largest, bad);
  w.line("blt s{}, s0, {}", low, negative);
  w.line("bne s{}, s0, {}", high, bad);  // a non-negative value's high word is 0
  w.line("jmp {}", checked);
  w.place(negative);
  w.line("sli s{}, -1", t);
  w.line("bne s{}, s{}, {}", high, t, bad);  // a negative value's high word is all ones
  w.place(checked);
  w.line("saddi s{}, s{}, 8", cursor, cursor);
  w.line("saddi s{}, s{}, 1", i, i);
  w.line("blt s{}, s{}, {}", i, cnt, check);
  // the chunk's low words leave in one DMA
  w.load_immediate(vm, kLowVmem);
  w.line("sarg s{}, {}", hb, out_arg);
  w.add_scaled(hb, base, 4, t);
  w.line("smuli s{}, s{}, 4", bytes, cnt);
  w.dma_to_hbm(1, 1, {.vmem = vm, .hbm = hb, .rows = one, .row_bytes = bytes, .vmem_stride = bytes, .hbm_stride = bytes});
  w.line("sem.wait sem1, 1");  // before the next chunk's low words overwrite the staging
  w.line("sadd s{}, s{}, s{}", base, base, cnt);
  w.line("blt s{}, s{}, {}", base, n, chunk_loop);
  w.place(done);
  w.cold([&] {
    w.place(bad);
    w.trap(TrapCode::Int64OutOfRange);
  });
  for (int x : {n, largest, neg_largest, base, cnt, i, cursor, low, high, vm, hb, one, bytes, t}) s.release(x);
  return w.assemble();
}

}  // namespace vtpu::kernels
