// A Pallas-style kernel (torch_bridge/python/vtpu/pallas): a body over VMEM blocks run at every
// point of a grid, each array's block picked by an affine map of the grid indices, inside the
// double-buffered HBM <-> VMEM pipeline Pallas emits around a kernel. The Python front end traces
// the user's body once into statements (block_kernel_spec.h); this generator lowers them with the
// shared codegen (Expr / TileCodegen for elementwise math, MXU weight loads and pushes for dots).
#pragma once

#include <string>

#include "kernels/generators/block_kernel_spec.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

// The kernel's assembly text (what `vtpu.pallas` hands to the device and shows to the user).
// Throws KernelError naming the kernel for what the chip cannot hold or run.
std::string make_block_kernel_source(const BlockKernelSpec& spec, const sim::ChipConfig& chip);

}  // namespace vtpu::kernels
