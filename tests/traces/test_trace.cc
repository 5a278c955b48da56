#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "isa/assembler.h"
#include "sim/sim_device.h"
#include "traces/trace_writer.h"

using namespace vtpu;

TEST_SUITE("traces") {
  TEST_CASE("recorder merges runs of one instruction kind and never overlaps slices on a track") {
    traces::TraceRecorder r(4);
    const int t = r.add_track("vpu0", "chip");
    r.slice(t, 0, 1, "vadd");
    r.slice(t, 2, 3, "vadd");   // within the merge gap
    r.slice(t, 2, 5, "vmul");   // would overlap: starts when the last one ended
    r.slice(t, 40, 41, "vmul");  // past the gap: a new slice
    r.flush();
    REQUIRE(r.slices().size() == 3);
    CHECK(r.slices()[0].instructions == 2);
    CHECK(r.slices()[0].end_cycle == 3);
    CHECK(r.slices()[1].start_cycle == 3);
    CHECK(r.slices()[2].start_cycle == 40);
  }

  TEST_CASE("a simulated run writes a Perfetto-loadable trace with one track per unit and HBM counters") {
    sim::SimDevice device(sim::load_chip("v5e"));
    traces::TraceRecorder recorder;
    device.set_trace(&recorder);
    const auto program = isa::assemble(R"(
.arg x buffer
  sarg s1, x
  sli s2, 0
  sli s3, 1
  sli s4, 4096
  dma.h2v dq0, sem0, s2, s1, s3, s4, s4, s4
  sem.wait sem0, 1
  vld v1, m0, s2, 0, 512
  vexp v2, v1
  vadd v3, v2, v1
  vst v3, m0, s2, 0, 512
  dma.v2h dq1, sem0, s2, s1, s3, s4, s4, s4
  sem.wait sem0, 1
)");
    const auto x = device.allocate(4096);
    sim::KernelArg args[] = {sim::KernelArg::buffer(x, 4096)};
    const auto result = device.wait(device.launch(program, args));
    const auto doc = traces::chrome_trace_json(recorder, device.chip().clock_hz);
    std::map<int, std::string> thread_names;
    std::map<int, std::vector<std::pair<double, double>>> spans;
    int counters = 0;
    for (const auto& e : doc["traceEvents"]) {
      if (e["ph"] == "M" && e["name"] == "thread_name") thread_names[e["tid"].get<int>()] = e["args"]["name"];
      if (e["ph"] == "X") spans[e["tid"].get<int>()].emplace_back(e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>());
      if (e["ph"] == "C") ++counters;
    }
    std::set<std::string> used;
    for (auto& [tid, list] : spans) {
      used.insert(thread_names.at(tid));
      std::sort(list.begin(), list.end());
      for (size_t i = 1; i < list.size(); ++i) CHECK(list[i].first >= list[i - 1].second - 1e-9);
    }
    for (const char* unit : {"scalar", "vector-load", "vector-store", "transcendental", "dma0", "dma1", "hbm"}) {
      CHECK_MESSAGE(used.count(unit) == 1, unit);
    }
    CHECK(counters >= 4);
    // Summary: bytes and a bound no larger than the simulated time.
    CHECK(result.summary.hbm_read_bytes == 4096);
    CHECK(result.summary.hbm_write_bytes == 4096);
    CHECK(result.summary.roofline_seconds() <= result.summary.seconds());
    const auto j = traces::to_json(result.summary);
    CHECK(j["cycles"].get<uint64_t>() == result.cycles);
    CHECK(traces::render_text(result.summary).find("roofline bound") != std::string::npos);
  }

  TEST_CASE("marks draw their spans on a marks track, back to back, each named by its value") {
    sim::SimDevice device(sim::load_chip("v5e"));
    traces::TraceRecorder recorder;
    device.set_trace(&recorder);
    const auto program = isa::assemble(R"(
  sli s1, 0
  sli s2, 3
step:
  mark s1
  vbcast v1, s1
  vexp v2, v1
  saddi s1, s1, 1
  blt s1, s2, step
)");
    const auto result = device.wait(device.launch(program, {}));
    int marks = -1;
    for (size_t t = 0; t < recorder.tracks().size(); ++t) {
      if (recorder.tracks()[t].name == "marks") marks = static_cast<int>(t);
    }
    REQUIRE(marks >= 0);
    std::vector<traces::Slice> spans;
    for (const auto& s : recorder.slices()) {
      if (s.track == marks) spans.push_back(s);
    }
    REQUIRE(spans.size() == 3);
    for (size_t i = 0; i < spans.size(); ++i) {
      CHECK(spans[i].name == "mark " + std::to_string(i));
      if (i > 0) CHECK(spans[i].start_cycle == spans[i - 1].end_cycle);
    }
    CHECK(spans.back().end_cycle == result.cycles);
  }
}
