#include "torch_bridge/csrc/record/user_kernel_sources.h"

#include <c10/util/Exception.h>

#include <map>
#include <mutex>
#include <regex>

#include "isa/asm_error.h"
#include "isa/assembler.h"

namespace vtpu::bridge {
namespace {

// Where a kernel's instructions come from in the body (vtpu/pallas/call.py _instruction_lines).
struct SourceNotes {
  std::string name;
  std::vector<std::string> lines;
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

std::string note_for(const std::string& source, const std::string& what) {  // under the mutex
  const auto it = notes.find(source);
  return it == notes.end() ? std::string() : failure_note(it->second, what);
}

}  // namespace

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

void note_user_kernel_source(const std::string& source, const std::string& name, const std::vector<std::string>& lines,
                             const std::vector<int64_t>& grid) {
  std::lock_guard lock(mutex);
  notes[source] = {name, lines, grid};
}

std::string user_kernel_failure_note(const std::string& source, const std::string& what) {
  std::lock_guard lock(mutex);
  return note_for(source, what);
}

std::string user_kernel_failure_note(const isa::Program* program, const std::string& what) {
  std::lock_guard lock(mutex);
  for (const auto& [source, p] : programs) {
    if (p.get() == program) return note_for(source, what);
  }
  return {};
}

}  // namespace vtpu::bridge
