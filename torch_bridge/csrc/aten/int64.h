// int64 elementwise ops on the chip. Where the operands' magnitude is known small, their int32 words are narrowed on the chip (checked:
// kernels/generators/int64_narrow.h), the op runs in int32, and int64 results are widened back to word
// pairs. Add and sub need |values| < 2^30 (so no int32 sum wraps), comparisons, max/min and true
// division < 2^31, multiplication |a| * |b| < 2^31 as well. Operands run this way only when their
// magnitude is known to be below that (Buffer::int64_bound: host copies measure it, arange and
// these ops derive it); others stay on the CPU path, and the narrowing kernel's check traps should
// a bound ever be wrong. What position ids, cache positions and masks need; other ops stay on the
// CPU.
#pragma once

#include <ATen/ATen.h>

#include <optional>

#include "kernels/codegen/vector_expr.h"
#include "kernels/compose/int64_words.h"
#include "torch_bridge/csrc/record/op_support.h"

namespace vtpu::bridge {

// self (e) other with `alpha` scaling other, when an operand is an int64 tpu tensor and the op is
// one the words path runs; nullopt otherwise (the caller's path decides: usually the fallback).
std::optional<at::Tensor> int64_binary(const char* op, kernels::ExprOp e, const at::Tensor& self, const at::Tensor& other,
                                       double alpha, c10::ScalarType result_dtype, const CpuFn& cpu);

// int64_binary's path at any magnitude (int64_exact.cc): add, sub (alpha 1, or folded into a host
// scalar), comparisons, maximum, minimum and bitwise and/or/xor, computed on the word pairs
// (kernels/compose/int64_words.h). Operands: integer tpu tensors (narrower ones sign-extended) and
// integer host scalars; nullopt for others (a float operand: torch converts the int64 to it first).
std::optional<at::Tensor> int64_exact_binary(const char* op, kernels::ExprOp e, const at::Tensor& self, const at::Tensor& other,
                                             double alpha, c10::ScalarType result_dtype, const CpuFn& cpu);

// An integer tpu tensor as the input of an op computing on int64 words: an int64 tensor as its
// word pairs (int64_word_pairs), a narrower one as it is; and, in the recorded graph, the int64
// words that input's `value` holds (the pairs split, or the narrower values sign-extended).
at::Tensor integer_words_input(const at::Tensor& t);
kernels::Int64Words integer_words(kernels::Graph& g, const at::Tensor& t, int value, const char* op);

// The max (max) or min of a non-empty integer tpu tensor over `dims` (sorted): its values in
// self's dtype, or (position) the first flat position among the reduced elements holding them,
// int64 — in the kept dims' shape, exact at any magnitude (kernels/compose/int64_words.h:
// row_extreme_int64).
at::Tensor integer_extreme(const char* op, const at::Tensor& self, const std::vector<int64_t>& dims, bool max, bool position,
                           const CpuFn& cpu);

// -x, |x| or sign(x) of an int64 tpu tensor at any magnitude, on its word pairs (wrapping as
// torch's: -(-2^63) is -2^63).
enum class Int64Unary { Neg, Abs, Sign };
at::Tensor int64_exact_unary(const char* op, Int64Unary kind, const at::Tensor& self, const CpuFn& cpu);

// -x or |x| of an int64 tpu tensor: narrowed when its magnitude is known below 2^31 (the bound
// carries over), int64_exact_unary otherwise; nullopt for other tensors (the caller's path decides).
std::optional<at::Tensor> int64_sign_op(const char* op, kernels::ExprOp e, const at::Tensor& self, const CpuFn& cpu);

// where(condition, self, other) into an int64 result, for any values: each element's two int32
// words are selected together (a pure data movement, exact whatever the magnitude). Operands
// that are not int64 are converted first; host scalars are uploaded as one element.
at::Tensor int64_where(const at::Tensor& condition, const at::Tensor& self, const at::Tensor& other);

// The int64 sum of an integer tensor over `dims` (sorted): in f32 when that is exact for it (bool
// and int8 elements, or int64 ones of known magnitude, with |sum| < 2^24); otherwise int32 and
// int64 of any magnitude by eight byte planes (kernels/compose/int64_words.h), up to
// kMaxExactByteSum elements per sum. nullopt past that.
std::optional<at::Tensor> int64_sum(const at::Tensor& self, const std::vector<int64_t>& dims, const CpuFn& cpu);

// dst (a whole dense buffer) <- src on the chip when one of them is int64 and the conversion is
// exact there: a dense int64 source copied as its int32 words; bool, int8 and int32 widened to
// int64 words; int64 of known magnitude below 2^31
// narrowed (checked) and converted to f32, bf16, int32 or bool (int8 only within +-127: torch wraps
// where the chip would saturate). False when it is not: the caller copies through the host.
bool int64_copy_on_chip(const at::Tensor& dst, const at::Tensor& src);

// The cumulative sum along `dim` of an integer tensor on the chip (bool, int8, int32, int64) into
// `result`, exact and wrapping as torch's (kernels/compose/cumsum.h): into int64 by one f32 scan
// when every partial sum is known to stay below 2^24 (masks, counts: any length); else by byte
// planes scanned exactly, up to kMaxExactByteSum elements: int32 from int32 words (int64 of known
// magnitude below 2^31 narrowed), int64 from any of them (by int32 words when every partial sum is
// known to stay below 2^31, else by int64's eight byte planes). nullopt otherwise.
std::optional<at::Tensor> integer_cumsum(const at::Tensor& self, int64_t dim, c10::ScalarType result, const CpuFn& cpu);

}  // namespace vtpu::bridge
