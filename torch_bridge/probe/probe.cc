// The smallest PyTorch extension that proves the toolchain: built by Meson against the installed
// torch (no build isolation), it reports the torch version it was compiled for and runs one chip
// preset through sim:: so the bridge's link line (torch + vtpu_sim) is exercised end to end.
#include <torch/extension.h>

#include "sim/chip_config.h"

namespace {

std::string compiled_torch_version() { return TORCH_VERSION; }

double preset_peak_flops(const std::string& chip) {
  const auto config = vtpu::sim::load_chip(chip);
  return config.model_peak_flops(config.tensor_cores);
}

at::Tensor add_one(const at::Tensor& t) { return t + 1; }

}  // namespace

PYBIND11_MODULE(_vtpu_probe, m) {
  m.doc() = "vtpu toolchain probe";
  m.def("compiled_torch_version", &compiled_torch_version);
  m.def("preset_peak_flops", &preset_peak_flops);
  m.def("add_one", &add_one);
}
