// Complex tensors as the chip holds them: interleaved (real, imaginary) f32 pairs, the bytes of
// torch's complex64. The chip has no complex arithmetic, so a complex op is computed on the two
// f32 planes of view_as_real with lowered f32 ops (each recorded, fused at the flush like any
// other); ops without a rule here run on the CPU where the user allowed it, else raise naming
// the op. Math bits (a conjugate view, a negative view) are honoured wherever values are read.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <optional>
#include <string_view>

#include "kernels/graph/graph.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge::complex {

// Whether an op over these operands computes in complex numbers (an operand or the promoted
// result is complex).
bool involved(const at::Tensor& a, const at::Tensor& b = {});

// The pointwise family's complex rules: neg, exp, log, abs, reciprocal, add, sub, mul, div, eq,
// ne. Others decline as the op's CPU function (fallback) or NotImplementedError.
at::Tensor unary(const char* op, kernels::ExprOp e, const at::Tensor& self, const CpuFn& cpu);
at::Tensor binary(const char* op, kernels::ExprOp e, const at::Tensor& self, const at::Tensor& other,
                  const at::Scalar& alpha, const CpuFn& cpu);
// The composed elementary functions (composed_math.cc's table) on complex64, by name: sinh, cosh,
// tan, expm1, exp2, log2 and log10 with torch's CPU formulas; nullopt for the others.
std::optional<at::Tensor> elementary(std::string_view op, const at::Tensor& z);
// complex_functions.cc: asin, acos, atan, asinh, acosh, atanh (Kahan's formulas) and log1p by
// name (nullopt for others); pow, logaddexp and the product along one dim, as torch's CPU computes them.
std::optional<at::Tensor> inverse_function(std::string_view op, const at::Tensor& z);
at::Tensor pow(const at::Tensor& base, const at::Tensor& exponent);
at::Tensor logaddexp(const at::Tensor& x, const at::Tensor& y);
at::Tensor product(const at::Tensor& z, int64_t dim, bool keepdim);
// A real-linear op (a sum, a mean) applied to each plane; a real-bilinear one (a matmul) as
// (re re - im im, re im + im re), terms with a real operand's zero plane skipped.
at::Tensor linear(const at::Tensor& z, const std::function<at::Tensor(const at::Tensor&)>& f);
at::Tensor bilinear(const at::Tensor& x, const at::Tensor& y,
                    const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& f);

// Data movement (gathers, padding, index) moves each complex element's two f32 parts together:
// the [.., 2] pairs of view_as_real (math bits applied first), and the complex tensor of moved
// pairs (their trailing 2 kept last). per_plane runs `f` on each plane (part 0: re, 1: im).
at::Tensor as_pairs(const at::Tensor& z);
at::Tensor from_pairs(const at::Tensor& pairs);
at::Tensor per_plane(const at::Tensor& z, const std::function<at::Tensor(const at::Tensor&, int part)>& f);
// The complex64 tensor of two f32 planes, broadcast to one shape (an undefined `im` is zero).
at::Tensor join(const at::Tensor& re, const at::Tensor& im);
// Part `which` (0: re, 1: im) of `t` as an f32 tensor (math bits applied); a real t's own values
// or zeros.
at::Tensor part(const at::Tensor& t, int which);

// Whether each complex element is nonzero (either part): its truth for logical ops, nonzero, all
// and any.
at::Tensor truth(const at::Tensor& z);

// fill_ of a complex tensor with a complex value.
void fill(const at::Tensor& self, const c10::complex<double>& value);
at::Tensor where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other, const CpuFn& cpu);

// dst's values := src's values on the chip when either is complex or carries a math bit (conj,
// neg); false when neither does (the caller's ordinary copy applies).
bool copy_values(const at::Tensor& dst, const at::Tensor& src);

// A tensor's values without math bits: a conjugate view or a negative view made physical
// (on the chip for device tensors); others unchanged.
at::Tensor resolved(const at::Tensor& t);

}  // namespace vtpu::bridge::complex
