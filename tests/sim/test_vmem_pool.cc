// VMEM is reused from launch to launch on a SimDevice, and every launch still starts with it all
// zero: what one kernel stored (by vst, by DMA, or as program data) is gone for the next.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "isa/assembler.h"
#include "sim/sim_device.h"

using namespace vtpu;

namespace {

// Reads 4096 bytes of VMEM at `at` (and a word far up, through sld) into the buffer argument.
const char* kReader = R"(
.arg out buffer
  sarg s1, out
  sli s2, AT
  sli s3, 1
  sli s4, 4096
  dma.v2h dq0, sem0, s2, s1, s3, s4, s4, s4
  sem.wait sem0, 1
  sli s5, 4194304
  sld s6, s5, 0
  sli s7, 0
  vbcast v1, s6
  vst v1, m0, s7, 0, 512
  saddi s1, s1, 4096
  dma.v2h dq0, sem0, s7, s1, s3, s4, s4, s4
  sem.wait sem0, 1
  halt
)";

std::vector<float> read_back(sim::SimDevice& device, sim::HbmAddress out, uint64_t bytes) {
  std::vector<float> host(bytes / 4);
  device.copy_to_host({reinterpret_cast<uint8_t*>(host.data()), bytes}, out);
  return host;
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("each launch starts with zeroed VMEM although the device reuses it") {
    sim::SimDevice device(sim::load_chip("v5e"));
    const uint64_t bytes = 8192;
    const auto out = device.allocate(bytes);
    // vst at 65536, across the 4 KiB pages from 7936 and a scalar-visible word at 4 MiB, a DMA into
    // 131072, program data at 200704 (the pool zeroes the pages written, not all below the last)
    const isa::Program writer = isa::assemble(R"(
.arg src buffer
  sli s1, 7.0f
  vbcast v1, s1
  sli s2, 65536
  vst v1, m0, s2, 0, 512
  sli s2, 4194304
  vst v1, m0, s2, 0, 512
  sli s2, 7936
  vst v1, m0, s2, 0, 512
  sarg s3, src
  sli s4, 131072
  sli s5, 1
  sli s6, 4096
  dma.h2v dq0, sem0, s4, s3, s5, s6, s6, s6
  sem.wait sem0, 1
  halt
.data 200704
.f32 5.0, 5.0, 5.0, 5.0
)");
    const auto src = device.allocate(4096);
    const std::vector<float> nines(1024, 9.0f);
    device.copy_to_device(src, {reinterpret_cast<const uint8_t*>(nines.data()), 4096});
    for (int64_t at : {65536, 8192, 131072, 200704}) {
      CAPTURE(at);
      device.wait(device.launch(writer, std::vector<sim::KernelArg>{sim::KernelArg::buffer(src, 4096)}));
      const isa::Program reader = isa::assemble(kReader, "reader", {{"AT", at}});
      device.wait(device.launch(reader, std::vector<sim::KernelArg>{sim::KernelArg::buffer(out, bytes)}));
      const auto got = read_back(device, out, bytes);
      CHECK(std::all_of(got.begin(), got.end(), [](float x) { return x == 0.0f; }));
    }
    // and the reader sees the writer's values when both are one program (the check can fail)
    const isa::Program both = isa::assemble(std::string(R"(
.arg out buffer
  sli s1, 7.0f
  vbcast v1, s1
  sli s2, 65536
  vst v1, m0, s2, 0, 512
)") + std::string(kReader).substr(std::string(kReader).find("  sarg")), "both", {{"AT", 65536}});
    device.wait(device.launch(both, std::vector<sim::KernelArg>{sim::KernelArg::buffer(out, bytes)}));
    const auto got = read_back(device, out, bytes);
    CHECK(got[0] == 7.0f);
  }
}
