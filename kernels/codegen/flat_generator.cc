// See flat_generator.h.
#include "kernels/codegen/flat_generator.h"

#include <fmt/format.h>

#include "kernels/codegen/core_share.h"
#include "kernels/codegen/operand.h"
#include "kernels/codegen/vreg_shape.h"

namespace vtpu::kernels {
namespace {

constexpr int64_t kTile = kSublanes * kLanes;
constexpr int64_t kBlockTiles = 64;  // tiles per staging buffer

}  // namespace

void emit_flat_generator(AsmWriter& w, const sim::ChipConfig& chip, RegisterPool& vregs, TileCodegen& codegen, DType out,
                         int out_arg, int count_arg, uint64_t vmem_base, const std::function<TileValue(int indices)>& tile) {
  const int eb = dtype_bytes(out);
  const uint64_t staging_bytes = uint64_t(kBlockTiles * kTile * eb);
  if (vmem_base + 2 * staging_bytes > chip.kernel_vmem_bytes()) throw KernelError(fmt::format("{}: {} has too little VMEM", w.name(), chip.name));
  auto& s = w.sregs();
  const int n = s.take(), base = s.take(), parity = s.take(), cnt = s.take(), tiles = s.take(), tile_index = s.take(),
            cursor = s.take(), t = s.take(), u = s.take();
  const std::string block_loop = w.new_label("block"), tile_loop = w.new_label("tile"), free = w.new_label("staging_free"),
                    done = w.new_label("done");
  const int lanes = vregs.take(), start = s.take();
  w.line("viota v{}", lanes);
  // Blocks are independent (every element is a function of its index): each TensorCore takes a
  // contiguous share of them, elements [start, n).
  static_assert(kBlockTiles * kTile == 1 << 16);
  // blocks = (n >> 16) + (n & 0xffff != 0): n + 0xffff could wrap int32 near 2^31 elements
  w.line("sarg s{}, {}", n, count_arg);
  w.line("sshri s{}, s{}, 16", t, n);
  w.load_immediate(u, kBlockTiles * kTile - 1);
  w.line("sand s{}, s{}, s{}", u, n, u);
  w.line("sslt s{}, s0, s{}", u, u);
  w.line("sadd s{}, s{}, s{}", t, t, u);
  emit_core_share(w, start, t);
  w.line("sshli s{}, s{}, 16", start, start);
  w.line("sshli s{}, s{}, 16", t, t);
  w.line("smin s{}, s{}, s{}", n, n, t);
  w.line("smov s{}, s{}", base, start);
  w.line("sli s{}, 0", parity);
  w.line("bge s{}, s{}, {}", base, n, done);
  w.split_across_cores();
  w.place(block_loop);
  w.load_immediate(t, kBlockTiles * kTile);
  w.line("ssub s{}, s{}, s{}", cnt, n, base);
  w.line("smin s{}, s{}, s{}", cnt, cnt, t);  // elements of this block
  w.line("saddi s{}, s{}, {}", tiles, cnt, kTile - 1);
  w.line("sshri s{}, s{}, 10", tiles, tiles);
  // the staging buffer of this parity is free once block k-2's write-back has landed
  w.line("saddi s{}, s{}, {}", t, start, 2 * kBlockTiles * kTile);
  w.line("blt s{}, s{}, {}", base, t, free);
  w.line("sem.wait sem2, 1");
  w.place(free);
  w.line("smuli s{}, s{}, {}", cursor, parity, int64_t(staging_bytes));
  w.line("saddi s{}, s{}, {}", cursor, cursor, int64_t(vmem_base));
  w.line("sli s{}, 0", tile_index);
  w.place(tile_loop);
  {
    const int indices = vregs.take();  // base + tile * 1024 + the lane's flat index
    w.line("smuli s{}, s{}, {}", t, tile_index, kTile);
    w.line("sadd s{}, s{}, s{}", t, t, base);
    w.line("vbcast v{}, s{}", indices, t);
    w.line("viadd v{}, v{}, v{}", indices, indices, lanes);
    const TileValue v = tile(indices);
    w.line("{} v{}, m0, s{}, 0, {}", store_mnemonic(out), v.reg, cursor, kLanes * eb);
    codegen.release(v);
  }
  w.line("saddi s{}, s{}, {}", cursor, cursor, kTile * eb);
  w.line("saddi s{}, s{}, 1", tile_index, tile_index);
  w.line("blt s{}, s{}, {}", tile_index, tiles, tile_loop);
  // the block's elements leave in one DMA (one row of cnt elements)
  w.line("smuli s{}, s{}, {}", cursor, parity, int64_t(staging_bytes));
  w.line("saddi s{}, s{}, {}", cursor, cursor, int64_t(vmem_base));
  w.line("sarg s{}, {}", u, out_arg);
  w.add_scaled(u, base, eb, t);
  w.line("smuli s{}, s{}, {}", t, cnt, eb);
  w.line("sli s{}, 1", tile_index);
  w.dma_to_hbm(1, 2, {.vmem = cursor, .hbm = u, .rows = tile_index, .row_bytes = t, .vmem_stride = t, .hbm_stride = t});
  w.line("sadd s{}, s{}, s{}", base, base, cnt);
  w.line("sli s{}, 1", t);
  w.line("sxor s{}, s{}, s{}", parity, parity, t);
  w.line("blt s{}, s{}, {}", base, n, block_loop);
  w.place(done);
  vregs.release(lanes);
  for (int x : {n, base, parity, cnt, tiles, tile_index, cursor, t, u, start}) s.release(x);
}

}  // namespace vtpu::kernels
