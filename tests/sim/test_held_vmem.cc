// VMEM held across launches: a buffer from Device::allocate_held keeps its bytes from one launch
// to the next, kernels reach it by DMA like HBM, and such a DMA is priced as a local copy (VMEM
// bandwidth plus the local latency), not an HBM round trip.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "isa/assembler.h"
#include "sim/sim_device.h"

using namespace vtpu;

namespace {

// Copies `bytes` (one DMA row) from src to dst through VMEM, waiting for each DMA.
const char* kCopy = R"(
.arg src buffer
.arg dst buffer
  sarg s1, src
  sarg s2, dst
  sli s3, 0
  sli s4, 1
  sli s5, BYTES
  dma.h2v dq0, sem0, s3, s1, s4, s5, s5, s5
  sem.wait sem0, 1
  dma.v2h dq0, sem0, s3, s2, s4, s5, s5, s5
  sem.wait sem0, 1
  halt
)";

std::vector<float> ramp(uint64_t bytes) {
  std::vector<float> v(bytes / 4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 3.f;
  return v;
}

uint64_t copy_cycles(sim::SimDevice& device, uint64_t bytes, sim::HbmAddress src, sim::HbmAddress dst,
                     sim::LaunchResult* result = nullptr) {
  const isa::Program copy = isa::assemble(kCopy, "copy", {{"BYTES", int64_t(bytes)}});
  const std::vector<sim::KernelArg> args{sim::KernelArg::buffer(src, bytes), sim::KernelArg::buffer(dst, bytes)};
  sim::LaunchResult r = device.wait(device.launch(copy, args));
  if (result) *result = r;
  return r.cycles;
}

// DMA 1 (`first`) and DMA 2 (`second`) both signal sem0, on two queues; after one wait the
// kernel reads DMA 1's bytes, then writes them to `dst`. Were DMA 2 to land first, that read
// would race DMA 1 (a SimError).
sim::LaunchResult first_lands_first(sim::SimDevice& device, sim::HbmAddress first, uint64_t first_bytes,
                                    sim::HbmAddress second, uint64_t second_bytes, sim::HbmAddress dst) {
  const isa::Program program = isa::assemble(R"(
.arg first buffer
.arg second buffer
.arg dst buffer
  sarg s1, first
  sarg s2, second
  sarg s3, dst
  sli s4, 0
  sli s5, FIRST
  sli s6, 1
  sli s7, SECOND
  dma.h2v dq0, sem0, s4, s1, s6, s5, s5, s5
  dma.h2v dq1, sem0, s5, s2, s6, s7, s7, s7
  sem.wait sem0, 1
  vld v1, m0, s4, 0, 512
  sem.wait sem0, 1
  dma.v2h dq0, sem1, s4, s3, s6, s5, s5, s5
  sem.wait sem1, 1
  halt
)", "first_lands_first", {{"FIRST", int64_t(first_bytes)}, {"SECOND", int64_t(second_bytes)}});
  const std::vector<sim::KernelArg> args{sim::KernelArg::buffer(first, first_bytes),
                                         sim::KernelArg::buffer(second, second_bytes),
                                         sim::KernelArg::buffer(dst, first_bytes)};
  return device.wait(device.launch(program, args));
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("held VMEM keeps its bytes across launches, and its DMAs skip the HBM round trip") {
    const sim::ChipConfig chip = sim::load_chip("v5e");
    sim::SimDevice device(chip);
    const uint64_t bytes = 64 * 1024;
    const auto data = ramp(bytes);
    const auto src = device.allocate(bytes);
    const auto dst = device.allocate(bytes);
    device.copy_to_device(src, {reinterpret_cast<const uint8_t*>(data.data()), bytes});
    const auto held = device.allocate_held(bytes);
    REQUIRE(held.has_value());
    CHECK_FALSE(*held == src);

    // HBM -> held in one launch, held -> HBM in the next: the bytes survive in between.
    sim::LaunchResult into_held, out_of_held;
    const uint64_t hbm_to_held = copy_cycles(device, bytes, src, *held, &into_held);
    copy_cycles(device, bytes, *held, dst, &out_of_held);
    std::vector<float> got(bytes / 4);
    device.copy_to_host({reinterpret_cast<uint8_t*>(got.data()), bytes}, dst);
    CHECK(got == data);
    CHECK(into_held.summary.hbm_read_bytes == bytes);
    CHECK(into_held.summary.hbm_write_bytes == 0);
    CHECK(into_held.summary.held_vmem_bytes == bytes);
    CHECK(out_of_held.summary.hbm_write_bytes == bytes);

    // Closed form: each DMA lands after its transfer plus its latency (they run one after the
    // other here). HBM -> HBM pays two HBM trips, HBM -> held one HBM and one local trip,
    // held -> held two local ones.
    const double hbm_trip = double(bytes) / chip.hbm_bytes_per_cycle() + chip.hbm_latency_cycles();
    const double local_trip = double(bytes) / chip.local_dma_bytes_per_cycle() + chip.local_dma_latency_cycles;
    const auto held2 = device.allocate_held(bytes);
    REQUIRE(held2.has_value());
    const uint64_t hbm_to_hbm = copy_cycles(device, bytes, src, dst);
    const uint64_t held_to_held = copy_cycles(device, bytes, *held, *held2);
    MESSAGE("64 KiB copy: HBM->HBM ", hbm_to_hbm, " cycles, HBM->held ", hbm_to_held, ", held->held ", held_to_held);
    CHECK(double(hbm_to_hbm) >= 2 * hbm_trip);
    CHECK(double(hbm_to_held) >= hbm_trip + local_trip);
    CHECK(double(held_to_held) >= 2 * local_trip);
    CHECK(double(held_to_held) <= 2 * local_trip + 64);  // a few cycles of issue and wait
    CHECK(held_to_held * 10 < hbm_to_hbm);
    device.free(*held);
    device.free(*held2);
  }

  TEST_CASE("DMAs land in issue order across HBM and held VMEM, as kernels sharing a semaphore expect") {
    const sim::ChipConfig chip = sim::load_chip("v5e");
    sim::SimDevice device(chip);
    const uint64_t bytes = 64 * 1024;
    const auto data = ramp(bytes);
    const auto src = device.allocate(bytes), dst = device.allocate(bytes);
    device.copy_to_device(src, {reinterpret_cast<const uint8_t*>(data.data()), bytes});

    // A slow HBM DMA, then a fast held-VMEM one.
    const auto held = device.allocate_held(bytes);
    REQUIRE(held.has_value());
    const sim::LaunchResult r = first_lands_first(device, src, bytes, *held, bytes, dst);
    std::vector<float> got(bytes / 4);
    device.copy_to_host({reinterpret_cast<uint8_t*>(got.data()), bytes}, dst);
    CHECK(got == data);
    CHECK(double(r.cycles) >= 2 * (double(bytes) / chip.hbm_bytes_per_cycle() + chip.hbm_latency_cycles()));
    device.free(*held);

    // And the other way round: a long held-VMEM DMA, then a small HBM one.
    const uint64_t big = 8 << 20;
    const auto big_held = device.allocate_held(big);
    const auto big_dst = device.allocate(big);
    REQUIRE(big_held.has_value());
    CHECK_NOTHROW(first_lands_first(device, *big_held, big, src, 512, big_dst));
    device.free(*big_held);
    device.free(big_dst);
  }

  TEST_CASE("held VMEM is vmem_held_bytes: past it allocate_held says no, and kernels tile in the rest") {
    const sim::ChipConfig chip = sim::load_chip("v5e");
    CHECK(chip.kernel_vmem_bytes() + chip.vmem_held_bytes == chip.vmem_bytes);
    sim::SimDevice device(chip);
    const auto all = device.allocate_held(chip.vmem_held_bytes);
    REQUIRE(all.has_value());
    CHECK_FALSE(device.allocate_held(512).has_value());
    CHECK(device.memory_stats().allocated_bytes == 0);  // held VMEM is not HBM
    device.free(*all);
    CHECK(device.allocate_held(512).has_value());
    // A kernel's own VMEM ends where the held part begins.
    const isa::Program past = isa::assemble(R"(
  sli s1, 1.0f
  vbcast v1, s1
  sli s2, END
  vst v1, m0, s2, 0, 512
  halt
)", "past", {{"END", int64_t(chip.kernel_vmem_bytes())}});
    CHECK_THROWS_WITH(device.wait(device.launch(past, {})), doctest::Contains("outside VMEM"));
  }

  TEST_CASE("the combined peak counts HBM and held VMEM allocated at the same moment") {
    sim::SimDevice device(sim::load_chip("v5e"));
    const auto a = device.allocate(1024);
    const auto h = device.allocate_held(2048);
    REQUIRE(h.has_value());
    device.free(a);
    const auto b = device.allocate(4096);  // HBM's own peak now, with 2048 held beside it
    device.free(*h);
    const auto c = device.allocate_held(512);
    REQUIRE(c.has_value());
    const sim::MemoryStats m = device.memory_stats();
    CHECK(m.peak_allocated_bytes == 4096);
    CHECK(m.held_peak_bytes == 2048);
    CHECK(m.peak_combined_bytes == 4096 + 2048);
    device.reset_peak_memory();
    CHECK(device.memory_stats().peak_combined_bytes == 4096 + 512);
    device.free(b);
    device.free(*c);
  }

  TEST_CASE("a device without held VMEM says so, and the default costs nothing") {
    sim::NullDevice device(sim::load_chip("v5e"));
    CHECK_FALSE(device.allocate_held(4096).has_value());
  }
}
