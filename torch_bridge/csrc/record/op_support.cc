#include "torch_bridge/csrc/record/op_support.h"

#include <ATen/MemoryOverlap.h>
#include <ATen/WrapDimUtils.h>
#include <c10/util/Exception.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <set>

#include "kernels/codegen/kernel_error.h"
#include "kernels/compose/int64_words.h"
#include "kernels/graph/fusion.h"
#include "kernels/graph/window_pieces.h"
#include "kernels/codegen/vreg_shape.h"
#include "torch_bridge/csrc/record/layout.h"
#include "torch_bridge/csrc/record/meta_check.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {

Reduction reduction_over(const at::Tensor& self, at::OptionalIntArrayRef dims_opt, bool keepdim) {
  TORCH_CHECK(self.dim() <= 64, "only tensors with up to 64 dims are supported");  // torch's dim mask is 64 bits
  Reduction r;
  if (dims_opt && !dims_opt->empty()) {
    for (int64_t d : *dims_opt) {
      const int64_t wrapped = at::maybe_wrap_dim(d, std::max<int64_t>(self.dim(), 1));
      TORCH_CHECK(std::find(r.dims.begin(), r.dims.end(), wrapped) == r.dims.end(), "dim ", wrapped,
                  " appears multiple times in the list of dims");
      r.dims.push_back(wrapped);
    }
  } else {
    for (int64_t d = 0; d < self.dim(); ++d) r.dims.push_back(d);
  }
  std::sort(r.dims.begin(), r.dims.end());
  r.dims.erase(std::unique(r.dims.begin(), r.dims.end()), r.dims.end());
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (std::find(r.dims.begin(), r.dims.end(), d) == r.dims.end()) r.shape.push_back(self.size(d));
    else if (keepdim) r.shape.push_back(1);
  }
  return r;
}

at::Tensor index_words(const at::Tensor& index) {
  at::Tensor flat = index.reshape({index.numel()});
  if (!flat.is_contiguous()) flat = flat.contiguous();  // a strided copy on the chip (int64: as word pairs)
  else if (flat.numel() <= 1 && flat.stride(0) != 1) flat = flat.as_strided({flat.numel()}, {1});  // one element or none: any stride is dense
  return index.scalar_type() == at::kLong ? flat.view(at::kInt).view({flat.numel(), 2}) : flat;
}

at::Tensor word_view(const at::Tensor& t) {
  std::vector<int64_t> sizes = t.sizes().vec(), strides;
  sizes.push_back(2);
  for (const int64_t s : t.strides()) strides.push_back(2 * s);
  strides.push_back(1);
  return at::empty({0}, t.options().dtype(at::kInt)).set_(t.storage(), 2 * t.storage_offset(), sizes, strides);
}

at::Tensor int64_word_pairs(const at::Tensor& t) {
  // Not view(kInt): torch calls a tensor whose last dim has one element contiguous whatever that
  // dim's stride, and view refuses to change the element size across such a stride.
  return word_view(t.contiguous());
}

kernels::TensorType tensor_type(const at::Tensor& t) {
  return {std::vector<int64_t>(t.sizes().begin(), t.sizes().end()), to_kernel_dtype(t.scalar_type())};
}

void warn_user(const std::string& message) {
  // Python's own warning at the innermost Python frame (the user's line that called the op);
  // torch's C++ warnings carry the C++ file instead. Callers hold no vtpu lock here: taking the
  // GIL while holding one could deadlock against a Python thread waiting for that lock.
  if (!Py_IsInitialized()) {
    TORCH_WARN(message);
    return;
  }
  pybind11::gil_scoped_acquire gil;
  if (PyErr_WarnEx(PyExc_UserWarning, message.c_str(), 1) < 0) throw pybind11::error_already_set();  // warnings as errors
}

at::Tensor run_on_cpu(const char* op, const std::vector<at::Tensor>& inputs, const CpuFn& cpu, const std::string& why) {
  return run_on_cpu_outputs(op, inputs, [&](const std::vector<at::Tensor>& c) { return std::vector<at::Tensor>{cpu(c)}; }, why)[0];
}

std::vector<at::Tensor> run_on_cpu_outputs(const char* op, const std::vector<at::Tensor>& inputs, const CpuOutputsFn& cpu,
                                           const std::string& why) {
  auto& rt = Runtime::get();
  if (!rt.cpu_fallback_allowed()) {
    raise_if_torch_rejects(inputs, cpu);
    TORCH_CHECK_NOT_IMPLEMENTED(false, "vtpu: aten::", op, " cannot run on the chip: ", why,
                                ". Set VTPU_CPU_FALLBACK=1 (or vtpu.set_cpu_fallback(True)) to run it on the CPU.");
  }
  c10::Device device = c10::Device(c10::DeviceType::PrivateUse1, 0);
  std::vector<at::Tensor> host;
  for (const auto& t : inputs) {
    if (t.device().is_privateuseone()) device = t.device();
    host.push_back(t.is_cpu() ? t : t.to(at::kCPU));
  }
  bool first = false;
  {
    std::lock_guard lock(rt.mutex());
    first = rt.stats().fallback_counts[std::string("aten::") + op]++ == 0;
    rt.stats().cpu_fallback_ops++;
  }
  if (first) warn_user(c10::str("vtpu: aten::", op, " runs on the CPU (", why, "); counted in vtpu.stats()"));
  std::vector<at::Tensor> results = cpu(host);
  for (auto& r : results) {
    if (r.defined()) r = r.to(device);
  }
  return results;
}

// An int8 or uint8 result computed in int32 vregs, wrapped to its byte as torch's arithmetic wraps
// it (200 + 100 is 44 in uint8). A store keeps the low byte anyway; this makes the value right
// for what reads it in the same kernel too ((a + b) < 50, ~x == 254). Other results pass as built.
int wrapped_to_bytes(kernels::Graph& g, int out, c10::ScalarType result_dtype, const char* op) {
  using kernels::DType;
  using kernels::ExprOp;
  const DType built = g.node(out).type.dtype;
  if ((result_dtype != at::kByte && result_dtype != at::kChar) || dtype_is_float(built) || built == DType::Bool) return out;
  const int low = g.byte_of(built == DType::I32 ? out : g.cast(out, DType::I32, op), 0, op);  // 0..255
  if (result_dtype == at::kByte) return low;
  return g.binary_scalar(ExprOp::Sub, g.binary_scalar(ExprOp::BitXor, low, 128, false, op), 128, false, op);  // -128..127
}

at::Tensor record(const char* op, const std::vector<at::Tensor>& inputs, c10::ScalarType result_dtype, const BuildFn& build,
                  const CpuFn& cpu) {
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  int device = -1;
  std::vector<at::Tensor> device_inputs;
  bool empty = false;
  for (const auto& t : inputs) {
    if (!t.device().is_privateuseone()) {
      TORCH_CHECK(is_cpu_scalar(t), "vtpu: aten::", op, ": expected all tensors on one tpu device, got one on ", t.device());
      continue;
    }
    empty |= t.numel() == 0;
    TORCH_CHECK(device < 0 || device == t.device().index(), "vtpu: aten::", op, ": tensors on tpu:", device, " and ",
                t.device(), " (move them to one device)");
    device = t.device().index();
    device_inputs.push_back(t);
  }
  TORCH_INTERNAL_ASSERT(device >= 0, "vtpu: aten::", op, " dispatched to tpu without a tpu tensor");
  if (empty) {  // no elements to move: the CPU computes the (possibly non-empty) result's shape and fill
    std::vector<at::Tensor> host;
    for (const auto& t : inputs) host.push_back(t.is_cpu() ? t : t.to(at::kCPU));
    return cpu(host).to(c10::Device(c10::DeviceType::PrivateUse1, device));
  }
  for (const auto& t : device_inputs) {
    if (!chip_dtype(t.scalar_type())) return run_on_cpu(op, inputs, cpu, c10::str(t.scalar_type(), " tensors"));
  }
  if (!chip_dtype(result_dtype)) return run_on_cpu(op, inputs, cpu, c10::str(result_dtype, " tensors"));
  Recorder& rec = Recorder::of(device);
  const std::vector<int> values = rec.values_of(device_inputs);
  kernels::Graph& g = rec.graph();
  const size_t mark = g.nodes().size();
  int out;
  try {
    out = wrapped_to_bytes(g, build(g, values), result_dtype, op);
    if (g.node(out).type.dtype != to_kernel_dtype(result_dtype)) out = g.cast(out, to_kernel_dtype(result_dtype));
    // A broadcast kernels cannot stream, or a tensor past the 2^31 elements one launch addresses,
    // would only fail at the flush, where nothing can fall back: check them here, per op. An
    // elementwise op over flat data runs in launches over ranges of it (window_pieces.h).
    for (size_t id = mark; id < g.nodes().size(); ++id) {
      const auto& n = g.node(static_cast<int>(id));
      if (n.type.numel() >= (int64_t{1} << 31) &&
          !(n.kind == kernels::NodeKind::Elementwise && kernels::streams_flat(g, {static_cast<int>(id)}, n.inputs))) {
        throw kernels::KernelError("a tensor too large for one launch");
      }
      if (n.kind != kernels::NodeKind::Elementwise) continue;
      for (int in : n.inputs) kernels::broadcast_layout(g.node(in).type.shape, n.type.shape);
    }
  } catch (const kernels::KernelError& e) {
    // The nodes added so far are unreachable from any output: the flush drops them.
    return run_on_cpu(op, inputs, cpu, e.what());
  }
  const auto& shape = g.node(out).type.shape;
  at::Tensor result = at::empty(shape, at::TensorOptions().dtype(result_dtype).device(c10::DeviceType::PrivateUse1, device));
  if (result.numel() == 0) return result;  // nothing to compute; the nodes stay dead
  rec.define_output(result, out, op);
  rec.op_recorded();
  return result;
}

at::Tensor record_elementwise(const char* op, const std::vector<at::Tensor>& inputs, c10::ScalarType result_dtype,
                              const BuildFn& build, const CpuFn& cpu) {
  at::DimVector shape;
  for (const auto& t : inputs) shape = at::infer_size_dimvector(shape, t.sizes());
  const DimOrder order = elementwise_order(inputs, shape);
  if (is_identity(order)) return record(op, inputs, result_dtype, build, cpu);
  std::vector<at::Tensor> ordered;
  for (const auto& t : inputs) ordered.push_back(in_order(t, order));
  return record(op, ordered, result_dtype, build, cpu).permute(inverse(order));
}

void record_copy(const at::Tensor& dst, const at::Tensor& src) {
  if (dst.numel() == 0) return;
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  Recorder& rec = Recorder::of(dst.device().index());
  const int v = rec.values_of({src})[0];
  // Same dtype: the source value itself lands in dst (define_output copies it only when it is a
  // graph input or already lands elsewhere), so x.contiguous() of a view is one strided copy.
  const kernels::DType dtype = to_kernel_dtype(dst.scalar_type());
  const int out = rec.graph().node(v).type.dtype == dtype ? v : rec.graph().cast(v, dtype, "copy_");
  rec.define_output(dst, out, "copy_");
  rec.op_recorded();
}

at::Tensor& write_out(at::Tensor& out, const at::Tensor& result) {
  if (!out.sizes().equals(result.sizes())) out.resize_(result.sizes());
  at::assert_no_internal_overlap(out);  // torch's check on every output (an expanded out= tensor)
  out.copy_(result);
  return out;
}

void fill_on_chip(const at::Tensor& t, double value) {
  if (t.numel() == 0) return;
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  if (!is_whole_buffer(t) || !chip_dtype(t.scalar_type())) {  // a slice, or a dtype without kernels: fill through the host
    const at::Tensor host = at::full(t.sizes(), value, t.options().device(at::kCPU));
    t.copy_(host);
    return;
  }
  define_on_chip(t, "fill_", [&](kernels::Graph& g) { return g.full(tensor_type(t), value); });
}

int int64_words(kernels::Graph& g, int v) {
  return kernels::join_words(g, kernels::widen_to_int64(g, v, "int64_words"), "int64_words");
}

std::optional<int64_t> int64_bound_of(const at::Tensor& t) { return Runtime::get().buffer(storage_vaddr(t)).int64_bound; }

void set_int64_bound(const at::Tensor& t, std::optional<int64_t> bound) {
  auto& rt = Runtime::get();
  std::lock_guard lock(rt.mutex());
  rt.buffer(storage_vaddr(t)).int64_bound = bound;
}

at::Tensor as_int64(const at::Tensor& words) {
  if (words.scalar_type() == at::kLong) return words;  // the CPU fallback made the real thing
  return words.view(at::kLong).squeeze(-1);
}

at::Tensor as_int64(const at::Tensor& words, int64_t bound) {
  at::Tensor out = as_int64(words);
  if (!out.is_same(words)) set_int64_bound(out, bound);
  return out;
}

at::Tensor int64_from_f32(const char* op, const at::Tensor& f, int64_t bound) {
  const at::Tensor words = record(op, {f}, at::kInt, [op](kernels::Graph& g, const std::vector<int>& v) {
    return int64_words(g, g.cast(v[0], kernels::DType::I32, op));
  }, [](const std::vector<at::Tensor>& c) { return c[0].to(at::kLong); });
  return as_int64(words, bound);
}

void define_on_chip(const at::Tensor& out, const char* op, const std::function<int(kernels::Graph&)>& build) {
  Recorder& rec = Recorder::of(out.device().index());
  const int v = build(rec.graph());
  rec.define_output(out, v, op);
  rec.op_recorded();
}

}  // namespace vtpu::bridge
