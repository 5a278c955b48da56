#include "torch_bridge/csrc/record/recorder.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <chrono>
#include <memory>

#include "kernels/codegen/kernel_error.h"
#include "kernels/codegen/trap_code.h"
#include "sim/sim_error.h"
#include "torch_bridge/csrc/runtime/profiler.h"
#include "torch_bridge/csrc/runtime/runtime.h"
#include "torch_bridge/csrc/record/user_kernel_sources.h"
#include "torch_bridge/plan_runner/plan_runner.h"

namespace vtpu::bridge {

std::optional<kernels::DType> chip_dtype(c10::ScalarType t) {
  switch (t) {
    case at::kFloat: return kernels::DType::F32;
    case at::kBFloat16: return kernels::DType::BF16;
    case at::kHalf: return kernels::DType::F16;
    case at::kInt: return kernels::DType::I32;
    case at::kChar: return kernels::DType::I8;
    case at::kByte: return kernels::DType::U8;
    case at::kBool: return kernels::DType::Bool;
    default: return std::nullopt;
  }
}

kernels::DType to_kernel_dtype(c10::ScalarType t) {
  const auto d = chip_dtype(t);
  TORCH_CHECK_NOT_IMPLEMENTED(d, "vtpu: ", t, " tensors have no kernels on the chip (f32, bf16, f16, int32, int8, uint8, bool)");
  return *d;
}

bool is_whole_buffer(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 && uint64_t(t.nbytes()) == Runtime::get().buffer(storage_vaddr(t)).bytes;
}

uint64_t storage_vaddr(const at::Tensor& t) { return reinterpret_cast<uint64_t>(t.storage().data()); }

// The runtime flushes and forgets pending work through these (runtime.h): registered as the
// extension loads, before any tensor exists.
const bool kPendingWorkHooksSet = [] {
  Runtime::set_pending_work_hooks({[](int device) { Recorder::of(device).flush(); },
                                   [](int device, uint64_t vaddr) { Recorder::of(device).forget_output(vaddr); }});
  return true;
}();

Recorder& Recorder::of(int device) {
  // Never destroyed, like the Runtime: destroying a recorder at exit releases the storages it
  // holds, whose release calls back into this map (a use after free that corrupted the heap
  // when a process exited with deferred work pending).
  static auto* recorders = new std::map<int, std::unique_ptr<Recorder>>();
  std::lock_guard lock(Runtime::get().mutex());
  auto& r = (*recorders)[device];
  if (!r) r.reset(new Recorder(device));
  return *r;
}

namespace {

// A dense copy of a non-contiguous view, made on the host (counted in stats().host_relayouts).
at::Tensor relayout(const at::Tensor& t) {
  Runtime::get().stats().host_relayouts++;
  const at::Tensor host = t.to(at::kCPU).contiguous();
  at::Tensor dense = at::empty(t.sizes(), t.options());
  dense.copy_(host);
  return dense;
}

}  // namespace

// A non-contiguous view of a buffer with data: a strided copy kernel reading the whole buffer.
// std::nullopt when the chip cannot hold the dtype (the caller relayouts on the host).
std::optional<int> Recorder::strided_view(const at::Tensor& t) {
  auto& rt = Runtime::get();
  const uint64_t vaddr = storage_vaddr(t);
  Buffer& b = rt.buffer(vaddr);
  check_not_lost(b);
  inputs_ready_at_ = std::max(inputs_ready_at_, b.ready_at);
  const auto chip = chip_dtype(t.scalar_type());
  if (!chip) return std::nullopt;
  const kernels::DType dtype = *chip;
  const std::vector<int64_t> sizes(t.sizes().begin(), t.sizes().end()), strides(t.strides().begin(), t.strides().end());
  if (b.pending_value >= 0) {
    // A view of a pending result: the copy reads the result's buffer, which the planner
    // materialises because the copy is a kernel of its own.
    if (graph_.node(b.pending_value).type.dtype != dtype) throw NeedsFlush{};
    return graph_.strided_copy(b.pending_value, sizes, strides, t.storage_offset());
  }
  const int64_t elems = static_cast<int64_t>(b.bytes / t.element_size());
  const int source = bind_input(rt.materialize(vaddr), {{elems}, dtype}, t.storage(), "storage");
  return graph_.strided_copy(source, sizes, strides, t.storage_offset());
}

int Recorder::value_of(const at::Tensor& t) {
  std::lock_guard lock(Runtime::get().mutex());
  auto& rt = Runtime::get();
  TORCH_CHECK(t.device().is_privateuseone() && t.device().index() == device_, "vtpu: expected a tensor on tpu:", device_,
              ", got one on ", t.device());
  if (!t.is_contiguous() && t.numel() > 0) {
    if (auto v = strided_view(t)) return *v;
  }
  const at::Tensor dense = t.is_contiguous() ? t : relayout(t);
  const kernels::TensorType type{std::vector<int64_t>(dense.sizes().begin(), dense.sizes().end()), to_kernel_dtype(dense.scalar_type())};
  const uint64_t vaddr = storage_vaddr(dense);
  const uint64_t offset = dense.storage_offset() * dense.element_size();
  Buffer& b = rt.buffer(vaddr);
  check_not_lost(b);
  inputs_ready_at_ = std::max(inputs_ready_at_, b.ready_at);
  if (b.pending_value >= 0) {
    const auto& pending = graph_.node(b.pending_value).type;
    if (offset == 0 && pending == type) return b.pending_value;
    // A view of the whole pending result under another shape: an alias node, no kernel.
    if (offset == 0 && pending.dtype == type.dtype && pending.numel() == type.numel()) {
      return graph_.reshape(b.pending_value, type.shape);
    }
    // A dense part of it (a chunk along its first dim, an attention's output beside its
    // logsumexp, one output of a kernel's packed value), or its bits read as another dtype held
    // as plain bytes: an alias read where it lies, no sync point.
    if (graph_.has_part(b.pending_value, int64_t(offset), type)) return graph_.part(b.pending_value, int64_t(offset), type);
    throw NeedsFlush{};  // a part of pending data held otherwise (int64 words, bytes): land it first
  }
  return bind_input(rt.materialize(vaddr) + offset, type, dense.storage(), "tensor");
}

// One graph input per (address, type) in a graph; its storage stays alive until the flush.
int Recorder::bind_input(sim::HbmAddress hbm, const kernels::TensorType& type, const c10::Storage& storage,
                         const char* label) {
  auto key = std::make_tuple(uint64_t{hbm}, type.dtype, type.shape);
  if (auto it = input_values_.find(key); it != input_values_.end()) return it->second;
  const int v = graph_.input(type, label);
  input_address_[v] = hbm;
  input_values_.emplace(std::move(key), v);
  input_storage_[v] = storage;
  return v;
}

std::vector<int> Recorder::values_of(const std::vector<at::Tensor>& ts) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      std::vector<int> values;
      for (const auto& t : ts) values.push_back(value_of(t));
      return values;
    } catch (const NeedsFlush&) {
      flush();  // values taken so far belonged to the flushed graph: take them all again
    }
  }
  TORCH_INTERNAL_ASSERT(false, "vtpu: inputs still pending after a flush");
}

void Recorder::define_output(const at::Tensor& out, int value, const char* op) {
  std::lock_guard lock(Runtime::get().mutex());
  // A reshape writes nothing: its source lands in the buffer (same elements, same order). A
  // source that is a graph input, a part of another value, or already lands in another buffer,
  // is copied.
  while (graph_.node(value).kind == kernels::NodeKind::Reshape && !graph_.is_part(value)) {
    value = graph_.node(value).inputs[0];
  }
  if (graph_.node(value).kind == kernels::NodeKind::Input || graph_.is_part(value) || outputs_.count(value)) {
    value = graph_.cast(value, graph_.node(value).type.dtype, "copy");
  }
  auto& rt = Runtime::get();
  const uint64_t vaddr = storage_vaddr(out);
  Buffer& b = rt.buffer(vaddr);
  TORCH_INTERNAL_ASSERT(is_whole_buffer(out), "vtpu: ", op, ": outputs must be whole dense buffers");
  // Same elements in the same order; the shape may differ by size-1 dims (layer_norm's mean).
  TORCH_INTERNAL_ASSERT(graph_.node(value).type.numel() == out.numel());
  if (b.pending_value >= 0) outputs_.erase(b.pending_value);  // superseded: it may still feed pending nodes
  if (b.hbm) {
    // Pending nodes may read this buffer's current contents: give the new value fresh HBM and
    // retire the old block once they have run (renaming, so an in-place write never races).
    bool read = false;
    for (const auto& [v, addr] : input_address_) read |= addr >= *b.hbm && addr < *b.hbm + b.bytes;
    if (read) {
      retired_.push_back({b.device, *b.hbm});
      b.hbm.reset();
    }
  }
  b.pending_value = value;
  b.lost.clear();         // a whole new value
  b.int64_bound.reset();  // the op that knows its values' range says so (set_int64_bound)
  outputs_[value] = {vaddr, 0};
}

void Recorder::op_recorded() {
  auto& rt = Runtime::get();
  rt.stats().ops_recorded++;
  ++ops_;
  if (rt.runs_each_op_at_once()) flush();
}

void Recorder::forget_output(uint64_t vaddr) {
  for (auto it = outputs_.begin(); it != outputs_.end(); ++it) {
    if (it->second.vaddr == vaddr) {
      outputs_.erase(it);
      return;
    }
  }
}

void Recorder::reset() {
  graph_ = kernels::Graph{};
  input_address_.clear();
  input_values_.clear();
  input_storage_.clear();
  outputs_.clear();
  inputs_ready_at_ = 0;
  ops_ = 0;
}

void Recorder::flush() {
  std::lock_guard lock(Runtime::get().mutex());
  auto& rt = Runtime::get();
  if (graph_.nodes().empty()) return;
  if (outputs_.empty()) {  // every result died before anyone looked: nothing runs, no HBM
    rt.stats().ops_dead += ops_;
    reset();
    return;
  }
  for (const auto& [v, out] : outputs_) graph_.mark_output(v);
  sim::Device& device = rt.device(device_);
  const std::map<int, sim::HbmAddress>& bound = input_address_;
  std::shared_ptr<const kernels::Plan> plan;
  const auto planning_started = std::chrono::steady_clock::now();
  try {
    bool hit = false;
    plan = rt.plans().get_or_make(graph_, rt.fusion(), device.chip(), rt.cache(), &hit);
    (hit ? rt.stats().plan_cache_hits : rt.stats().plan_cache_misses)++;
  } catch (const kernels::KernelError& e) {
    abandon(std::string("the pending ops could not be lowered: ") + e.what());
    TORCH_CHECK(false, "vtpu: could not lower the pending ops: ", e.what());
  }
  rt.stats().planning_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - planning_started).count();
  refuse_unless_it_fits(*plan, device);
  PlanRun run;
  rt.wait_until(device_, inputs_ready_at_);  // the flush starts once its inputs have arrived
  const LaunchStart start = LaunchStart::now(device_);
  try {
    // Output buffers get HBM when the kernel writing them runs, like tensors allocated op by op.
    PlanExecution exec(device, *plan, bound, [&](int v) {
      const Output& out = outputs_.at(v);
      rt.buffer(out.vaddr).ready_at = 0;  // computed here, after anything that was in flight
      return rt.materialize(out.vaddr) + out.offset;
    }, [this](int v) { input_done(v); }, rt.progress_for(plan->launches.size()));
    run = exec.take_run();
  } catch (const pybind11::error_already_set&) {
    abandon("a KeyboardInterrupt stopped its flush");  // Ctrl-C abandoned the launch: the pending results are lost
    throw;
  } catch (const c10::OutOfMemoryError& e) {
    // An output found no HBM although the forecast fitted by bytes (fragmentation): the flush
    // stops there and, as after a kernel error, its pending results are lost, so the device is
    // usable again (tensors already given memory keep it).
    abandon(std::string("its flush ran out of HBM: ") + e.msg());
    TORCH_CHECK_WITH(OutOfMemoryError, false, e.msg(), " (at a flush: the pending results of this flush are lost)");
  } catch (const sim::SimError& e) {
    // Like a device-side assert: the pending results are lost (reading one raises) and the error
    // reaches the op that synchronised, not the one that caused it.
    abandon(std::string("a kernel of its flush failed: ") + e.what());
    TORCH_CHECK_INDEX(!(e.kind() == sim::SimErrorKind::Trap && e.trap_code() == kernels::trap_number(kernels::TrapCode::IndexOutOfRange)),
                      "index out of range in self (vtpu: an indexing kernel (index_select, embedding, x[idx], gather, scatter) "
                      "met an index outside its table; pending results are lost): ", e.what());
    TORCH_CHECK(!(e.kind() == sim::SimErrorKind::Trap && e.trap_code() == kernels::trap_number(kernels::TrapCode::Int64OutOfRange)),
                "vtpu: an int64 value is outside the range the chip computes int64 ops in (int64 math runs on "
                "int32 words: |value| < 2^30 for add/sub, < 2^31 otherwise; pending results are lost): ", e.what());
    const auto* launch = dynamic_cast<const LaunchFailure*>(&e);
    const std::string note = launch ? user_kernel_failure_note(launch->program(), e.what()) : std::string();
    TORCH_CHECK(false, "vtpu: a kernel failed on the chip (pending results are lost): ", e.what(),
                note.empty() ? "" : "\n", note);
  }
  count_launches(start, run);
  auto& s = rt.stats();
  s.flushes++;
  size_t live_nodes = 0;
  for (const auto& l : plan->launches) live_nodes += std::count(l.label.begin(), l.label.end(), '+') + 1;
  s.ops_fused_away += live_nodes - plan->launches.size();  // a launch run in pieces is still one kernel
  settle();
}

LaunchStart LaunchStart::now(int device) {
  Runtime::get().anchor_trace(device);
  const bool profiled = profiler::recording();
  return {device, Runtime::get().simulated_clock(device), profiled, profiled ? profiler::host_now_ns() : 0};
}

void count_launches(const LaunchStart& start, const PlanRun& run) {
  auto& rt = Runtime::get();
  auto& s = rt.stats();
  s.kernels_launched += run.launches;
  s.simulated_cycles += run.cycles;
  s.simulated_seconds += run.seconds;
  rt.advance_clock(start.device, run.seconds);
  if (start.profiled) profiler::note_launches(start.device, start.host_ns, start.simulated, run.timeline);
  s.hbm_read_bytes += run.hbm_read_bytes;
  s.hbm_write_bytes += run.hbm_write_bytes;
  s.held_vmem_bytes += run.held_vmem_bytes;
  s.intermediates_held += run.held_intermediates;
  s.intermediates_in_hbm += run.hbm_intermediates;
  for (const auto& [unit, busy] : run.busy_cycles_per_unit) s.busy_cycles_per_unit[unit] += busy;
  s.timing_memo_hits += run.memo_hits;
  if (rt.timing_only()) {
    for (const auto& [label, n] : run.data_dependent) s.timing_only_data_dependent[label] += n;
  }
  for (const auto& [label, profile] : run.per_kernel) s.per_kernel[label] += profile;
}

void Recorder::input_done(int value) {
  // Tensors that died while their data was pending (activations read by a deferred backward)
  // give their HBM back when their last reader has run, as in eager mode, not at the end of the
  // flush. Dropping this input's reference frees the storage (its deleter returns the HBM) when
  // it was the last one; a live tensor, or another input of the same storage not read yet,
  // keeps it. A buffer this flush also writes stays held to the end: its new value is landing.
  const auto it = input_storage_.find(value);
  if (it == input_storage_.end()) return;
  const Buffer* b = Runtime::get().find_buffer(reinterpret_cast<uint64_t>(it->second.data_ptr().get()));
  if (b && b->pending_value >= 0) return;
  input_storage_.erase(it);
}

void Recorder::abandon(const std::string& why) {
  auto& rt = Runtime::get();
  for (const auto& [v, out] : outputs_) rt.buffer(out.vaddr).lost = why;
  settle();
}

void Recorder::settle() {
  auto& rt = Runtime::get();
  for (const auto& [v, out] : outputs_) rt.buffer(out.vaddr).pending_value = -1;
  for (const auto& [d, addr] : retired_) rt.device(d).free(addr);
  retired_.clear();
  reset();
}

}  // namespace vtpu::bridge
