// The tpu device's random number generator: a Philox-style (seed, offset) pair, as CUDA's is.
// Every random op takes one 64-bit key for the chip's Philox kernels (csrc/aten/random.cc), mixed
// from the seed and the current offset, and advances the offset by the count of numbers it draws.
// Its state is the 16 bytes torch code expects of an accelerator's generator (seed, then offset):
// DTensor's OffsetBasedRNGTracker moves the offset so shards of one random op draw disjoint
// numbers, and checkpointing saves and restores it.
#pragma once

#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

#include <cstdint>

namespace vtpu::bridge {

class PhiloxGenerator : public c10::GeneratorImpl {
 public:
  PhiloxGenerator(c10::DeviceIndex device, uint64_t seed);

  void set_current_seed(uint64_t seed) override;  // and the offset back to 0, as CUDA's does
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;  // a fresh nondeterministic seed
  void set_offset(uint64_t offset) override;
  uint64_t get_offset() const override { return offset_; }
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

  // The key of an op that draws `count` numbers; the offset then moves past them (rounded up to
  // a multiple of 4: one Philox block gives four numbers, and CUDA's offsets count so too).
  // Callers hold the generator's mutex.
  uint64_t next_key(uint64_t count);

 private:
  PhiloxGenerator* clone_impl() const override;

  uint64_t seed_;
  uint64_t offset_ = 0;
};

// A new generator of tpu:`device` (torch.Generator(device="tpu")), at torch's default seed.
at::Generator make_philox_generator(c10::DeviceIndex device, uint64_t seed);

// A CPU generator keyed by `gen`'s next key for `count` numbers: for what is drawn on the host
// (dtypes and views the chip's kernels do not fill), so those draws follow the same state.
at::Generator host_generator_for(at::Generator gen, uint64_t count);

}  // namespace vtpu::bridge
