// vtpu._C.Slice: the interconnect's closed forms (sim/interconnect.h) for Python, and the
// simulated time of collective kernels, which the torch.distributed backend (vtpu.distributed)
// charges to the ranks' clocks.
#include <torch/extension.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "sim/interconnect.h"
#include "torch_bridge/csrc/runtime/collective_timing.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

// A collective kernel by name, and the chip it runs on (this process's when `chip` is empty).
std::pair<CollectiveKind, sim::ChipConfig> collective_of(const std::string& kind, const std::string& chip) {
  static const std::map<std::string, CollectiveKind> kinds{{"all_gather", CollectiveKind::AllGather},
                                                           {"reduce_scatter", CollectiveKind::ReduceScatter},
                                                           {"all_reduce", CollectiveKind::AllReduce},
                                                           {"all_to_all", CollectiveKind::AllToAll},
                                                           {"broadcast", CollectiveKind::Broadcast},
                                                           {"send", CollectiveKind::Send},
                                                           {"scatter", CollectiveKind::Scatter},
                                                           {"gather", CollectiveKind::Gather}};
  const auto it = kinds.find(kind);
  if (it == kinds.end()) throw std::invalid_argument("vtpu: no collective kernel named '" + kind + "'");
  return {it->second, chip.empty() ? Runtime::get().device(0).chip() : sim::load_chip(chip)};
}

}  // namespace

void register_slice(py::module& m) {
  py::class_<sim::Slice>(m, "Slice")
      // A slice of `axes` chips of preset `chip` (this process's chip when empty).
      .def(py::init([](std::vector<int> axes, const std::string& chip) {
             return sim::Slice(chip.empty() ? Runtime::get().device(0).chip() : sim::load_chip(chip), std::move(axes));
           }),
           py::arg("axes"), py::arg("chip") = "")
      .def_property_readonly("axes", &sim::Slice::axes)
      .def_property_readonly("wraps", &sim::Slice::wraps)
      .def_property_readonly("size", &sim::Slice::size)
      .def("coordinates", &sim::Slice::coordinates)
      .def("all_gather", &sim::Slice::all_gather, py::arg("output_bytes"))
      .def("reduce_scatter", &sim::Slice::reduce_scatter, py::arg("input_bytes"))
      .def("all_reduce", &sim::Slice::all_reduce, py::arg("nbytes"))
      .def("broadcast", &sim::Slice::broadcast, py::arg("nbytes"))
      .def("all_to_all", &sim::Slice::all_to_all, py::arg("input_bytes"))
      .def("point_to_point", &sim::Slice::point_to_point, py::arg("src"), py::arg("dst"), py::arg("nbytes"))
      .def("__repr__", [](const sim::Slice& s) {
        std::string axes;
        for (int n : s.axes()) axes += (axes.empty() ? "" : "x") + std::to_string(n);
        return "Slice(" + axes + ")";
      });
  m.def("parse_topology", &sim::parse_topology);
  // Seconds of a collective kernel run on a simulated slice (collective_timing.h); kind is
  // "all_gather", "reduce_scatter", "all_reduce", "all_to_all", "broadcast", "send" (from chip
  // `src` to chip `dst`), "scatter" (from root `src`) or "gather" (to root `dst`).
  m.def(
      "simulated_collective_seconds",
      [](const std::string& kind, std::vector<int> axes, const std::string& chip, double nbytes, int src, int dst) {
        const auto [k, preset] = collective_of(kind, chip);
        py::gil_scoped_release release;
        return simulated_collective(k, axes, preset, nbytes, src, dst).seconds;
      },
      py::arg("kind"), py::arg("axes"), py::arg("chip"), py::arg("nbytes"), py::arg("src") = 0, py::arg("dst") = 0);
  // The same collective's links leaving chip `from`: (link, [(start, end) seconds from its start]).
  m.def(
      "simulated_collective_links",
      [](const std::string& kind, std::vector<int> axes, const std::string& chip, double nbytes, int from, int src,
         int dst) {
        const auto [k, preset] = collective_of(kind, chip);
        std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> out;
        {
          py::gil_scoped_release release;
          for (auto& link : simulated_collective(k, axes, preset, nbytes, src, dst).links) {
            if (link.from == from) out.emplace_back(link.name, std::move(link.busy));
          }
        }
        return out;
      },
      py::arg("kind"), py::arg("axes"), py::arg("chip"), py::arg("nbytes"), py::arg("from"), py::arg("src") = 0,
      py::arg("dst") = 0);
}

}  // namespace vtpu::bridge
