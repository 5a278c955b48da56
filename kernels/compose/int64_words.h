// Exact int64 arithmetic on a chip whose lanes hold 32 bits. An int64 tensor lives on the chip as
// torch stores it: little-endian int32 word pairs, i32[..., 2]. These helpers split the pairs into
// a low word (its bits read unsigned) and a high word (signed), and build 64-bit results from the
// VPU's int32 ops (wrapping add, signed compare, and, xor, logical shift), so an int64 result never
// depends on knowing how large the values are. Results wrap modulo 2^64 as torch's int64 does.
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/graph/graph.h"

namespace vtpu::kernels {

// One int64 value as two int32 values of the same shape.
struct Int64Words {
  int lo = -1;  // bits 0..31
  int hi = -1;  // bits 32..63: the sign
};

// i32[..., 2] word pairs (torch's int64 bytes) as words of shape [...]; and back.
Int64Words split_words(Graph& g, int pairs, const std::string& label);
int join_words(Graph& g, Int64Words w, const std::string& label);
// An int32, int8 or bool value, sign-extended.
Int64Words widen_to_int64(Graph& g, int x, const std::string& label);
// A constant of shape [1] (it broadcasts against any operand).
Int64Words int64_constant(Graph& g, int64_t value, const std::string& label);

Int64Words add_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label);
Int64Words sub_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label);
// a * b modulo 2^64 (torch's int64 product, wrapping): the low words' full 64-bit product from
// their 16-bit halves, whose partial products each fit 32 bits, plus the cross terms' low words.
Int64Words mul_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label);
// a < b and a == b, as bool values.
int less_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label);
int equal_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label);
Int64Words select_int64(Graph& g, int condition, Int64Words a, Int64Words b, const std::string& label);
// and, or, xor: word by word.
Int64Words bitwise_int64(Graph& g, ExprOp op, Int64Words a, Int64Words b, const std::string& label);

// An int32 word's two 16-bit halves, each read unsigned (0..65535: exact in f32, exact through an
// f32 scatter-add or row max), and the word back from them (high * 2^16 + low, wrapping).
struct WordHalves {
  int high = -1, low = -1;
};
WordHalves halves_of(Graph& g, int word, const std::string& label);
int word_from_halves(Graph& g, int high, int low, const std::string& label);

// The longest sum of bytes f32 holds exactly: 255 * n < 2^24.
inline constexpr int64_t kMaxExactByteSum = ((int64_t{1} << 24) - 1) / 255;

// A sum of int64 values (any reduction made of additions: a scan, a sum over dims), exact modulo
// 2^64: each of the eight bytes is reduced as an f32 plane by `reduce` (exact while it adds fewer
// than kMaxExactByteSum values), and the eight byte sums recombine with carries in int32.
Int64Words sum_int64_bytes(Graph& g, Int64Words x, const std::function<int(int f32_plane)>& reduce,
                           const std::string& label);

// The largest (or smallest) value of each row of `x` (words of shape [rows, width]) and the first
// position holding it (i32 [rows]), exact at any magnitude: x splits into four 16-bit digits, most
// significant first (the sign's digit biased so unsigned order is signed order), and each round
// takes an f32 row max (min) of one digit among the elements that tied on all digits before.
// `int32_values`: x is a sign-extended int32 whose high word carries nothing, so two rounds do.
struct RowExtreme {
  Int64Words value;  // [rows]
  int position;      // [rows], i32
};
RowExtreme row_extreme_int64(Graph& g, Int64Words x, bool max, bool int32_values, const std::string& label);

}  // namespace vtpu::kernels
