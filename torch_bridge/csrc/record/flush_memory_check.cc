// A flush whose run cannot fit in HBM is refused before any kernel runs. Tensors are counted when
// they are created (runtime.cc), so what only a flush can overrun is its own intermediates, the
// buffers its results land in, and HBM kept for pending readers; the forecast (plan_forecast.h)
// replays the run's allocations as byte counts. A refusal changes nothing: the pending ops stay
// recorded, so freeing tensors and reading a result again runs them. A run that fits by bytes
// but not by placement (fragmentation) still fails as it runs, its results lost (recorder.cc).
#include <c10/util/Exception.h>

#include <algorithm>

#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"
#include "torch_bridge/plan_runner/plan_forecast.h"

namespace vtpu::bridge {

namespace {

// A storage the flush holds as one or more inputs: input_done frees it after its last reader,
// when nothing else holds it.
struct HeldStorage {
  c10::Storage storage;
  int entries = 0;    // input values bound to it (each holds a reference)
  int last_step = 0;  // the last launch reading any of them; -1: one is never read
};

}  // namespace

ForecastCaller Recorder::forecast_caller(const kernels::Plan& plan, const sim::Device& device) const {
  auto& rt = Runtime::get();
  ForecastCaller caller;
  caller.output_bytes = [this, &rt](int v) -> uint64_t {
    const Buffer& b = rt.buffer(outputs_.at(v).vaddr);
    return b.hbm ? 0 : std::max<uint64_t>(b.bytes, 1);  // as materialize() allocates it
  };
  std::map<const c10::StorageImpl*, HeldStorage> held;
  for (const auto& [v, storage] : input_storage_) {
    HeldStorage& h = held.try_emplace(storage.unsafeGetStorageImpl(), HeldStorage{storage}).first->second;
    ++h.entries;
    const auto last = plan.memory.input_last_step.find(v);
    h.last_step = last == plan.memory.input_last_step.end() || h.last_step < 0 ? -1 : std::max(h.last_step, last->second);
  }
  for (const auto& [impl, h] : held) {
    const Buffer* b = rt.find_buffer(reinterpret_cast<uint64_t>(h.storage.data_ptr().get()));
    const bool freed = b && b->hbm && b->pending_value < 0 && h.last_step >= 0 &&
                       h.storage.use_count() == static_cast<size_t>(h.entries);
    if (freed) caller.released_after[h.last_step] += device.allocation_bytes(std::max<uint64_t>(b->bytes, 1));
  }
  return caller;
}

void Recorder::refuse_unless_it_fits(const kernels::Plan& plan, sim::Device& device) {
  const sim::MemoryStats now = device.memory_stats();
  // Every flush comes here (in strict_eager, every op): first the cheap bound, every intermediate
  // and every result without a buffer held at once, each a whole allocation unit larger. Only a
  // flush that bound does not clear pays for the forecast.
  const uint64_t unit = device.allocation_bytes(1);
  uint64_t most = now.allocated_bytes + plan.memory.total_bytes + plan.memory.intermediates.size() * unit;
  for (const auto& [v, out] : outputs_) {
    const Buffer& b = Runtime::get().buffer(out.vaddr);
    if (!b.hbm) most += b.bytes + unit;
  }
  if (most <= now.capacity_bytes) return;
  const HbmForecast f = forecast_hbm(plan, device, input_address_, forecast_caller(plan, device));
  if (f.peak_bytes <= now.capacity_bytes || f.peak_step < 0) return;
  graph_.clear_outputs();  // marked again, as far as they are still alive, when it is retried
  TORCH_CHECK_WITH(OutOfMemoryError, false, "vtpu: out of HBM on tpu:", device_, " (", Runtime::get().chip_name(),
                   "): the pending ops need at least ", f.peak_bytes, " bytes of HBM at their peak (kernel ",
                   f.peak_step + 1, " of ", plan.launches.size(), ", ", plan.launches[f.peak_step].label, "), more than its ",
                   now.capacity_bytes, " total (", now.allocated_bytes,
                   " held now). Nothing ran and the pending ops are kept: free tensors, then read the results again");
}

}  // namespace vtpu::bridge
