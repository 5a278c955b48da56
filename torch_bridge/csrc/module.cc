// The Python module vtpu._C: device management, modes, counters, tracing. The Python package
// (torch_bridge/python/vtpu) turns these into torch.tpu and vtpu.* functions.
#include <torch/extension.h>

#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {

void register_hooks();
void register_build_info(py::module& m);
void register_slice(py::module& m);
void register_assembly_kernels(py::module& m);
void register_block_kernels(py::module& m);
void register_user_kernel_nodes(py::module& m);
int current_device_index();
void set_current_device_index(int index);

namespace {

void synchronize(int device) {
  auto& rt = Runtime::get();
  if (device >= 0) {
    Recorder::of(device).flush();
    return;
  }
  for (int d = 0; d < rt.device_count(); ++d) Recorder::of(d).flush();
}

py::dict stats() {
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  const Stats& s = rt.stats();
  py::dict d;
  d["mode"] = mode_name(rt.mode());
  d["chip"] = rt.chip_name();
  d["kernels_launched"] = s.kernels_launched;
  d["simulated_cycles"] = s.simulated_cycles;
  d["simulated_seconds"] = s.simulated_seconds;
  d["hbm_read_bytes"] = s.hbm_read_bytes;
  d["hbm_write_bytes"] = s.hbm_write_bytes;
  d["held_vmem_bytes"] = s.held_vmem_bytes;
  d["intermediates_held"] = s.intermediates_held;
  d["intermediates_in_hbm"] = s.intermediates_in_hbm;
  d["host_to_device_bytes"] = s.host_to_device_bytes;
  d["device_to_host_bytes"] = s.device_to_host_bytes;
  d["ops_recorded"] = s.ops_recorded;
  d["ops_fused_away"] = s.ops_fused_away;
  d["ops_dead"] = s.ops_dead;
  d["flushes"] = s.flushes;
  d["host_relayouts"] = s.host_relayouts;
  d["chip_to_chip_bytes"] = s.chip_to_chip_bytes;
  d["chip_to_chip_seconds"] = s.chip_to_chip_seconds;
  d["interconnect_wait_seconds"] = s.interconnect_wait_seconds;
  d["cpu_fallback_ops"] = s.cpu_fallback_ops;
  d["cpu_fallbacks"] = s.fallback_counts;
  d["cache_hits"] = rt.cache().hits();
  d["cache_misses"] = rt.cache().misses();
  d["cached_programs"] = rt.cache().size();
  d["plan_cache_hits"] = s.plan_cache_hits;
  d["plan_cache_misses"] = s.plan_cache_misses;
  d["cached_plans"] = rt.plans().size();
  d["planning_seconds"] = s.planning_seconds;
  d["timing_memo_hits"] = s.timing_memo_hits;
  d["timing_only_data_dependent"] = s.timing_only_data_dependent;
  py::dict per_kernel;
  for (const auto& [label, profile] : s.per_kernel) {
    py::dict entry;
    entry["launches"] = profile.launches;
    entry["cycles"] = profile.cycles;
    entry["seconds"] = profile.seconds;
    entry["flops"] = profile.flops;
    entry["hbm_read_bytes"] = profile.hbm_read_bytes;
    entry["hbm_write_bytes"] = profile.hbm_write_bytes;
    entry["host_seconds"] = profile.host_seconds;
    per_kernel[py::str(label)] = entry;
  }
  d["per_kernel"] = per_kernel;
  // Busy cycles over simulated cycles: a unit that is busy half the time reports 0.5.
  py::dict utilisation;
  for (const auto& [unit, busy] : s.busy_cycles_per_unit) {
    utilisation[py::str(unit.data(), unit.size())] = s.simulated_cycles ? double(busy) / double(s.simulated_cycles) : 0.0;
  }
  d["unit_utilisation"] = utilisation;
  py::list memory;
  for (int i = 0; i < rt.device_count(); ++i) {
    const auto m = rt.device(i).memory_stats();
    py::dict md;
    md["allocated_bytes"] = m.allocated_bytes;
    md["peak_allocated_bytes"] = m.peak_allocated_bytes;
    md["capacity_bytes"] = m.capacity_bytes;
    md["held_vmem_allocated_bytes"] = m.held_allocated_bytes;
    md["held_vmem_peak_bytes"] = m.held_peak_bytes;
    md["held_vmem_capacity_bytes"] = m.held_capacity_bytes;
    md["peak_combined_bytes"] = m.peak_combined_bytes;
    memory.append(md);
  }
  d["memory"] = memory;
  return d;
}

}  // namespace
}  // namespace vtpu::bridge

PYBIND11_MODULE(_C, m) {
  using namespace vtpu::bridge;
  m.doc() = "vtpu: the simulated TPU behind torch device 'tpu'";
  register_hooks();
  m.def("device_count", [] { return Runtime::get().device_count(); });
  m.def("current_device", &current_device_index);
  m.def("set_device", &set_current_device_index);
  m.def("synchronize", &synchronize, py::arg("device") = -1);
  m.def("set_mode", [](const std::string& mode) { Runtime::get().set_mode(mode_from_name(mode)); });
  m.def("get_mode", [] { return mode_name(Runtime::get().mode()); });
  m.def("set_fusion", [](const std::string& s) {
    vtpu::kernels::FusionStrategy strategy;
    try {
      strategy = vtpu::kernels::fusion_strategy_from_name(s);
    } catch (const std::exception& e) {
      throw std::invalid_argument(e.what());  // a bad name is a ValueError, as a bad mode is
    }
    synchronize(-1);
    Runtime::get().set_fusion(strategy);
  });
  m.def("get_fusion", [] { return std::string(vtpu::kernels::fusion_strategy_name(Runtime::get().fusion())); });
  m.def("set_cpu_fallback", [](bool allowed) { Runtime::get().set_cpu_fallback(allowed); });
  m.def("set_timing_only", [](bool on) { Runtime::get().set_timing_only(on); });
  m.def("timing_only", [] { return Runtime::get().timing_only(); });
  m.def("cpu_fallback_allowed", [] { return Runtime::get().cpu_fallback_allowed(); });
  // vtpu.progress: `listener(done, total)` during long flushes, or None to stop. It is called
  // with the GIL taken on whichever thread runs the flush (autograd's included); what it raises
  // (a KeyboardInterrupt) stops the flush as Ctrl-C does. The callable is kept in a leaked
  // holder: it must not be released after the interpreter has finalised.
  m.def("set_progress_listener", [](py::object listener) {
    static auto* held = new py::object();
    *held = std::move(listener);
    if (held->is_none()) {
      Runtime::get().set_progress_listener(nullptr);
      return;
    }
    Runtime::get().set_progress_listener([](size_t done, size_t total) {
      if (!Py_IsInitialized()) return;
      py::gil_scoped_acquire gil;
      if (!held->is_none()) (*held)(done, total);
    });
  });
  // Counts one CPU fallback of `op` run from Python (an op whose decomposition declined); true the
  // first time since the last reset, when the caller warns.
  m.def("count_cpu_fallback", [](const std::string& op) {
    auto& rt = Runtime::get();
    std::lock_guard lock(rt.mutex());
    rt.stats().cpu_fallback_ops++;
    return rt.stats().fallback_counts[op]++ == 0;
  });
  m.def("chip_name", [] { return Runtime::get().chip_name(); });
  m.def("stats", &stats);
  m.def("reset_stats", [] { Runtime::get().reset_stats(); });
  m.def("cached_programs", [] { return Runtime::get().cache().keys(); });
  m.def("reset_peak_memory_stats", [](int device) { Runtime::get().device(device).reset_peak_memory(); });
  m.def("manual_seed", [](int device, uint64_t seed) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::PrivateUse1, device));
    std::lock_guard lock(gen.mutex());
    gen.set_current_seed(seed);
  });
  m.def("initial_seed", [](int device) {
    return at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::PrivateUse1, device)).current_seed();
  });
  m.def("get_rng_state", [](int device) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::PrivateUse1, device));
    std::lock_guard lock(gen.mutex());
    return gen.get_state();
  });
  m.def("set_rng_state", [](int device, const at::Tensor& state) {
    auto gen = at::globalContext().defaultGenerator(c10::Device(c10::DeviceType::PrivateUse1, device));
    std::lock_guard lock(gen.mutex());
    gen.set_state(state);
  });
  // Each device's simulated time in seconds (what tpu events read): its kernels, and its stalls
  // for data in flight on the interconnect (vtpu.distributed).
  m.def("simulated_clock", [](int device) { return Runtime::get().simulated_clock(device); });
  // Data in flight on the interconnect (vtpu.distributed): the tensor's buffer arrives at
  // `seconds`, and whatever reads it first waits for that.
  m.def("set_arrival", [](const at::Tensor& t, double seconds) {
    auto& rt = Runtime::get();
    std::lock_guard lock(rt.mutex());
    Buffer& b = rt.buffer(storage_vaddr(t));
    b.ready_at = std::max(b.ready_at, seconds);
  });
  m.def("wait_until", [](int device, double seconds) {
    auto& rt = Runtime::get();
    std::lock_guard lock(rt.mutex());
    rt.wait_until(device, seconds);
  });
  m.def("start_trace", [] { Runtime::get().start_trace(); });
  m.def("tracing", [] { return Runtime::get().tracing(); });
  m.def("stop_trace", [](const std::string& path) { Runtime::get().stop_trace(path); });
  // A slice on the chip's interconnect rows: "interconnect" (the collective), or one link's row.
  m.def(
      "trace_interconnect",
      [](int device, const std::string& name, double start, double end, const std::string& row) {
        Runtime::get().trace_interconnect(device, name, start, end, row);
      },
      py::arg("device"), py::arg("name"), py::arg("start"), py::arg("end"), py::arg("row") = "interconnect");
  register_build_info(m);
  register_slice(m);
  register_assembly_kernels(m);
  register_block_kernels(m);
  register_user_kernel_nodes(m);
}
