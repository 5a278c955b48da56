// vtpu._C.Slice: the interconnect's closed forms (sim/interconnect.h) for Python, where the
// torch.distributed backend (vtpu.distributed) charges each collective to the ranks' clocks.
#include <torch/extension.h>

#include "sim/interconnect.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {

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
}

}  // namespace vtpu::bridge
