// Collectives as kernels over chip-to-chip DMA (dma.remote), run on every chip of a slice launch:
// their time is the links' and the chips', as the simulator models them, not a formula. Gathers
// and reductions go axis by axis, each with the algorithm its shape allows (the JAX scaling book's):
//   ring (a wrapped axis of more than two chips): every chip sends both ways round, each piece
//     travelling at most half way, the one opposite split in halves, so each link direction carries
//     (n - 1) / 2 pieces of the axis;
//   line (no wraparound): pieces travel to both ends, so the busiest link carries n - 1 of them.
// Both forward a piece a step after receiving it, so a step costs a piece over one link plus a hop.
#pragma once

#include "isa/program.h"
#include "kernels/generators/slice_shape.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// An in-place all-gather: on entry chip r holds its chunk at byte offset r * chunk_bytes of `out`;
// on exit every chip holds every chip's chunk there. Axes are gathered last first, so each step
// moves whole contiguous blocks of chunks. Kernel arguments: `out` (chips * chunk_bytes), then
// chunk_bytes (a scalar: one program serves every size). Throws KernelError for a shape that is
// not one to three axes of at least one chip.
isa::Program make_all_gather(const SliceShape& slice, const sim::ChipConfig& chip);

// A sum reduce-scatter of f32: on entry every chip holds a whole array of chips * chunk_bytes in
// `data`; on exit chip r's chunk r of `data` holds the sum over chips of their chunk r (the rest
// of `data` holds partial sums). Axes are reduced first to last, each shrinking the data by its
// size (the reverse of the all-gather). A piece is added to what arrived for it (through VMEM)
// and sent on, pieces at a time, so the adds of one piece overlap the transfer of the one before.
// Kernel arguments: `data`, then `from_previous` and `from_next` (scratch the size of `data`,
// where pieces from the neighbours land), then chunk_bytes (a scalar, a multiple of 8 KiB: whole
// vreg tiles in halves of a chunk; the kernel traps otherwise).
isa::Program make_reduce_scatter(const SliceShape& slice, const sim::ChipConfig& chip);

// A sum all-reduce of f32: the reduce-scatter, then the all-gather of its chunks; the same
// arguments, and on exit every chip's `data` holds the whole sum.
isa::Program make_all_reduce(const SliceShape& slice, const sim::ChipConfig& chip);

// A broadcast from chip 0: on exit every chip's `data` holds chip 0's. Kernel arguments: `data`,
// then its bytes (a scalar). Chip 0 is the root: a broadcast from another chip takes the same time
// on a ring and, at most, the same on a line.
isa::Program make_broadcast(const SliceShape& slice, const sim::ChipConfig& chip);

class AsmWriter;
// The all-gather's code over `out` into a program being written (the all-reduce follows its
// reduce-scatter with it): registers hold this chip's index, `out` and the chunk bytes; `sent`
// counts the sends it issues, to drain before the program ends.
void emit_all_gather(AsmWriter& w, const SliceShape& slice, int rank, int out, int chunk, int sent);

// An all-to-all of equal chunks: chip r sends chunk j of `input` to chunk r of chip j's `output`,
// each straight to its destination over the links' routes (not axis by axis). Kernel arguments:
// `input`, `output` (chips * chunk_bytes each), then chunk_bytes (a scalar).
isa::Program make_all_to_all(const SliceShape& slice, const sim::ChipConfig& chip);

// A send from one chip to another (torch.distributed's send and recv, and a copy between the chips
// of one process): chip `src` copies `data` into chip `dst`'s `data` with one remote DMA, routed
// through the torus; the other chips do nothing. Kernel arguments: `data`, then its bytes, `src`
// and `dst` (scalars: one program serves every pair).
isa::Program make_send(const SliceShape& slice, const sim::ChipConfig& chip);

// A scatter from chip `root`: the root sends chunk j of `data` to chunk j of chip j's `data`,
// each straight along its route, nearest chips first on alternating sides (as the all-to-all
// does). Kernel arguments: `data` (chips * chunk_bytes), then chunk_bytes and `root` (scalars).
isa::Program make_scatter(const SliceShape& slice, const sim::ChipConfig& chip);

// A gather to chip `root`, the scatter reversed: chip j sends its chunk j of `data` to chunk j of
// the root's. The same arguments.
isa::Program make_gather(const SliceShape& slice, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
