// A Kineto child profiler (torch's PrivateUse1 profiler registry) whose activities are the chip's
// kernels. Kernels of one device never overlap on its row: each starts at the later of the
// host time its flush began and the end of the kernel before it, and lasts its simulated time,
// so the row reads like a CUDA stream's. The simulated clock itself is kept in each kernel's
// metadata ("simulated start us"), which Event.elapsed_time and vtpu.stats() agree with.
#include "torch_bridge/csrc/runtime/profiler.h"

#include <GenericTraceActivity.h>
#include <IActivityProfiler.h>
#include <libkineto.h>
#include <output_base.h>
#include <time_since_epoch.h>
#include <torch/csrc/profiler/standalone/privateuse1_profiler.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <mutex>
#include <string>

namespace vtpu::bridge::profiler {
namespace {

struct KernelRecord {
  std::string name;
  int device = 0;
  int64_t start_ns = 0, end_ns = 0;
  double simulated_start_us = 0;
  uint64_t correlation = 0;  // the aten op that ran the flush (0: none known)
};

class Session;
std::mutex session_mutex;
Session* active_session = nullptr;  // guarded by session_mutex
std::atomic<bool> active{false};
// Kineto pushes the correlation id of each aten op on the thread that runs it; the innermost one
// open when a flush runs is the op that launched its kernels.
thread_local std::vector<uint64_t> open_ops;

class Session final : public libkineto::IActivityProfilerSession {
 public:
  void start() override {
    std::lock_guard lock(session_mutex);
    active_session = this;
    active = true;
    status_ = libkineto::TraceStatus::RECORDING;
  }
  void stop() override {
    std::lock_guard lock(session_mutex);
    if (active_session == this) {
      active_session = nullptr;
      active = false;
    }
    status_ = libkineto::TraceStatus::PROCESSING;
  }
  ~Session() override { stop(); }

  void add(KernelRecord k) { kernels_.push_back(std::move(k)); }
  int64_t& cursor(int device) { return cursor_[device]; }

  void pushCorrelationId(uint64_t id) override { open_ops.push_back(id); }
  void popCorrelationId() override {
    if (!open_ops.empty()) open_ops.pop_back();
  }

  std::vector<std::string> errors() override { return {}; }
  void processTrace(libkineto::ActivityLogger& logger) override { processTrace(logger, nullptr, 0, 0); }
  void processTrace(libkineto::ActivityLogger& logger, libkineto::getLinkedActivityCallback linked, int64_t,
                    int64_t) override {
    // The activities outlive this call: loggers may keep pointers to them.
    for (const KernelRecord& k : kernels_) {
      auto& a = activities_.emplace_back(span_, libkineto::ActivityType::CONCURRENT_KERNEL, k.name);
      a.startTime = k.start_ns;
      a.endTime = k.end_ns;
      a.id = static_cast<int32_t>(k.correlation);
      a.device = k.device;
      a.resource = 0;
      if (linked && k.correlation) a.linked = linked(static_cast<int32_t>(k.correlation));
      // Quoted: the unquoted form formats with the fmt bundled in torch's headers, whose
      // compiled part libtorch does not export.
      a.addMetadataQuoted("simulated start us", std::to_string(k.simulated_start_us));
      a.addMetadataQuoted("simulated duration us", std::to_string((k.end_ns - k.start_ns) / 1e3));
      logger.handleGenericActivity(a);
    }
    status_ = libkineto::TraceStatus::READY;
  }
  std::unique_ptr<libkineto::DeviceInfo> getDeviceInfo() override {
    return std::make_unique<libkineto::DeviceInfo>(libkineto::DeviceInfo{0, 0, "vtpu", "tpu (simulated)"});
  }
  std::vector<libkineto::ResourceInfo> getResourceInfos() override { return {{0, 0, 0, "simulated kernels"}}; }
  std::unique_ptr<libkineto::CpuTraceBuffer> getTraceBuffer() override { return nullptr; }

 private:
  libkineto::TraceSpan span_{0, 0, "vtpu"};
  std::vector<KernelRecord> kernels_;
  std::deque<libkineto::GenericTraceActivity> activities_;
  std::map<int, int64_t> cursor_;
};

class ChipProfiler final : public libkineto::IActivityProfiler {
 public:
  const std::string& name() const override { return name_; }
  const std::set<libkineto::ActivityType>& availableActivities() const override { return activities_; }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config&) override {
    if (!types.count(libkineto::ActivityType::CONCURRENT_KERNEL)) return nullptr;
    return std::make_unique<Session>();
  }
  std::unique_ptr<libkineto::IActivityProfilerSession> configure(int64_t, int64_t,
                                                                 const std::set<libkineto::ActivityType>& types,
                                                                 const libkineto::Config& config) override {
    return configure(types, config);
  }

 private:
  std::string name_ = "vtpu";
  std::set<libkineto::ActivityType> activities_{libkineto::ActivityType::CONCURRENT_KERNEL};
};

REGISTER_PRIVATEUSE1_PROFILER(ChipProfiler);

}  // namespace

bool recording() { return active.load(std::memory_order_relaxed); }

int64_t host_now_ns() { return libkineto::timeSinceEpoch(std::chrono::system_clock::now()); }

void note_launches(int device, int64_t host_start_ns, double simulated_start_seconds,
                   const std::vector<LaunchSpan>& launches) {
  std::lock_guard lock(session_mutex);
  if (!active_session) return;
  const uint64_t op = open_ops.empty() ? 0 : open_ops.back();
  int64_t& cursor = active_session->cursor(device);
  cursor = std::max(cursor, host_start_ns);
  double simulated = simulated_start_seconds;
  for (const LaunchSpan& l : launches) {
    const auto ns = std::max<int64_t>(1, static_cast<int64_t>(l.seconds * 1e9 + 0.5));
    active_session->add({l.label, device, cursor, cursor + ns, simulated * 1e6, op});
    cursor += ns;
    simulated += l.seconds;
  }
}

}  // namespace vtpu::bridge::profiler
