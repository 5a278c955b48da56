// Shared fixture for slice launches: each chip's host buffers put in its own HBM, one program run
// on every chip of a slice (sim/slice_launch.h), every buffer of every chip read back.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "isa/assembler.h"
#include "sim/slice_launch.h"
#include "support/run_program.h"

namespace vtpu::testing {

struct SliceOutput {
  std::vector<std::vector<HostBuffer>> chips;  // per chip, every argument (buffers read back)
  sim::SliceLaunchResult result;
};

// `args_of(c)`: chip c's arguments.
inline SliceOutput run_slice(const isa::Program& program, const sim::ChipConfig& chip, const sim::Slice& slice,
                             const std::function<std::vector<Arg>(int)>& args_of, sim::SimOptions options = {}) {
  std::vector<std::unique_ptr<sim::Hbm>> memories;
  std::vector<sim::Hbm*> hbms;
  std::vector<std::vector<Arg>> host(slice.size());
  std::vector<std::vector<sim::KernelArg>> kargs(slice.size());
  for (int c = 0; c < slice.size(); ++c) {
    memories.push_back(std::make_unique<sim::Hbm>(chip.hbm_bytes));
    hbms.push_back(memories.back().get());
    host[c] = args_of(c);
    for (auto& a : host[c]) {
      if (!a.is_buffer) {
        kargs[c].push_back(sim::KernelArg::value(a.scalar));
        continue;
      }
      const auto addr = hbms[c]->allocate(a.buffer.bytes.size());
      auto view = hbms[c]->view(addr, a.buffer.bytes.size(), "test buffer");
      std::copy(a.buffer.bytes.begin(), a.buffer.bytes.end(), view.begin());
      kargs[c].push_back(sim::KernelArg::buffer(addr, a.buffer.bytes.size()));
    }
  }
  SliceOutput out;
  out.result = sim::execute_slice(program, chip, slice, kargs, hbms, options);
  for (int c = 0; c < slice.size(); ++c) {
    std::vector<HostBuffer> buffers;
    for (size_t i = 0; i < host[c].size(); ++i) {
      HostBuffer b;
      if (host[c][i].is_buffer) {
        auto view = hbms[c]->view(kargs[c][i].address, kargs[c][i].bytes, "test buffer");
        b.bytes.assign(view.begin(), view.end());
      }
      buffers.push_back(std::move(b));
    }
    out.chips.push_back(std::move(buffers));
  }
  return out;
}

inline SliceOutput run_slice(const std::string& source, const sim::ChipConfig& chip, const sim::Slice& slice,
                             const std::function<std::vector<Arg>(int)>& args_of, sim::SimOptions options = {}) {
  return run_slice(isa::assemble(source, "test"), chip, slice, args_of, options);
}

}  // namespace vtpu::testing
