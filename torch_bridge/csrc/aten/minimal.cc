// The registrations every PrivateUse1 backend needs: tensor creation, views (metadata only),
// resize, copies between host and device, reading a scalar, set_. Copies and scalar reads are
// sync points: pending work on the device lands first.
#include <ATen/ATen.h>

#include <ATen/EmptyTensor.h>
#include <ATen/native/CPUFallback.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/as_strided_cpu_dispatch.h>
#include <ATen/ops/set_cpu_dispatch.h>
#include <torch/library.h>

#include <limits>

#include "torch_bridge/csrc/aten/complex.h"
#include "torch_bridge/csrc/record/layout.h"
#include "torch_bridge/csrc/aten/int64.h"
#include "torch_bridge/csrc/record/op_support.h"
#include "torch_bridge/csrc/record/recorder.h"
#include "torch_bridge/csrc/runtime/runtime.h"

namespace vtpu::bridge {
namespace {

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> memory_format) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "vtpu: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "vtpu: pinned memory is a CPU notion");
  const c10::DeviceGuard guard(c10::device_or_default(device));
  constexpr c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_generic(size, at::GetAllocator(at::kPrivateUse1), keys, c10::dtype_or_default(dtype), memory_format);
}

// The zeros backward formulas return for an input they do not reach (sgn's of a real input): a
// zero-filled tensor. torch's CPU and CUDA kernels make a storage-free ZeroTensor, an optimisation
// with the same values; the chip's filled zeros are one fusable fill.
at::Tensor efficient_zero_tensor(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                                 std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                                 std::optional<bool> pin_memory) {
  return at::zeros(size, at::TensorOptions().dtype(dtype).layout(layout).device(device).pinned_memory(pin_memory));
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device, std::optional<bool> pin_memory) {
  TORCH_CHECK(c10::layout_or_default(layout) == c10::Layout::Strided, "vtpu: only strided tensors");
  TORCH_CHECK(!c10::pinned_memory_or_default(pin_memory), "vtpu: pinned memory is a CPU notion");
  const c10::DeviceGuard guard(c10::device_or_default(device));
  constexpr c10::DispatchKeySet keys(c10::DispatchKey::PrivateUse1);
  return at::detail::empty_strided_generic(size, stride, at::GetAllocator(at::kPrivateUse1), keys, c10::dtype_or_default(dtype));
}

at::Tensor as_strided(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride,
                      std::optional<c10::SymInt> offset) {
  return at::cpu::as_strided_symint(self, size, stride, std::move(offset));
}

at::Tensor view(const at::Tensor& self, c10::SymIntArrayRef size) {
  return at::native::view(self, C10_AS_INTARRAYREF_SLOW(size));
}

at::Tensor reshape_alias(const at::Tensor& self, c10::SymIntArrayRef size, c10::SymIntArrayRef stride) {
  return at::native::_reshape_alias(self, C10_AS_INTARRAYREF_SLOW(size), C10_AS_INTARRAYREF_SLOW(stride));
}

// Growing the storage is done here: at::native::resize_ would copy the old bytes with a host
// memcpy, and a device buffer's address is not host memory. The storage (shared with every view
// of it, as torch's resize_ keeps it) gets a larger buffer holding the old bytes, copied on the
// chip; at::native::resize_ then only sets sizes and strides.
const at::Tensor& resize(const at::Tensor& self, c10::SymIntArrayRef size, std::optional<at::MemoryFormat> format) {
  const auto sizes = C10_AS_INTARRAYREF_SLOW(size);
  const uint64_t needed = uint64_t(self.storage_offset() + c10::multiply_integers(sizes)) * self.dtype().itemsize();
  c10::StorageImpl* storage = self.storage().unsafeGetStorageImpl();
  if (needed > storage->nbytes()) {
    TORCH_CHECK(storage->resizable(), "vtpu: resize_ of a tensor whose storage is not resizable");
    c10::Storage grown(c10::Storage::use_byte_size_t(), needed, storage->allocator(), true);
    const auto bytes = [&](const c10::Storage& s, int64_t n) {
      return at::empty({0}, self.options().dtype(at::kByte)).set_(s, 0, {n}, {1});
    };
    const int64_t old_bytes = static_cast<int64_t>(storage->nbytes());
    if (old_bytes > 0) bytes(grown, old_bytes).copy_(bytes(self.storage(), old_bytes));
    storage->set_data_ptr_noswap(grown.unsafeGetStorageImpl()->set_data_ptr(at::DataPtr()));
    storage->set_nbytes(needed);
  }
  return at::native::resize_(self, sizes, format);
}

// Host copy of a device tensor's elements, in its own strides (pending work lands first). A
// conjugate or negative view comes back as the same view of the host copy, so the CPU's copy
// applies the bit.
at::Tensor to_host(const at::Tensor& src) {
  if (src.is_conj()) return to_host(src.conj()).conj();
  if (src.is_neg()) return at::_neg_view(to_host(at::_neg_view(src)));
  auto& rt = Runtime::get();
  const int device = src.device().index();
  Recorder::of(device).flush();
  const uint64_t vaddr = storage_vaddr(src);
  const Buffer& b = rt.buffer(vaddr);
  check_not_lost(b);
  rt.wait_until(device, b.ready_at);  // the host reads it once it has arrived
  at::Tensor storage_copy = at::empty({static_cast<int64_t>(b.bytes)}, at::TensorOptions().dtype(at::kByte));
  if (b.bytes > 0) {
    rt.device(device).copy_to_host({storage_copy.data_ptr<uint8_t>(), b.bytes}, rt.materialize(vaddr));
    rt.stats().device_to_host_bytes += b.bytes;
  }
  return at::empty({0}, src.options().device(at::kCPU))
      .set_(storage_copy.storage(), src.storage_offset(), src.sizes(), src.strides());
}

// Writes host data into a device tensor (pending work lands first, so nothing overwrites it).
// The largest |value| among int64 data written from the host (nullopt: INT64_MIN, whose
// magnitude has no int64).
std::optional<int64_t> host_int64_bound(const at::Tensor& host) {
  if (host.numel() == 0) return 0;
  const at::Tensor v = host.to(at::kLong);
  const int64_t lo = v.min().item<int64_t>(), hi = v.max().item<int64_t>();
  if (lo == std::numeric_limits<int64_t>::min()) return std::nullopt;
  return std::max(-lo, hi);
}

void from_host(const at::Tensor& dst, const at::Tensor& given) {
  if (dst.is_conj()) return from_host(dst.conj(), given.conj());  // the stored values: conjugated
  if (dst.is_neg()) return from_host(at::_neg_view(dst), at::_neg_view(given));
  const at::Tensor host = given.resolve_conj().resolve_neg();  // raw bytes go over: apply the bits
  auto& rt = Runtime::get();
  const int device = dst.device().index();
  Recorder::of(device).flush();
  const uint64_t vaddr = storage_vaddr(dst);
  Buffer& b = rt.buffer(vaddr);
  {
    const std::optional<int64_t> written = dst.scalar_type() == at::kLong ? host_int64_bound(host) : std::nullopt;
    if (is_whole_buffer(dst)) {
      b.int64_bound = written;
      b.lost.clear();  // a whole new value
    }
    else b.int64_bound = b.int64_bound && written ? std::optional(std::max(*b.int64_bound, *written)) : std::nullopt;
  }
  const uint64_t offset = dst.storage_offset() * dst.element_size();
  if (dst.is_contiguous()) {
    const at::Tensor src = host.to(dst.scalar_type()).contiguous();
    if (src.nbytes() == 0) return;
    rt.device(device).copy_to_device(rt.materialize(vaddr) + offset,
                                     {static_cast<const uint8_t*>(src.data_ptr()), src.nbytes()});
    rt.stats().host_to_device_bytes += src.nbytes();
    return;
  }
  // A strided destination: read its storage, write through the strides on the host, write back.
  at::Tensor view = to_host(dst);
  view.copy_(host);
  rt.device(device).copy_to_device(rt.materialize(vaddr), {static_cast<const uint8_t*>(view.storage().data()), b.bytes});
  rt.stats().host_to_device_bytes += b.bytes;
  rt.stats().host_relayouts++;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool) {
  if (self.is_cpu()) {
    from_host(dst, self);
  } else if (dst.is_cpu()) {
    dst.copy_(to_host(self));
  } else if (self.device() != dst.device()) {
    // Chip to chip: the data goes through the host; the time is the interconnect's.
    from_host(dst, to_host(self));
    Runtime::get().copy_between_chips(self.device().index(), dst.device().index(), dst.nbytes());
  } else if (complex::copy_values(dst, self)) {
    // complex pairs or a conjugate / negative view: on the chip, through the f32 planes
  } else if (const auto order = dst.is_contiguous() || dst.sizes() != self.sizes() ? std::nullopt : dense_order(dst)) {
    // A dense dst in another dim order (empty_like of a transposed tensor, as .to(dtype) and
    // clone make): the same copy, both sides viewed in dst's order.
    copy_from(self.permute(*order), dst.permute(*order), false);
  } else if (is_whole_buffer(dst) && dst.sizes() == self.sizes() && chip_dtype(self.scalar_type()) &&
             chip_dtype(dst.scalar_type())) {
    record_copy(dst, self);  // on the chip: a (fusable) elementwise copy with any dtype conversion
  } else if (int64_copy_on_chip(dst, self)) {
    // int64 to int64, or to or from bool, int8 and int32 where the chip converts exactly
  } else {
    from_host(dst, to_host(self).expand(dst.sizes()));
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  at::native::resize_(dst, self.sizes(), std::nullopt);
  return copy_from(self, dst, false);
}

at::Scalar local_scalar_dense(const at::Tensor& self) { return to_host(self).item(); }

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& source) { return at::native::set_tensor_(self, source); }
at::Tensor& set_source_storage(at::Tensor& self, at::Storage source) { return at::native::set_(self, source); }
at::Tensor& set_source_storage_offset(at::Tensor& self, at::Storage storage, int64_t offset, c10::IntArrayRef size,
                                      c10::IntArrayRef stride) {
  return at::cpu::set_(self, storage, offset, size, stride);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("_efficientzerotensor", efficient_zero_tensor);
  m.impl("as_strided", as_strided);
  m.impl("view", view);
  m.impl("_reshape_alias", reshape_alias);
  m.impl("resize_", resize);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
}

// _copy_from applies a conjugate or negative view's bit itself (copy_from above), as copy_ and
// clone do: without these, torch's math-bit fallback would resolve the source with a clone,
// whose copy_ lands here again.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}

}  // namespace vtpu::bridge
