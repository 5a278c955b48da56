#include <doctest/doctest.h>

#include "isa/assembler.h"
#include "isa/verifier.h"

using namespace vtpu::isa;

namespace {

const TargetLimits kLimits{1 << 20, 4, 128, 64, 4, 32};

std::string issues_of(const std::string& source, const TargetLimits& limits = kLimits) {
  std::string all;
  for (const auto& issue : verify(assemble(source), limits)) all += issue.message + "\n";
  return all;
}

}  // namespace

TEST_SUITE("isa") {
  TEST_CASE("a correct program verifies clean") {
    CHECK(issues_of("  sli s1, 0\n  vld v1, m0, s1, 0, 512\n  vst v1, m0, s1, 4096, 512\n  halt\n").empty());
  }

  TEST_CASE("static VMEM bounds of known addresses") {
    CHECK(issues_of("  sli s1, 1048576 - 1024\n  vld v1, m0, s1, 0, 512\n").find("outside VMEM") != std::string::npos);
    CHECK(issues_of("  sli s1, 2\n  vld v1, m0, s1, 0, 512\n").find("not aligned to 4 bytes") != std::string::npos);
    // After a label the value is unknown: no false positive.
    CHECK(issues_of("  sli s1, 1048576\nL:\n  vld v1, m0, s1, 0, 512\n  jmp L\n").empty());
    CHECK(issues_of("  sli s1, 1048000\n  mxu.lw mxu0, s1, 256\n").find("outside VMEM") != std::string::npos);
  }

  TEST_CASE("register groups, unit indices, slots, arguments and targets") {
    CHECK(issues_of("  vtrans v20, v0\n").find("runs past v31") != std::string::npos);
    CHECK(issues_of("  mxu.mm mxu5, v0, 0\n").find("mxu5 does not exist") != std::string::npos);
    CHECK(issues_of("  mxu.pop v0, mxu0, 64\n").find("slot 64 out of range") != std::string::npos);
    CHECK(issues_of("  sem.wait sem31, 1\n", {1 << 20, 4, 128, 64, 4, 8}).find("sem31 does not exist") != std::string::npos);
    CHECK(issues_of("  sarg s1, 0\n").find("argument #0 not declared") != std::string::npos);
    CHECK(issues_of("  sli s2, 7\n  sargw 3, s2\n  sarg s1, 3\n").empty());  // a scratch slot sargw writes
    CHECK(issues_of("  sargw 3, s2\n  sarg s1, 4\n").find("never written by sargw") != std::string::npos);
    CHECK(issues_of("  jmp 7\n").find("past the end") != std::string::npos);
    CHECK(issues_of("  vcmp.lt m0, v1, v2\n").find("m0 is the all-true mask") != std::string::npos);
    CHECK(issues_of("  mxu.mm mxu0, v31, 0\n", {1 << 20, 4, 256, 64, 4, 32}).find("runs past v31") != std::string::npos);
    CHECK(issues_of("  vbcast.lane v1, v2, 200\n").find("lane index") != std::string::npos);
  }

  TEST_CASE("data segments must fit VMEM") {
    CHECK(issues_of(".data 1048572\n.f32 1.0, 2.0\n").find("outside VMEM") != std::string::npos);
  }

  TEST_CASE("verify_or_throw lists every issue") {
    try {
      verify_or_throw(assemble("  jmp 9\n  mxu.mm mxu7, v0, 0\n"), kLimits);
      FAIL("expected VerifyError");
    } catch (const VerifyError& e) {
      CHECK(e.issues().size() == 2);
      CHECK(std::string(e.what()).find("instruction 1") != std::string::npos);
    }
  }
}
