// Processes map to pid, tracks to tid (counters live on their process). Perfetto does not support
// overlapping slices on one track, which the recorder guarantees per unit.
#include "traces/trace_writer.h"

#include <fmt/format.h>

#include <fstream>
#include <map>

namespace vtpu::traces {

nlohmann::json chrome_trace_json(const TraceRecorder& recorder, double clock_hz) {
  using nlohmann::json;
  const double us_per_cycle = 1e6 / clock_hz;
  json events = json::array();
  std::map<std::string, int> pids;
  auto pid_of = [&](const std::string& process) {
    auto [it, inserted] = pids.emplace(process, static_cast<int>(pids.size()) + 1);
    if (inserted) {
      events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", it->second}, {"args", {{"name", process}}}});
    }
    return it->second;
  };
  const auto& tracks = recorder.tracks();
  for (size_t t = 0; t < tracks.size(); ++t) {
    const int pid = pid_of(tracks[t].process);
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", pid}, {"tid", t + 1},
                      {"args", {{"name", tracks[t].name}}}});
    events.push_back({{"ph", "M"}, {"name", "thread_sort_index"}, {"pid", pid}, {"tid", t + 1},
                      {"args", {{"sort_index", t}}}});
  }
  for (const Slice& s : recorder.slices()) {
    json ev = {{"ph", "X"},
               {"name", s.name},
               {"pid", pid_of(tracks[s.track].process)},
               {"tid", s.track + 1},
               {"ts", s.start_cycle * us_per_cycle},
               {"dur", (s.end_cycle - s.start_cycle) * us_per_cycle},
               {"args", {{"instructions", s.instructions}, {"start_cycle", s.start_cycle}, {"cycles", s.end_cycle - s.start_cycle}}}};
    events.push_back(std::move(ev));
  }
  const auto& counters = recorder.counters();
  for (const CounterSample& c : recorder.samples()) {
    events.push_back({{"ph", "C"},
                      {"name", counters[c.counter].name},
                      {"pid", pid_of(counters[c.counter].process)},
                      {"ts", c.cycle * us_per_cycle},
                      {"args", {{"value", c.value}}}});
  }
  json doc = {{"traceEvents", std::move(events)}, {"displayTimeUnit", "ns"}};
  doc["otherData"] = {{"generator", "vtpu"}, {"clock_hz", clock_hz}, {"truncated", recorder.truncated()}};
  return doc;
}

void write_chrome_trace(const TraceRecorder& recorder, double clock_hz, const std::string& path) {
  std::ofstream out(path);
  if (!out) throw std::runtime_error(fmt::format("cannot write trace file '{}'", path));
  out << chrome_trace_json(recorder, clock_hz).dump();
  if (!out) throw std::runtime_error(fmt::format("error writing trace file '{}'", path));
}

}  // namespace vtpu::traces
