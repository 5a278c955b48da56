// Random numbers on the chip: Philox4x32-10 (Salmon et al., SC'11), a counter-based generator,
// so element i of a call is a pure function of (key, i): a seed gives the same tensor on any chip
// and in any fusion, and no generator state lives on the device. The key is a kernel input (a
// 2-word buffer), so one program serves every call.
#pragma once

#include <array>
#include <cstdint>

#include "isa/program.h"
#include "kernels/codegen/dtype.h"
#include "sim/chip_config.h"

namespace vtpu::kernels {

enum class RandomKind : uint8_t {
  Uniform,  // a + (b - a) * u, u in [0, 1) on a 2^-24 grid (24 random bits, exact in f32)
  Normal,   // a + b * z, z standard normal by Box-Muller from the first two Philox words
};

struct RandomSpec {
  RandomKind kind = RandomKind::Uniform;
  double a = 0, b = 1;
  DType out = DType::F32;  // f32 or bf16
};

// Kernel arguments: the output, the key (2 x int32), then the element count (a scalar).
// Element i uses counter (i, 0, 0, 0).
isa::Program make_random(const RandomSpec& spec, const sim::ChipConfig& chip);

// The reference generator, for tests and documentation: Philox4x32-10 of (counter, key).
std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key);

}  // namespace vtpu::kernels
