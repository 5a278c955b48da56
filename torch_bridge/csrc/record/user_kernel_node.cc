// vtpu._C.record_user_kernel: a user's kernel (vtpu.pallas) as a node of the pending graph in
// defer_and_fuse, so it is one more launch of the next flush (planned with the graph's memory,
// the kernels before and after it left pending) rather than a sync point. Each kernel source is
// assembled once; the program lives as long as the process, which names it in plan signatures.
#include <torch/extension.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "isa/asm_error.h"
#include "isa/assembler.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

std::shared_ptr<const isa::Program> program_of(const std::string& source) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<const isa::Program>> programs;
  std::lock_guard lock(mutex);
  auto& p = programs[source];
  if (!p) {
    try {
      p = std::make_shared<const isa::Program>(isa::assemble(source, "kernel"));
    } catch (const isa::AsmError& e) {
      programs.erase(source);
      TORCH_CHECK_VALUE(false, "vtpu: the kernel does not assemble: ", e.what());
    }
  }
  return p;
}

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
}

}  // namespace vtpu::bridge
