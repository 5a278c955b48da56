// vtpu-run: assemble (or load) a program, run it on a simulated chip with arguments from .npy
// files, scalars or zero buffers, save buffers back, print the summary and write a trace.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

#include "isa/assembler.h"
#include "sim/bf16.h"
#include "sim/sim_device.h"
#include "sim/sim_error.h"
#include "sim/tools/npy.h"
#include "traces/summary.h"
#include "traces/trace_writer.h"

namespace {

using namespace vtpu;

constexpr const char* kUsage = R"(usage: vtpu-run PROG.s|PROG.vtpu [options]
  --chip NAME|FILE.json   chip preset (v4 v5e v5p v6e v7) or config file [v5e]
  --arg SPEC              next kernel argument, in order:
                            FILE.npy[:DTYPE]      buffer from a .npy file (DTYPE f32|bf16|i32|i8 on device)
                            zeros:DTYPE:DxDx..    zero-filled buffer of that shape
                            INT                   scalar
  --save N=FILE.npy       after the run, write buffer argument N (0-based) to FILE.npy
  --trace FILE.json       write a Perfetto / Chrome trace of the run
  --summary-json FILE     write the run summary as JSON
  -D NAME=VALUE           define an assembler symbol (e.g. -D M=512)
  --cores N               TensorCores that run the program [all of the chip's for a .multicore program, else 1]
  --check-uninit          error on reads of never-written VMEM
)";

struct BufferArg {
  std::string dtype;
  std::vector<int64_t> shape;
  sim::HbmAddress address = 0;
  uint64_t bytes = 0;
};

std::vector<int64_t> parse_shape(const std::string& text) {
  std::vector<int64_t> shape;
  std::stringstream ss(text);
  std::string dim;
  while (std::getline(ss, dim, 'x')) shape.push_back(std::stoll(dim));
  return shape;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error(fmt::format("cannot read '{}'", path));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Converts host array to the device dtype (only f32 -> bf16 narrows).
std::vector<uint8_t> to_device(const tools::NpyArray& a, const std::string& dtype) {
  if (dtype == a.dtype) return a.data;
  if (dtype == "bf16" && a.dtype == "f32") {
    std::vector<uint8_t> out(a.elements() * 2);
    for (int64_t i = 0; i < a.elements(); ++i) {
      float f;
      std::memcpy(&f, a.data.data() + 4 * i, 4);
      const uint16_t b = sim::f32_to_bf16_bits(f);
      std::memcpy(out.data() + 2 * i, &b, 2);
    }
    return out;
  }
  throw std::runtime_error(fmt::format("cannot convert a {} array to {}", a.dtype, dtype));
}

struct Options {
  std::string program_path, chip_name = "v5e", trace_path, summary_path;
  std::vector<std::string> arg_specs;
  std::vector<std::pair<int, std::string>> saves;
  isa::Defines defines;
  sim::SimOptions sim;
  bool help = false;  // -h/--help: print the usage and stop, whatever follows
};

Options parse_options(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(fmt::format("{} needs a value", a));
      return argv[++i];
    };
    if (a == "-h" || a == "--help") {
      o.help = true;
      return o;
    } else if (a == "--chip") o.chip_name = value();
    else if (a == "--arg") o.arg_specs.push_back(value());
    else if (a == "--trace") o.trace_path = value();
    else if (a == "--summary-json") o.summary_path = value();
    else if (a == "--cores") o.sim.cores = std::stoi(value());
    else if (a == "--check-uninit") o.sim.check_uninitialized = true;
    else if (a == "-D") {
      const std::string v = value();
      const size_t eq = v.find('=');
      if (eq == std::string::npos) throw std::runtime_error("-D takes NAME=VALUE");
      o.defines[v.substr(0, eq)] = std::stoll(v.substr(eq + 1), nullptr, 0);
    }
    else if (a == "--save") {
      const std::string v = value();
      const size_t eq = v.find('=');
      if (eq == std::string::npos) throw std::runtime_error("--save takes N=FILE.npy");
      o.saves.emplace_back(std::stoi(v.substr(0, eq)), v.substr(eq + 1));
    } else if (!a.empty() && a[0] == '-') {
      throw std::runtime_error(fmt::format("unknown option '{}'\n{}", a, kUsage));
    } else {
      o.program_path = a;
    }
  }
  return o;
}

// A .vtpu file is a serialised program; anything else is assembly text.
isa::Program load_program(const Options& o) {
  const std::string text = read_file(o.program_path);
  if (o.program_path.ends_with(".vtpu")) {
    return isa::deserialize({reinterpret_cast<const uint8_t*>(text.data()), text.size()});
  }
  try {
    return isa::assemble(text, o.program_path, o.defines);
  } catch (const isa::AsmError& e) {
    throw std::runtime_error(fmt::format("{}:{}", o.program_path, e.what()));
  }
}

// One --arg: zeros:DTYPE:SHAPE or FILE.npy[:DTYPE] become a buffer on the device (described in
// `b`), anything else a scalar.
sim::KernelArg bind_argument(sim::SimDevice& device, const std::string& spec, BufferArg& b) {
  if (spec.rfind("zeros:", 0) == 0) {
    const size_t colon = spec.find(':', 6);
    if (colon == std::string::npos) throw std::runtime_error(fmt::format("bad --arg '{}': zeros:DTYPE:SHAPE", spec));
    b.dtype = spec.substr(6, colon - 6);
    b.shape = parse_shape(spec.substr(colon + 1));
    b.bytes = tools::dtype_bytes(b.dtype);
    for (int64_t d : b.shape) b.bytes *= d;
    b.address = device.allocate(b.bytes);
    return sim::KernelArg::buffer(b.address, b.bytes);
  }
  if (spec.find(".npy") != std::string::npos) {
    const size_t colon = spec.rfind(':');
    const bool has_dtype = colon != std::string::npos && colon > spec.find(".npy");
    const tools::NpyArray array = tools::read_npy(has_dtype ? spec.substr(0, colon) : spec);
    b.dtype = has_dtype ? spec.substr(colon + 1) : array.dtype;
    b.shape = array.shape;
    const auto bytes = to_device(array, b.dtype);
    b.bytes = bytes.size();
    b.address = device.allocate(b.bytes);
    device.copy_to_device(b.address, bytes);
    return sim::KernelArg::buffer(b.address, b.bytes);
  }
  size_t used = 0;
  const long long v = std::stoll(spec, &used, 0);
  if (used != spec.size()) throw std::runtime_error(fmt::format("bad --arg '{}'", spec));
  return sim::KernelArg::value(static_cast<int32_t>(v));
}

// --save N=FILE.npy: buffer argument `index` read back (bf16 widened to f32) and written.
void save_argument(sim::SimDevice& device, const std::vector<BufferArg>& buffers, int index, const std::string& path) {
  if (index < 0 || index >= static_cast<int>(buffers.size()) || buffers[index].bytes == 0) {
    throw std::runtime_error(fmt::format("--save {}: argument {} is not a buffer", index, index));
  }
  const BufferArg& b = buffers[index];
  std::vector<uint8_t> raw(b.bytes);
  device.copy_to_host(raw, b.address);
  tools::NpyArray out{b.dtype == "bf16" ? "f32" : b.dtype, b.shape, {}};
  if (b.dtype == "bf16") {
    out.data.resize(raw.size() * 2);
    for (size_t e = 0; e < raw.size() / 2; ++e) {
      uint16_t bits;
      std::memcpy(&bits, raw.data() + 2 * e, 2);
      const float f = sim::bf16_bits_to_f32(bits);
      std::memcpy(out.data.data() + 4 * e, &f, 4);
    }
  } else {
    out.data = std::move(raw);
  }
  tools::write_npy(path, out);
  std::cout << fmt::format("saved argument {} to {}\n", index, path);
}

int run(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  if (o.help) {
    std::cout << kUsage;
    return 0;
  }
  if (o.program_path.empty()) {
    std::cerr << kUsage;
    return 2;
  }
  const isa::Program program = load_program(o);
  sim::SimDevice device(sim::load_chip(o.chip_name), o.sim);
  traces::TraceRecorder recorder;
  if (!o.trace_path.empty()) device.set_trace(&recorder);
  std::vector<sim::KernelArg> args;
  std::vector<BufferArg> buffers(o.arg_specs.size());
  for (size_t i = 0; i < o.arg_specs.size(); ++i) args.push_back(bind_argument(device, o.arg_specs[i], buffers[i]));
  const sim::LaunchResult result = device.wait(device.launch(program, args));
  std::cout << traces::render_text(result.summary);
  for (const auto& [index, path] : o.saves) save_argument(device, buffers, index, path);
  if (!o.trace_path.empty()) {
    traces::write_chrome_trace(recorder, device.chip().clock_hz, o.trace_path);
    std::cout << fmt::format("trace: {} (open in ui.perfetto.dev)\n", o.trace_path);
  }
  if (!o.summary_path.empty()) {
    std::ofstream(o.summary_path) << traces::to_json(result.summary).dump(2) << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "vtpu-run: " << e.what() << "\n";
    return 1;
  }
}
