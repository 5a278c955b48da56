// vtpu._C.record_user_kernel: a user's kernel (vtpu.pallas) as a node of the pending graph in
// defer_and_fuse, so it is one more launch of the next flush (planned with the graph's memory,
// the kernels before and after it left pending) rather than a sync point.
#include <torch/extension.h>

#include <string>
#include <vector>

#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/record/user_kernel_sources.h"

namespace vtpu::bridge {
namespace {

at::Tensor record_user_kernel(const std::string& source, const std::vector<at::Tensor>& inputs,
                              const std::vector<int64_t>& shape, at::ScalarType dtype) {
  const auto program = program_of(source);
  TORCH_CHECK_VALUE(!inputs.empty(), "vtpu: kernel ", program->name, " needs a tpu input to be recorded");
  const kernels::TensorType type{shape, to_kernel_dtype(dtype)};
  return record(program->name.c_str(), inputs, dtype,
                [&](kernels::Graph& g, const std::vector<int>& values) { return g.user_kernel(values, type, program); },
                [&](const std::vector<at::Tensor>&) -> at::Tensor {
                  TORCH_CHECK(false, "vtpu: kernel ", program->name, " runs on the chip only");
                });
}

}  // namespace

void register_user_kernel_nodes(py::module& m) {
  m.def("record_user_kernel", &record_user_kernel, py::arg("source"), py::arg("inputs"), py::arg("shape"),
        py::arg("dtype"));
  m.def("note_user_kernel", &note_user_kernel_source, py::arg("source"), py::arg("name"), py::arg("lines"), py::arg("grid"),
        "Notes a kernel source's body line per instruction and its grid, for its failures' messages.");
  m.def("user_kernel_failure_note",
        py::overload_cast<const std::string&, const std::string&>(&user_kernel_failure_note), py::arg("source"),
        py::arg("error"),
        "Where in the body and the grid a noted kernel failed, from the chip's error ('' if not noted).");
}

}  // namespace vtpu::bridge
