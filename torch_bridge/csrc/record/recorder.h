// The pending graph of one device. Lowered aten ops append nodes here; a flush plans the graph
// (fusion + memory planning, programs from the cache), runs it, and writes the values whose
// tensors are still alive into their buffers. In strict_eager mode every op flushes at once.
#pragma once

#include <ATen/Tensor.h>

#include <map>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/graph/graph.h"
#include "sim/device.h"
#include "torch_bridge/plan_runner/plan_forecast.h"
#include "torch_bridge/plan_runner/plan_runner.h"

namespace vtpu::bridge {

class Recorder {
 public:
  static Recorder& of(int device);

  kernels::Graph& graph() { return graph_; }
  // The graph value holding `t`'s data: the pending value that will fill its buffer, or a graph
  // input bound to its HBM. Non-contiguous views are made dense first (through the host, counted).
  int value_of(const at::Tensor& t);
  // value_of for all of an op's inputs at once: if one of them needs the graph flushed first,
  // the flush happens before any value is taken, so all values belong to the same graph.
  std::vector<int> values_of(const std::vector<at::Tensor>& ts);
  // `out`'s buffer will hold `value` after the next flush. `out` is dense; when it is a slice of a
  // larger buffer, or its buffer is read by pending work, the graph is flushed around it.
  void define_output(const at::Tensor& out, int value, const char* op);
  // Notes one recorded aten op; flushes in strict mode.
  void op_recorded();
  void flush();
  void forget_output(uint64_t vaddr);  // the tensor died before the flush: its value is dead
  bool empty() const { return graph_.nodes().empty(); }

 private:
  explicit Recorder(int device) : device_(device) {}
  struct NeedsFlush {};
  struct Output {
    uint64_t vaddr;
    uint64_t offset;
  };
  void reset();
  // Ends a flush, run or failed: its outputs' buffers stop being pending, the HBM retired under
  // pending readers is freed, and the graph is cleared.
  void settle();
  // A failed flush: settle, and mark every result it would have written as lost (`why`), so that
  // reading one raises instead of returning whatever its buffer held.
  void abandon(const std::string& why);
  // After the last kernel reading input `value`: the flush stops holding its storage, so a storage
  // no tensor holds any more is freed then (and its HBM with it).
  void input_done(int value);
  // Throws torch.OutOfMemoryError, leaving the pending ops recorded, when the plan's run cannot
  // fit in HBM (flush_memory_check.cc); returns when it may.
  void refuse_unless_it_fits(const kernels::Plan& plan, sim::Device& device);
  ForecastCaller forecast_caller(const kernels::Plan& plan, const sim::Device& device) const;
  std::optional<int> strided_view(const at::Tensor& t);
  int bind_input(sim::HbmAddress hbm, const kernels::TensorType& type, const c10::Storage& storage, const char* label);
  int device_;
  kernels::Graph graph_;
  std::map<int, sim::HbmAddress> input_address_;     // graph input value -> HBM
  // (address, dtype, shape) -> value, to reuse inputs; not a formatted type string, which cost an
  // eager op a few percent of its host time.
  std::map<std::tuple<uint64_t, kernels::DType, std::vector<int64_t>>, int> input_values_;
  std::map<int, c10::Storage> input_storage_;       // input value -> its storage, alive while a flush may read it
  std::map<int, Output> outputs_;                    // value -> where it lands
  double inputs_ready_at_ = 0;                       // the latest arrival among the inputs' buffers
  std::vector<std::pair<int, sim::HbmAddress>> retired_;  // HBM replaced under pending readers, freed after the flush
  uint64_t ops_ = 0;
};

// Where a run of launches on a device began: the chip's simulated clock, and the host time when a
// profile records (profiler.h). Taken just before the launches.
struct LaunchStart {
  int device = 0;
  double simulated = 0;
  bool profiled = false;
  int64_t host_ns = 0;
  static LaunchStart now(int device);
};
// What every run of launches (a flush, a user's kernel) adds: its time to the device's clock and
// vtpu.stats() (kernels, cycles, HBM bytes, units, per kernel), its kernels to the profiler.
void count_launches(const LaunchStart& start, const PlanRun& run);

// The chip's dtype for a torch dtype; std::nullopt when the chip has no kernels for it.
std::optional<kernels::DType> chip_dtype(c10::ScalarType t);
kernels::DType to_kernel_dtype(c10::ScalarType t);  // throws NotImplementedError naming unsupported dtypes
uint64_t storage_vaddr(const at::Tensor& t);
// A dense tensor covering its whole buffer from the start (what a graph output may be).
bool is_whole_buffer(const at::Tensor& t);

}  // namespace vtpu::bridge
