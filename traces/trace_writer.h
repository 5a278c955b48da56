// Chrome trace-event JSON (opens in ui.perfetto.dev and chrome://tracing): "X" slices per unit
// track, "C" counters, "M" metadata naming processes and threads. Times are microseconds.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "traces/trace_recorder.h"

namespace vtpu::traces {

nlohmann::json chrome_trace_json(const TraceRecorder& recorder, double clock_hz);
// Writes the trace to `path`; throws std::runtime_error if the file cannot be written.
void write_chrome_trace(const TraceRecorder& recorder, double clock_hz, const std::string& path);

}  // namespace vtpu::traces
