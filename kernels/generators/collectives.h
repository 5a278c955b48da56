// Collectives as kernels over chip-to-chip DMA (dma.remote), run on every chip of a slice launch:
// their time is the links' and the chips', as the simulator models them, not a formula. Each axis
// of the torus is done in turn with the algorithm its shape allows (the JAX scaling book's):
//   ring (a wrapped axis of more than two chips): every chip sends both ways round, each piece
//     travelling at most half way, the one opposite split in halves, so each link direction carries
//     (n - 1) / 2 pieces of the axis;
//   line (no wraparound): pieces travel to both ends, so the busiest link carries n - 1 of them.
// Both forward a piece a step after receiving it, so a step costs a piece over one link plus a hop.
#pragma once

#include <vector>

#include "isa/program.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// The slice a collective runs over: chips per axis (ranks row-major) and which axes wrap around
// (from sim::Slice, which decides it per generation).
struct SliceShape {
  std::vector<int> axes;
  std::vector<bool> wraps;
};

// An in-place all-gather: on entry chip r holds its chunk at byte offset r * chunk_bytes of `out`;
// on exit every chip holds every chip's chunk there. Axes are gathered last first, so each step
// moves whole contiguous blocks of chunks. Kernel arguments: `out` (chips * chunk_bytes), then
// chunk_bytes (a scalar: one program serves every size). Throws KernelError for a shape that is
// not one to three axes of at least one chip.
isa::Program make_all_gather(const SliceShape& slice, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
