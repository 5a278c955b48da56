// vtpu._C.run_assembly: a kernel written in vtpu assembly, run on tpu tensors. The user's program
// launches at once, after the device's pending work, with its `.arg`s bound in order: a tensor
// for each buffer (its bytes, in place: the kernel writes outputs the caller allocated), an int
// for each scalar. Its time joins the device's clock, vtpu.stats(), traces and the profiler like
// any kernel's. In debug mode the launch also checks reads of VMEM it never wrote (generated
// kernels read padding lanes on purpose, so only user kernels are checked).
#include <torch/csrc/autograd/variable.h>
#include <torch/extension.h>

#include <chrono>
#include <map>
#include <string>
#include <variant>

#include "isa/asm_error.h"
#include "isa/assembler.h"
#include "sim/sim_error.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

using Argument = std::variant<at::Tensor, int64_t>;

isa::Program assemble(const std::string& source, const std::map<std::string, int64_t>& defines) {
  isa::Defines d;
  for (const auto& [name, value] : defines) d[name] = value;
  try {
    return isa::assemble(source, "kernel", d);
  } catch (const isa::AsmError& e) {
    TORCH_CHECK_VALUE(false, "vtpu: the kernel does not assemble: ", e.what());
  }
}

// The device every tensor argument is on (they must agree).
int device_of(const isa::Program& p, const std::vector<Argument>& args) {
  int device = -1;
  for (size_t i = 0; i < args.size(); ++i) {
    const bool is_buffer = p.arguments[i].kind == isa::ArgumentKind::Buffer;
    TORCH_CHECK_TYPE(std::holds_alternative<at::Tensor>(args[i]) == is_buffer, "vtpu: kernel ", p.name, " argument ", i,
                     " ('", p.arguments[i].name, "') is a ", is_buffer ? "buffer: pass a tpu tensor" : "scalar: pass an int");
    if (!is_buffer) {
      const int64_t v = std::get<int64_t>(args[i]);
      TORCH_CHECK_VALUE(v >= INT32_MIN && v <= INT32_MAX, "vtpu: kernel ", p.name, " scalar argument '",
                        p.arguments[i].name, "' = ", v, " does not fit the chip's 32-bit scalar registers");
      continue;
    }
    const at::Tensor& t = std::get<at::Tensor>(args[i]);
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "vtpu: kernel ", p.name, " argument '",
                p.arguments[i].name, "' is on ", t.device(), "; kernels read tpu tensors");
    TORCH_CHECK(t.is_contiguous(), "vtpu: kernel ", p.name, " argument '", p.arguments[i].name,
                "' is not contiguous (the kernel addresses its bytes in order); pass .contiguous()");
    TORCH_CHECK(device < 0 || device == t.device().index(), "vtpu: kernel ", p.name,
                " has tensors on two devices (tpu:", device, " and ", t.device(), ")");
    device = t.device().index();
  }
  return device < 0 ? 0 : device;
}

// Runs without the GIL (the launch may take a while); the caller builds Python objects after.
sim::LaunchResult run_assembly(const isa::Program& program, const std::vector<Argument>& args) {
  TORCH_CHECK_VALUE(args.size() == program.arguments.size(), "vtpu: kernel ", program.name, " declares ",
                    program.arguments.size(), " arguments (.arg), was given ", args.size());
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  const int device = device_of(program, args);
  Recorder::of(device).flush();  // the kernel reads what pending work writes
  std::vector<sim::KernelArg> kernel_args;
  for (const Argument& a : args) {
    if (const auto* t = std::get_if<at::Tensor>(&a)) {
      const uint64_t vaddr = storage_vaddr(*t);
      Buffer& b = rt.buffer(vaddr);
      rt.wait_until(device, b.ready_at);
      b.int64_bound.reset();  // the kernel may write anything there
      const uint64_t offset = t->storage_offset() * t->element_size();
      kernel_args.push_back(sim::KernelArg::buffer(rt.materialize(vaddr) + offset, t->nbytes()));
    } else {
      kernel_args.push_back(sim::KernelArg::value(static_cast<int32_t>(std::get<int64_t>(a))));
    }
  }
  sim::Device& chip = rt.device(device);
  const LaunchStart start = LaunchStart::now(device);
  struct DebugChecks {  // on for this launch only, however it ends
    sim::Device& chip;
    DebugChecks(sim::Device& c, bool on) : chip(c) { chip.set_debug_checks(on); }
    ~DebugChecks() { chip.set_debug_checks(false); }
  } checks(chip, rt.mode() == Mode::Debug);
  sim::LaunchResult r;
  try {
    r = chip.wait(chip.launch(program, kernel_args));
  } catch (const sim::SimError& e) {
    TORCH_CHECK(false, "vtpu: kernel ", program.name, " failed on the chip: ", e.what());
  }
  // Every buffer may have been written: autograd must not reuse a value saved before.
  for (const Argument& a : args) {
    if (const auto* t = std::get_if<at::Tensor>(&a)) torch::autograd::impl::bump_version(*t);
  }
  PlanRun run;
  run.add(program.name, r);
  count_launches(start, run);
  return r;
}

py::dict run_assembly_source(const std::string& source, const std::vector<Argument>& args,
                             const std::map<std::string, int64_t>& defines) {
  const isa::Program program = assemble(source, defines);
  sim::LaunchResult r;
  {
    py::gil_scoped_release no_gil;
    r = run_assembly(program, args);
  }
  py::dict out;
  out["name"] = program.name;
  out["cycles"] = r.cycles;
  out["seconds"] = r.summary.seconds();
  out["hbm_read_bytes"] = r.summary.hbm_read_bytes;
  out["hbm_write_bytes"] = r.summary.hbm_write_bytes;
  return out;
}

}  // namespace

void register_assembly_kernels(py::module& m) {
  m.def("run_assembly", &run_assembly_source, py::arg("source"), py::arg("args"), py::arg("defines"));
}

}  // namespace vtpu::bridge
