// Shared fixture: assemble a source (or take a Program), put host buffers in HBM, run it on a
// SimDevice, read every buffer back.
#pragma once

#include <cstring>
#include <string>
#include <vector>

#include "isa/assembler.h"
#include "sim/sim_device.h"

namespace vtpu::testing {

struct HostBuffer {
  std::vector<uint8_t> bytes;
  template <typename T>
  static HostBuffer of(const std::vector<T>& values) {
    HostBuffer b;
    b.bytes.resize(values.size() * sizeof(T));
    if (!b.bytes.empty()) std::memcpy(b.bytes.data(), values.data(), b.bytes.size());  // data() may be null when empty
    return b;
  }
  template <typename T>
  std::vector<T> as() const {
    std::vector<T> out(bytes.size() / sizeof(T));
    if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
    return out;
  }
};

struct Arg {
  bool is_buffer;
  HostBuffer buffer;
  int32_t scalar = 0;
  static Arg buf(HostBuffer b) { return {true, std::move(b), 0}; }
  static Arg val(int32_t v) { return {false, {}, v}; }
};

struct RunOutput {
  std::vector<HostBuffer> buffers;  // every argument, buffers read back after the run
  sim::LaunchResult result;
};

inline RunOutput run_program(const isa::Program& program, std::vector<Arg> args, const sim::ChipConfig& chip,
                             sim::SimOptions options = {}) {
  sim::SimDevice device(chip, options);
  std::vector<sim::KernelArg> kargs;
  std::vector<sim::HbmAddress> addrs;
  for (auto& a : args) {
    if (a.is_buffer) {
      const auto addr = device.allocate(a.buffer.bytes.size());
      device.copy_to_device(addr, a.buffer.bytes);
      kargs.push_back(sim::KernelArg::buffer(addr, a.buffer.bytes.size()));
      addrs.push_back(addr);
    } else {
      kargs.push_back(sim::KernelArg::value(a.scalar));
      addrs.push_back(0);
    }
  }
  RunOutput out;
  out.result = device.wait(device.launch(program, kargs));
  for (size_t i = 0; i < args.size(); ++i) {
    HostBuffer b;
    if (args[i].is_buffer) {
      b.bytes.resize(args[i].buffer.bytes.size());
      device.copy_to_host(b.bytes, addrs[i]);
    }
    out.buffers.push_back(std::move(b));
  }
  return out;
}

inline RunOutput run_program(const isa::Program& program, std::vector<Arg> args, const std::string& chip = "v5e",
                             sim::SimOptions options = {}) {
  return run_program(program, std::move(args), sim::load_chip(chip), options);
}

inline RunOutput run_program(const std::string& source, std::vector<Arg> args, const std::string& chip = "v5e",
                             sim::SimOptions options = {}, const isa::Defines& defines = {}) {
  return run_program(isa::assemble(source, "test", defines), std::move(args), chip, options);
}

}  // namespace vtpu::testing
