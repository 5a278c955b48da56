// vtpu._C.record_user_kernel: a user's kernel (vtpu.pallas) as a node of the pending graph in
// defer_and_fuse, so it is one more launch of the next flush (planned with the graph's memory,
// the kernels before and after it left pending) rather than a sync point. Each kernel source is
// assembled once; the program lives as long as the process, which names it in plan signatures.
// The front end notes each source's body line per instruction and its grid, so a failure names
// the body's statement and the grid step, whether the kernel ran at once or at a flush.
#include "torch_bridge/csrc/record/user_kernel_node.h"

#include <torch/extension.h>

#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "isa/asm_error.h"
#include "isa/assembler.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {
namespace {

// Where a kernel's instructions come from in the body (vtpu/pallas/call.py _instruction_lines).
struct SourceNotes {
  std::string name;
  std::vector<std::string> lines;  // per instruction: the body's file:line, "" for the grid loop and pipeline
  std::vector<int64_t> grid;
};

std::mutex mutex;
std::map<std::string, std::shared_ptr<const isa::Program>> programs;  // by source
std::map<std::string, SourceNotes> notes;                             // by source

std::string grid_index(int64_t step, const std::vector<int64_t>& grid) {  // row-major, the last dim fastest
  std::vector<int64_t> index(grid.size());
  for (size_t d = grid.size(); d-- > 0;) {
    index[d] = step % grid[d];
    step /= grid[d];
  }
  std::string out = "(";  // as Python prints the tuple
  for (size_t d = 0; d < index.size(); ++d) out += (d ? ", " : "") + std::to_string(index[d]);
  return out + (index.size() == 1 ? ",)" : ")");
}

std::string failure_note(const SourceNotes& n, const std::string& what) {
  std::smatch found;
  std::string where = "the pipeline around the body";
  if (std::regex_search(what, found, std::regex(R"(instruction (\d+))"))) {
    const size_t pc = std::stoul(found[1]);
    if (pc < n.lines.size() && !n.lines[pc].empty()) where = "the body's statement at " + n.lines[pc];
  }
  // The grid loop marks each step with its number.
  if (std::regex_search(what, found, std::regex(R"(after mark (\d+))"))) {
    where += ", at grid index " + grid_index(std::stoll(found[1]), n.grid);
  }
  return "(vtpu.pallas: kernel '" + n.name + "', in " + where + ")";
}

std::shared_ptr<const isa::Program> program_of(const std::string& source) {
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

void note_source(const std::string& source, const std::string& name, const std::vector<std::string>& lines,
                 const std::vector<int64_t>& grid) {
  std::lock_guard lock(mutex);
  notes[source] = {name, lines, grid};
}

std::string source_failure_note(const std::string& source, const std::string& what) {
  std::lock_guard lock(mutex);
  const auto it = notes.find(source);
  return it == notes.end() ? std::string() : failure_note(it->second, what);
}

}  // namespace

std::string user_kernel_failure_note(const isa::Program* program, const std::string& what) {
  std::lock_guard lock(mutex);
  for (const auto& [source, p] : programs) {
    if (p.get() != program) continue;
    const auto it = notes.find(source);
    return it == notes.end() ? std::string() : failure_note(it->second, what);
  }
  return {};
}

void register_user_kernel_nodes(py::module& m) {
  m.def("record_user_kernel", &record_user_kernel, py::arg("source"), py::arg("inputs"), py::arg("shape"),
        py::arg("dtype"));
  m.def("note_user_kernel", &note_source, py::arg("source"), py::arg("name"), py::arg("lines"), py::arg("grid"),
        "Notes a kernel source's body line per instruction and its grid, for its failures' messages.");
  m.def("user_kernel_failure_note", &source_failure_note, py::arg("source"), py::arg("error"),
        "Where in the body and the grid a noted kernel failed, from the chip's error ('' if not noted).");
}

}  // namespace vtpu::bridge
