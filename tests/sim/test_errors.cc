// Every runtime error the simulator reports, triggered on purpose, with the message checked.
#include <doctest/doctest.h>

#include "sim/sim_error.h"
#include "support/run_program.h"

using namespace vtpu;
using testing::Arg;
using testing::HostBuffer;

namespace {

void check_sim_error(const std::string& src, std::vector<Arg> args, sim::SimErrorKind kind,
                     const std::vector<std::string>& fragments, sim::SimOptions options = {}) {
  try {
    testing::run_program(src, std::move(args), "v5e", options);
    FAIL("expected a SimError");
  } catch (const sim::SimError& e) {
    CHECK(static_cast<int>(e.kind()) == static_cast<int>(kind));
    for (const auto& f : fragments) CHECK_MESSAGE(std::string(e.what()).find(f) != std::string::npos, e.what());
  }
}

}  // namespace

TEST_SUITE("sim") {
  TEST_CASE("out-of-bounds VMEM access names the instruction and address") {
    // The jmp makes L a block start, so the verifier cannot know s1 and the error comes at run time.
    check_sim_error("  sli s1, 134217728 - 2048\n  jmp L\nL:\n  vld v1, m0, s1, 0, 512\n  halt\n", {},
                    sim::SimErrorKind::OutOfBounds, {"instruction 2", "vld v1, m0, s1, 0, 512", "outside VMEM"});
  }

  TEST_CASE("an error after a mark names the last mark") {
    check_sim_error("  sli s2, 6\n  mark s2\n  saddi s2, s2, 1\n  mark s2\n  sli s1, 134217728 - 2048\n  jmp L\nL:\n"
                    "  vld v1, m0, s1, 0, 512\n  halt\n",
                    {}, sim::SimErrorKind::OutOfBounds, {"instruction 6", "(after mark 7)", "outside VMEM"});
  }

  TEST_CASE("out-of-bounds HBM access names the argument") {
    check_sim_error(R"(
.arg x buffer
  sarg s1, x
  sli s2, 0
  sli s3, 1
  sli s4, 4100
  dma.h2v dq0, sem0, s2, s1, s3, s4, s4, s4
)", {Arg::buf(HostBuffer::of(std::vector<float>(1024)))}, sim::SimErrorKind::OutOfBounds,
                    {"instruction 4", "dma.h2v", "outside argument 'x'", "of 4096 bytes"});
  }

  TEST_CASE("a semaphore wait that can never be satisfied is a deadlock naming the waiter") {
    check_sim_error(R"(
.arg x buffer
  sarg s1, x
  sli s2, 0
  sli s3, 1
  sli s4, 64
  dma.h2v dq0, sem0, s2, s1, s3, s4, s4, s4
  sem.wait sem0, 2
)", {Arg::buf(HostBuffer::of(std::vector<float>(16)))}, sim::SimErrorKind::Deadlock,
                    {"instruction 5", "sem.wait sem0, 2", "only 1 can ever arrive", "deadlock"});
    check_sim_error("  sem.signal sem3, 1\n  sem.wait sem3, 1\n  sem.wait sem3, 1\n", {}, sim::SimErrorKind::Deadlock,
                    {"instruction 2"});
  }

  TEST_CASE("sld checks alignment and bounds like a vector load") {
    check_sim_error("  sli s1, 6\n  jmp L\nL:\n  sld s2, s1, 0\n  halt\n", {}, sim::SimErrorKind::Misaligned,
                    {"instruction 2", "not aligned to 4 bytes"});
    check_sim_error("  sli s1, 134217728\n  jmp L\nL:\n  sld s2, s1, 0\n  halt\n", {}, sim::SimErrorKind::OutOfBounds,
                    {"instruction 2", "outside VMEM"});
  }

  TEST_CASE("trap fails the launch with its check number; not reached, it does nothing") {
    check_sim_error(".arg n scalar\n  sarg s1, n\n  sli s2, 4\n  bge s2, s1, ok\n  trap 7\nok:\n  halt\n", {Arg::val(5)},
                    sim::SimErrorKind::Trap, {"instruction 3", "trap #7", "refused its launch arguments"});
    CHECK_NOTHROW(testing::run_program(".arg n scalar\n  sarg s1, n\n  sli s2, 4\n  bge s2, s1, ok\n  trap 7\nok:\n  halt\n",
                                       {Arg::val(4)}));
  }

  TEST_CASE("reading uninitialised VMEM is reported when the check is on") {
    sim::SimOptions checked;
    checked.check_uninitialized = true;
    check_sim_error("  sli s1, 4096\n  vld v1, m0, s1, 0, 512\n", {}, sim::SimErrorKind::Uninitialized,
                    {"instruction 1", "uninitialised VMEM at address 4096"}, checked);
    // Without the check the same program runs (VMEM reads as zero).
    CHECK_NOTHROW(testing::run_program("  sli s1, 4096\n  vld v1, m0, s1, 0, 512\n", {}));
  }

  TEST_CASE("touching a DMA's VMEM before waiting for it is a race") {
    check_sim_error(R"(
.arg x buffer
  sarg s1, x
  sli s2, 0
  sli s3, 1
  sli s4, 4096
  dma.h2v dq0, sem0, s2, s1, s3, s4, s4, s4
  vld v1, m0, s2, 0, 512
)", {Arg::buf(HostBuffer::of(std::vector<float>(1024)))}, sim::SimErrorKind::Race,
                    {"instruction 5", "races the DMA issued by instruction 4"});
  }

  TEST_CASE("scalar division by zero") {
    check_sim_error("  sli s1, 5\n  sdiv s2, s1, s0\n", {}, sim::SimErrorKind::Arithmetic,
                    {"instruction 1", "division by zero"});
  }

  TEST_CASE("launch errors: argument count/kind and verification") {
    check_sim_error(".arg x buffer\n  halt\n", {}, sim::SimErrorKind::BadLaunch, {"takes 1 arguments, launch passed 0"});
    check_sim_error(".arg x buffer\n  halt\n", {Arg::val(3)}, sim::SimErrorKind::BadLaunch, {"expects a buffer"});
    check_sim_error("  mxu.mm mxu6, v0, 0\n", {}, sim::SimErrorKind::BadLaunch, {"mxu6 does not exist (chip has 4)"});
    // code written for v6e's 256-wide MXUs would read half its operands on v5e
    check_sim_error(".name wide\n.mxu_dim 256\n  halt\n", {}, sim::SimErrorKind::BadLaunch,
                    {"'wide' was generated for 256-wide MXUs; v5e's are 128 wide"});
    CHECK_NOTHROW(testing::run_program(".mxu_dim 128\n  halt\n", {}, "v5e"));
    CHECK_NOTHROW(testing::run_program(".mxu_dim 256\n  halt\n", {}, "v6e"));
  }

  TEST_CASE("a runaway loop hits the instruction budget") {
    sim::SimOptions small;
    small.max_instructions = 1000;
    check_sim_error("L:\n  jmp L\n", {}, sim::SimErrorKind::StepLimit, {"budget of 1000", "jmp"}, small);
  }

  TEST_CASE("HBM exhaustion reports requested, free and total bytes; the device stays usable") {
    sim::SimDevice device(sim::load_chip("v5e"));
    const uint64_t total = device.memory_stats().capacity_bytes;
    const auto a = device.allocate(total / 2);
    try {
      device.allocate(total);
      FAIL("expected OutOfMemoryError");
    } catch (const sim::OutOfMemoryError& e) {
      CHECK(e.requested_bytes() == total);
      CHECK(e.total_bytes() == total);
      CHECK(e.free_bytes() == total - total / 2);
      CHECK(std::string(e.what()).find("HBM out of memory") != std::string::npos);
    }
    device.free(a);
    CHECK(device.memory_stats().allocated_bytes == 0);
    CHECK_NOTHROW(device.free(device.allocate(total)));
    CHECK_THROWS_WITH_AS(device.free(12345), doctest::Contains("not an allocation"), sim::SimError);
  }

  TEST_CASE("the allocator reuses freed space first-fit") {
    sim::Hbm hbm(1 << 20);
    const auto a = hbm.allocate(1000);
    const auto b = hbm.allocate(1000);
    hbm.free(a);
    CHECK(hbm.allocate(512) == a);
    CHECK(hbm.allocate(4096) > b);
    CHECK(hbm.peak_allocated_bytes() >= hbm.allocated_bytes());
  }
}
