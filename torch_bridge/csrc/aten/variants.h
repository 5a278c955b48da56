// The in-place and out= overloads of an op, generated from its one functional lowering, so an op
// family's registration table names each variant as a row of the same lowering:
//   m.impl("cumsum.out", Variants<tpu_cumsum>::out);   m.impl("relu_", Variants<tpu_relu>::inplace);
// Both write the functional result into an existing tensor after torch's cast check (a float
// result is refused, not truncated, by an integer tensor); out= resizes as torch resizes outputs.
#pragma once

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {

// torch's rule for writing a result into an existing tensor, with torch's message.
inline void check_castable(const at::Tensor& result, const at::Tensor& dest) {
  TORCH_CHECK(at::canCast(result.scalar_type(), dest.scalar_type()), "result type ", result.scalar_type(),
              " can't be cast to the desired output type ", dest.scalar_type());
}

// `result` written into self's buffer (renamed if pending work reads it).
inline at::Tensor& write_inplace(at::Tensor& self, const at::Tensor& result) {
  check_castable(result, self);
  self.copy_(result);
  return self;
}

// torch's checks on an out= tensor against the op's inputs (TensorIterator's): out may not have
// elements that share memory, nor share some (not all) of an input's. An input that is `out`
// itself is fine: the functional result is computed before out is written.
inline void check_out_overlap(const at::Tensor& out, const at::Tensor& in) {
  if (in.defined()) at::assert_no_partial_overlap(out, in);
}
inline void check_out_overlap(const at::Tensor& out, const std::optional<at::Tensor>& in) {
  if (in) check_out_overlap(out, *in);
}
inline void check_out_overlap(const at::Tensor& out, at::TensorList ins) {
  for (const auto& in : ins) check_out_overlap(out, in);
}
template <typename NotATensor>
void check_out_overlap(const at::Tensor&, const NotATensor&) {}

// The stricter rule of ops that read their inputs by index (gather, index_select, take,
// masked_select, cat): out may share no memory with an input at all, not even all of one, since
// torch's kernels write out while still reading the inputs.
inline void check_out_apart(const at::Tensor& out, const at::Tensor& in) {
  if (in.defined()) at::assert_no_overlap(out, in);
}
template <typename NotATensor>
void check_out_apart(const at::Tensor&, const NotATensor&) {}

// `result` written into `out`, resized to its shape first.
inline at::Tensor& write_into_out(at::Tensor& out, const at::Tensor& result) {
  check_castable(result, out);
  return write_out(out, result);
}

template <auto Functional>
struct Variants;

template <typename First, typename... Rest, at::Tensor (*F)(First, Rest...)>
struct Variants<F> {
  // out=: every argument of the functional, then `out`.
  static at::Tensor& out(First first, Rest... rest, at::Tensor& out) {
    at::assert_no_internal_overlap(out);
    check_out_overlap(out, first);
    (check_out_overlap(out, rest), ...);
    return write_into_out(out, F(first, rest...));
  }
  // out= of an op that reads by index (check_out_apart) and, as torch's structured kernels do,
  // takes its result's dtype exactly: no cast into out.
  static at::Tensor& out_apart(First first, Rest... rest, at::Tensor& out) {
    at::assert_no_internal_overlap(out);
    check_out_apart(out, first);
    (check_out_apart(out, rest), ...);
    const at::Tensor result = F(first, rest...);
    TORCH_CHECK(result.scalar_type() == out.scalar_type(), "Expected out tensor to have dtype ", result.dtype(), ", but got ",
                out.dtype(), " instead");
    return write_out(out, result);
  }
  // In-place: the functional of self and the rest, written back into self.
  static at::Tensor& inplace(at::Tensor& self, Rest... rest) { return write_inplace(self, F(self, rest...)); }
};

}  // namespace vtpu::bridge
