// Matmuls whose K outgrows VMEM. The matmul generator keeps a block's whole K strip of A and B
// in VMEM, so an LM head's input gradient (K = a 50257-token vocabulary), a convolution's weight
// gradient (K = images x positions, 65536 and more) or its input gradient (K = output channels x
// taps) can need more than the chip has even in its smallest blocks. Such a matmul runs as K
// slices whose f32 products are summed, rounded once. The bridge's mm/bmm/addmm and the
// convolutions all build their matmuls through here.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/graph/graph.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// The longest K with which g's matmul a @ b (a [..., M, K], or [..., K, M] with transpose_a; b
// [..., K, N], or [..., N, K] with transpose_b) fits one launch on `chip`: K itself when it does, 0
// when not one MXU-deep slice does.
int64_t one_launch_k(const Graph& g, int a, int b, bool transpose_b, int passes, const sim::ChipConfig& chip,
                     bool transpose_a = false);

// a @ b as Graph::matmul builds it (same arguments), or, when K is longer than one launch takes on
// `chip` (null: never split), as balanced K slices (strided copies of a and b) whose f32 products
// are summed and cast once to the matmul's dtype (kept f32 with f32_result).
int matmul_with_long_k(Graph& g, int a, int b, bool transpose_b, int passes, const std::string& label,
                       const sim::ChipConfig* chip, bool transpose_a = false, bool f32_result = false);

}  // namespace vtpu::kernels
