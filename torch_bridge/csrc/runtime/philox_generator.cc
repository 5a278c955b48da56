#include "torch_bridge/csrc/runtime/philox_generator.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>

namespace vtpu::bridge {
namespace {

constexpr int64_t kStateBytes = 16;  // seed, then offset: torch's _PhiloxState layout

// splitmix64's finaliser: every input bit moves every output bit, so neighbouring offsets (and
// seeds) give unrelated keys.
uint64_t mix(uint64_t x) {
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

PhiloxGenerator::PhiloxGenerator(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      seed_(seed) {}

void PhiloxGenerator::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t PhiloxGenerator::seed() {
  const uint64_t s = c10::detail::getNonDeterministicRandom();
  set_current_seed(s);
  return s;
}

void PhiloxGenerator::set_offset(uint64_t offset) {
  TORCH_CHECK(offset % 4 == 0, "vtpu: a tpu generator's offset must be a multiple of 4, got ", offset);
  offset_ = offset;
}

void PhiloxGenerator::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK(new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>() && new_state.numel() == kStateBytes,
              "vtpu: a tpu generator's state is ", kStateBytes, " bytes (uint8: seed, then offset), got ",
              new_state.numel(), " elements of ", new_state.dtype().name());
  TORCH_CHECK(new_state.device().is_cpu(), "vtpu: a generator state must be a CPU tensor");
  uint64_t seed, offset;
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::memcpy(&seed, bytes, 8);
  std::memcpy(&offset, bytes + 8, 8);
  seed_ = seed;
  set_offset(offset);
}

c10::intrusive_ptr<c10::TensorImpl> PhiloxGenerator::get_state() const {
  at::Tensor state = at::empty({kStateBytes}, at::TensorOptions().dtype(at::kByte));
  std::memcpy(state.data_ptr<uint8_t>(), &seed_, 8);
  std::memcpy(state.data_ptr<uint8_t>() + 8, &offset_, 8);
  return state.unsafeReleaseIntrusivePtr();
}

uint64_t PhiloxGenerator::next_key(uint64_t count) {
  const uint64_t key = mix(seed_ ^ mix(offset_ + 0x9e3779b97f4a7c15ULL));
  offset_ += (count + 3) / 4 * 4;
  return key;
}

PhiloxGenerator* PhiloxGenerator::clone_impl() const {
  auto* copy = new PhiloxGenerator(device().index(), seed_);
  copy->offset_ = offset_;
  return copy;
}

at::Generator make_philox_generator(c10::DeviceIndex device, uint64_t seed) {
  return at::make_generator<PhiloxGenerator>(device, seed);
}

at::Generator host_generator_for(at::Generator gen, uint64_t count) {
  uint64_t key;
  {
    std::lock_guard lock(gen.mutex());
    key = at::check_generator<PhiloxGenerator>(gen)->next_key(count);
  }
  return at::detail::createCPUGenerator(key);
}

}  // namespace vtpu::bridge
