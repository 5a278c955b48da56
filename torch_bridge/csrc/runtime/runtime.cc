#include "torch_bridge/csrc/runtime/runtime.h"

#include <ATen/Context.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "sim/sim_error.h"
#include "torch_bridge/csrc/runtime/collective_timing.h"
#include "traces/trace_writer.h"

namespace vtpu::bridge {
namespace {

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

// A VTPU_* variable read through `parse`, whose errors name the valid choices; whatever it
// rejects becomes one std::invalid_argument (Python's ValueError) naming the variable and value.
template <typename Parse>
auto from_env(const char* name, const std::string& fallback, Parse parse) {
  const std::string value = env_or(name, fallback);
  try {
    return parse(value);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string(name) + "=" + value + ": " + e.what());
  }
}

// Ctrl-C during a launch: Python's handler only sets a flag, which the main thread's next Python
// bytecode would read after the launch. Launches poll this every few ms instead: on the main
// thread (the one Python delivers signals to; TBB's workers never take the GIL here), it takes
// the GIL and lets Python run its signal handlers; KeyboardInterrupt is thrown through the
// simulator, which abandons the launch, and the recorder drops the flush's pending results.
const std::thread::id main_thread = std::this_thread::get_id();  // the importing thread, as Python's

void poll_interrupt() {
  if (std::this_thread::get_id() != main_thread || !Py_IsInitialized()) return;
  pybind11::gil_scoped_acquire gil;
  if (PyErr_CheckSignals() != 0) throw pybind11::error_already_set();
}

int64_t whole_number(const std::string& text, int64_t most, const char* what) {
  const bool digits = !text.empty() && text.size() <= 18 && text.find_first_not_of("0123456789") == std::string::npos;
  const int64_t v = digits ? std::stoll(text) : 0;
  if (v < 1 || v > most) throw std::invalid_argument(std::string("expected ") + what + ", a whole number in 1.." + std::to_string(most));
  return v;
}

}  // namespace

Mode mode_from_name(const std::string& name) {
  if (name == "strict_eager") return Mode::StrictEager;
  if (name == "defer_and_fuse") return Mode::DeferAndFuse;
  if (name == "debug") return Mode::Debug;
  throw std::invalid_argument("unknown vtpu mode '" + name + "' (strict_eager, defer_and_fuse, debug)");
}

void check_not_lost(const Buffer& b) {
  TORCH_CHECK(b.lost.empty(), "vtpu: this tensor's value was lost: ", b.lost,
              ". Write it again (or recompute it) before reading it");
}

std::string mode_name(Mode mode) {
  switch (mode) {
    case Mode::StrictEager: return "strict_eager";
    case Mode::DeferAndFuse: return "defer_and_fuse";
    case Mode::Debug: return "debug";
  }
  return "defer_and_fuse";
}

namespace {

PendingWorkHooks& pending_work_hooks() {
  static PendingWorkHooks hooks;  // set before any tensor exists (the recorder's static init)
  return hooks;
}

void flush_pending(int device) {
  if (pending_work_hooks().flush) pending_work_hooks().flush(device);
}

}  // namespace

void Runtime::set_pending_work_hooks(PendingWorkHooks hooks) { pending_work_hooks() = std::move(hooks); }

Runtime& Runtime::get() {
  static Runtime* runtime = new Runtime();  // never destroyed: tensors may outlive static destruction
  return *runtime;
}

// VTPU_CHIP picks the generation (v5e by default), VTPU_CHIPS how many chips (1), VTPU_MODE the
// mode, VTPU_CPU_FALLBACK=1 allows CPU fallback, VTPU_HBM_BYTES shrinks HBM (for OOM tests),
// VTPU_TIMING_ONLY=1 times without computing values.
// Every value is checked here, at the first use of the device (`import vtpu` makes that use), so
// a bad one is a Python ValueError then, never an exception thrown where C++ cannot pass it on.
Runtime::Runtime() {
  sim::ChipConfig chip = from_env("VTPU_CHIP", "v5e", [](const std::string& v) { return sim::load_chip(v); });
  chip_name_ = chip.name;
  if (!env_or("VTPU_HBM_BYTES", "").empty()) {
    chip.hbm_bytes = from_env("VTPU_HBM_BYTES", "", [](const std::string& v) {
      return static_cast<uint64_t>(whole_number(v, int64_t{1} << 50, "a byte count"));
    });
  }
  const int64_t count = from_env("VTPU_CHIPS", "1", [](const std::string& v) { return whole_number(v, 64, "a number of chips"); });
  mode_ = from_env("VTPU_MODE", "defer_and_fuse", mode_from_name);
  // CUDA_LAUNCH_BLOCKING's counterpart: every op runs at once, checked
  if (from_env("VTPU_LAUNCH_BLOCKING", "0", [](const std::string& v) {
        if (v != "0" && v != "1") throw std::invalid_argument("expected 0 (off) or 1 (debug mode)");
        return v == "1";
      })) {
    mode_ = Mode::Debug;
  }
  cpu_fallback_ = from_env("VTPU_CPU_FALLBACK", "0", [](const std::string& v) {
    if (v != "0" && v != "1") throw std::invalid_argument("expected 0 (off) or 1 (on)");
    return v == "1";
  });
  fusion_ = from_env("VTPU_FUSION", "greedy", kernels::fusion_strategy_from_name);
  timing_only_ = from_env("VTPU_TIMING_ONLY", "0", [](const std::string& v) {
    if (v != "0" && v != "1") throw std::invalid_argument("expected 0 (off) or 1 (time kernels without computing values)");
    return v == "1";
  });
  for (int64_t i = 0; i < count; ++i) {
    devices_.push_back(sim::make_sim_device(chip));
    devices_.back()->set_interrupt_poll(poll_interrupt);
    devices_.back()->set_timing_only(timing_only_);
  }
  clocks_.assign(devices_.size(), 0.0);
  live_bytes_.assign(devices_.size(), 0);
  // The chips of this process form one slice. With one chip, VTPU_TOPOLOGY describes the slice
  // of a tpu_dist job's ranks instead (vtpu.distributed), so only its form is checked here.
  const auto axes = from_env("VTPU_TOPOLOGY", std::to_string(count), [&](const std::string& v) {
    auto parsed = sim::parse_topology(v);
    int64_t chips = 1;
    for (int n : parsed) chips *= n;
    if (count > 1 && chips != count) {
      throw std::invalid_argument("a slice of " + std::to_string(chips) + " chips, but VTPU_CHIPS=" + std::to_string(count));
    }
    return count > 1 ? parsed : std::vector<int>{1};
  });
  slice_ = std::make_unique<sim::Slice>(chip, axes);
}

void Runtime::wait_until(int device, double seconds) {
  if (seconds <= clocks_.at(device)) return;
  stats_.interconnect_wait_seconds += seconds - clocks_.at(device);
  clocks_.at(device) = seconds;
}

void Runtime::copy_between_chips(int src, int dst, uint64_t bytes) {
  // The copy starts when both chips are there (their pending work ran: the caller flushed) and
  // takes the time of a send kernel run on this process's slice (its links and hops, as the
  // simulator models them); both clocks end at its end.
  const double seconds = simulated_collective(CollectiveKind::Send, slice_->axes(), devices_.at(src)->chip(),
                                              double(bytes), src, dst).seconds;
  const double end = std::max(clocks_.at(src), clocks_.at(dst)) + seconds;
  clocks_.at(src) = clocks_.at(dst) = end;
  stats_.chip_to_chip_bytes += bytes;
  stats_.chip_to_chip_seconds += seconds;
}

sim::Device& Runtime::device(int index) {
  TORCH_CHECK(index >= 0 && index < device_count(), "vtpu: device tpu:", index, " does not exist (", device_count(),
              " simulated chips; set VTPU_CHIPS for more)");
  return *devices_[index];
}

void Runtime::set_mode(Mode mode) {
  std::lock_guard lock(mutex_);
  for (int d = 0; d < device_count(); ++d) flush_pending(d);  // pending work runs under the old mode
  mode_ = mode;
}

void Runtime::set_timing_only(bool on) {
  std::lock_guard lock(mutex_);
  for (int d = 0; d < device_count(); ++d) flush_pending(d);  // pending work runs as it was recorded
  for (int d = 0; d < device_count(); ++d) {
    TORCH_CHECK(devices_[d]->set_timing_only(on), "vtpu: device tpu:", d, " cannot run timing only");
  }
  timing_only_ = on;
}

std::string Runtime::matmul_precision() const {
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST: return "highest";
    case at::Float32MatmulPrecision::HIGH: return "high";
    case at::Float32MatmulPrecision::MEDIUM: return "medium";
  }
  return "highest";
}

uint64_t Runtime::allocate(int device_index, uint64_t bytes) {
  std::lock_guard lock(mutex_);
  const auto memory = device(device_index).memory_stats();  // (and the range check)
  // A tensor larger than the whole HBM can never be given memory: refused at the op that asked
  // for it in every mode (defer_and_fuse would only find out at the flush, where nothing can
  // name the op). Tensors that fit alone are placed at the flush, or at once in strict_eager.
  TORCH_CHECK_WITH(OutOfMemoryError, bytes <= memory.capacity_bytes, "vtpu: out of HBM on tpu:", device_index, " (",
                   chip_name_, "): tried to allocate ", bytes, " bytes, more than all of its HBM: ", memory.capacity_bytes,
                   " total");
  uint64_t& live = live_bytes_[device_index];
  TORCH_CHECK_WITH(OutOfMemoryError, live + bytes <= memory.capacity_bytes, "vtpu: out of HBM on tpu:", device_index, " (",
                   chip_name_, "): tried to allocate ", bytes, " bytes; ", memory.capacity_bytes - live,
                   " bytes free of ", memory.capacity_bytes, " total (live tensors hold ", live, ")");
  const uint64_t vaddr = next_vaddr_;
  next_vaddr_ += (std::max<uint64_t>(bytes, 1) + 4095) / 4096 * 4096 + 4096;  // a gap catches overruns
  Buffer& b = buffers_[vaddr] = Buffer{};
  b.device = device_index;
  b.bytes = bytes;
  live += bytes;
  if (runs_each_op_at_once() && bytes > 0) {
    try {
      materialize(vaddr);
    } catch (...) {
      buffers_.erase(vaddr);
      live -= bytes;
      throw;
    }
  }
  return vaddr;
}

void Runtime::release(uint64_t vaddr) {
  std::lock_guard lock(mutex_);
  auto it = buffers_.find(vaddr);
  if (it == buffers_.end()) return;
  if (it->second.pending_value >= 0 && pending_work_hooks().forget_output) {
    pending_work_hooks().forget_output(it->second.device, vaddr);
  }
  if (it->second.hbm) devices_[it->second.device]->free(*it->second.hbm);
  live_bytes_[it->second.device] -= it->second.bytes;
  buffers_.erase(it);
}

Buffer& Runtime::buffer(uint64_t vaddr) {
  auto it = buffers_.find(vaddr);
  TORCH_CHECK(it != buffers_.end(), "vtpu: no device buffer at ", reinterpret_cast<void*>(vaddr),
              " (a tensor of another device, or freed)");
  return it->second;
}

const Buffer* Runtime::find_buffer(uint64_t vaddr) const {
  const auto it = buffers_.find(vaddr);
  return it == buffers_.end() ? nullptr : &it->second;
}

sim::HbmAddress Runtime::materialize(uint64_t vaddr) {
  std::lock_guard lock(mutex_);
  Buffer& b = buffer(vaddr);
  if (b.hbm) return *b.hbm;
  try {
    b.hbm = devices_[b.device]->allocate(std::max<uint64_t>(b.bytes, 1));
  } catch (const sim::OutOfMemoryError& e) {
    TORCH_CHECK_WITH(OutOfMemoryError, false, "vtpu: out of HBM on tpu:", b.device, " (", chip_name_,
                     "): tried to allocate ", e.requested_bytes(), " bytes; ", e.free_bytes(), " bytes free of ",
                     e.total_bytes(), " total");
  }
  return *b.hbm;
}

void Runtime::start_trace() {
  std::lock_guard lock(mutex_);
  trace_ = std::make_unique<traces::TraceRecorder>();
  for (auto& d : devices_) d->set_trace(trace_.get());
}

void Runtime::anchor_trace(int device) {
  std::lock_guard lock(mutex_);
  if (!trace_) return;
  trace_->set_process_prefix("tpu:" + std::to_string(device) + " ");
  devices_.at(device)->set_trace_origin(uint64_t(std::llround(clocks_.at(device) * devices_[device]->chip().clock_hz)));
}

void Runtime::trace_interconnect(int device, const std::string& name, double start, double end, const std::string& row) {
  std::lock_guard lock(mutex_);
  if (!trace_) return;
  const double hz = devices_.at(device)->chip().clock_hz;
  trace_->set_process_prefix("");
  const int track = trace_->add_track(row, "tpu:" + std::to_string(device) + " " + devices_[device]->chip().name + " links");
  trace_->interval(track, uint64_t(std::llround(start * hz)), uint64_t(std::llround(end * hz)), name);
}

void Runtime::stop_trace(const std::string& path) {
  std::lock_guard lock(mutex_);
  TORCH_CHECK(trace_, "vtpu: no trace is being recorded");
  for (int d = 0; d < device_count(); ++d) flush_pending(d);
  for (auto& d : devices_) d->set_trace(nullptr);
  trace_->flush();
  traces::write_chrome_trace(*trace_, devices_[0]->chip().clock_hz, path);
  trace_.reset();
}

std::function<void(size_t)> Runtime::progress_for(size_t total) const {
  if (!progress_) return nullptr;
  using Clock = std::chrono::steady_clock;
  return [listener = progress_, total, last = Clock::now(), heard = false](size_t done) mutable {
    const auto now = Clock::now();
    if (std::chrono::duration<double>(now - last).count() < kProgressSeconds && !(heard && done == total)) return;
    last = now;
    heard = true;
    listener(done, total);
  };
}

}  // namespace vtpu::bridge
