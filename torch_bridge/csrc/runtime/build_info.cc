// vtpu._C.build_info() and vtpu._C.chip_presets(): what `python -m vtpu` reports for a bug report
// (how this extension was built, and the chips it can simulate), straight from the build and
// the presets compiled into it, so the report cannot disagree with what runs.
#include <torch/extension.h>
#include <torch/version.h>

#include "sim/chip_config.h"

namespace vtpu::bridge {
namespace {

py::list vector_extensions() {
  py::list out;
#ifdef __SSE4_2__
  out.append("sse4.2");
#endif
#ifdef __AVX__
  out.append("avx");
#endif
#ifdef __AVX2__
  out.append("avx2");
#endif
#ifdef __FMA__
  out.append("fma");
#endif
#ifdef __AVX512F__
  out.append("avx512f");
#endif
#ifdef __ARM_NEON
  out.append("neon");
#endif
  return out;
}

py::dict build_info() {
  py::dict d;
  d["version"] = VTPU_VERSION;  // meson.build's project version, the one version string
  d["torch_version"] = TORCH_VERSION;
  d["compiler"] = __VERSION__;
  d["build_type"] = VTPU_BUILD_TYPE;
  d["sanitizers"] = VTPU_SANITIZE;
  d["vector_extensions"] = vector_extensions();
  return d;
}

py::list chip_presets() {
  py::list out;
  for (const auto& name : sim::preset_names()) {
    const auto c = sim::load_chip(name);
    py::dict d;
    d["name"] = c.name;
    d["description"] = c.description;
    d["clock_hz"] = c.clock_hz;
    d["tensor_cores"] = c.tensor_cores;
    d["mxu_per_core"] = c.mxu_per_core;
    d["mxu_dim"] = c.mxu_dim;
    d["peak_bf16_flops"] = c.peak_bf16_flops;
    d["hbm_bytes"] = c.hbm_bytes;
    d["hbm_bandwidth_bytes_per_s"] = c.hbm_bandwidth_bytes_per_s;
    d["hbm_efficiency"] = c.hbm_efficiency;
    d["vmem_bytes"] = c.vmem_bytes;
    d["ici_links"] = c.ici_links;
    d["ici_link_bandwidth_bytes_per_s"] = c.ici_link_bandwidth_bytes_per_s;
    d["ici_hop_latency_ns"] = c.ici_hop_latency_ns;
    out.append(d);
  }
  return out;
}

}  // namespace

void register_build_info(py::module& m) {
  m.def("build_info", &build_info);
  m.def("chip_presets", &chip_presets);
}

}  // namespace vtpu::bridge
