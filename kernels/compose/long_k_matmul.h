// Matmuls whose K outgrows VMEM. The matmul generator keeps a block's whole K strip of A and B
// in VMEM, so an LM head's input gradient (K = a 50257-token vocabulary), a convolution's weight
// gradient (K = images x positions, 65536 and more), its input gradient (K = output channels x
// taps) or a wide MLP's down projection can need more than the chip has in its largest blocks;
// smaller blocks reload weights more often than the MXUs hide (v6e, 2048 x 8192 x K bf16 in one
// launch: 97% of peak at K = 8192, 49% at 28672, 6% at 65536). Such a matmul runs as K slices,
// each in full-size blocks, whose f32 products are summed, rounded once. The bridge's mm/bmm/addmm and the
// convolutions all build their matmuls through here.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/graph/graph.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// Elements [k0, k0 + len) of the last dim (`along_last`) or of the dim before it, of a dense node:
// a matmul operand's K slice.
int k_slice(Graph& g, int x, bool along_last, int64_t k0, int64_t len, const std::string& label);

// The longest K with which g's matmul a @ b (a [..., M, K], or [..., K, M] with transpose_a; b
// [..., K, N], or [..., N, K] with transpose_b) fits one launch in the chip's largest blocks: K
// itself when it does, 0 when not one MXU-deep slice does.
int64_t one_launch_k(const Graph& g, int a, int b, bool transpose_b, int passes, const sim::ChipConfig& chip,
                     bool transpose_a = false);

// a @ b as Graph::matmul builds it (same arguments), or, when K is longer than one launch takes on
// `chip` (null: never split), as balanced K slices (strided copies of a and b) whose f32 products
// are summed and cast once to the matmul's dtype (kept f32 with f32_result).
int matmul_with_long_k(Graph& g, int a, int b, bool transpose_b, int passes, const std::string& label,
                       const sim::ChipConfig* chip, bool transpose_a = false, bool f32_result = false);

}  // namespace vtpu::kernels
