#include "kernels/compose/int64_words.h"

#include <fmt/format.h>

#include <array>
#include <vector>

#include "kernels/codegen/kernel_error.h"

namespace vtpu::kernels {
namespace {

constexpr double kSignBit = -2147483648.0;  // int32 0x80000000

// x < y with both read as unsigned 32-bit: flipping the sign bit maps unsigned order onto signed.
int unsigned_less(Graph& g, int x, int y, const std::string& label) {
  return g.binary(ExprOp::Lt, g.binary_scalar(ExprOp::BitXor, x, kSignBit, false, label),
                  g.binary_scalar(ExprOp::BitXor, y, kSignBit, false, label), label);
}

int as_i32(Graph& g, int x, const std::string& label) {
  return g.node(x).type.dtype == DType::I32 ? x : g.cast(x, DType::I32, label);
}

// The word at `which` (0 low, 1 high) of every pair, as a dense value of the pairs' leading shape.
int word_of(Graph& g, int pairs, int which, const std::string& label) {
  const auto& shape = g.node(pairs).type.shape;
  std::vector<int64_t> sizes(shape.begin(), shape.end() - 1), strides(sizes.size());
  int64_t stride = 2;
  for (size_t k = sizes.size(); k-- > 0;) {
    strides[k] = stride;
    stride *= sizes[k];
  }
  if (sizes.empty()) return g.reshape(g.strided_copy(pairs, {1}, {2}, which, label), {}, label);
  return g.strided_copy(pairs, sizes, strides, which, label);
}

// sum of digits[k] * 256^k (each digit 0..255) in wrapping int32: the bytes of one word.
int word_from_bytes(Graph& g, const std::array<int, 4>& digits, const std::string& label) {
  int word = digits[0];
  for (int k = 1; k < 4; ++k) {
    word = g.binary(ExprOp::Add, word, g.binary_scalar(ExprOp::Mul, digits[k], double(int64_t{1} << (8 * k)), false, label), label);
  }
  return word;
}

}  // namespace

Int64Words split_words(Graph& g, int pairs, const std::string& label) {
  const TensorType& t = g.node(pairs).type;
  if (t.dtype != DType::I32 || t.shape.empty() || t.shape.back() != 2) {
    throw KernelError(fmt::format("{}: int64 words are i32[.., 2], not {}", label, to_string(t)));
  }
  return {word_of(g, pairs, 0, label), word_of(g, pairs, 1, label)};
}

int join_words(Graph& g, Int64Words w, const std::string& label) {
  auto shape = g.node(w.lo).type.shape;
  shape.push_back(1);
  return g.concat({g.reshape(w.lo, shape, label), g.reshape(w.hi, shape, label)}, static_cast<int64_t>(shape.size()) - 1, label);
}

Int64Words widen_to_int64(Graph& g, int x, const std::string& label) {
  const int lo = as_i32(g, x, label);
  return {lo, g.unary(ExprOp::Neg, g.cast(g.binary_scalar(ExprOp::Lt, lo, 0, false, label), DType::I32, label), label)};
}

Int64Words int64_constant(Graph& g, int64_t value, const std::string& label) {
  const auto bits = static_cast<uint64_t>(value);
  return {g.full({{1}, DType::I32}, static_cast<int32_t>(static_cast<uint32_t>(bits)), label),
          g.full({{1}, DType::I32}, static_cast<int32_t>(static_cast<uint32_t>(bits >> 32)), label)};
}

Int64Words add_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label) {
  const int lo = g.binary(ExprOp::Add, a.lo, b.lo, label);
  const int carry = unsigned_less(g, lo, a.lo, label);  // the low words' sum wrapped past 2^32
  const int hi = g.binary(ExprOp::Add, g.binary(ExprOp::Add, a.hi, b.hi, label), g.cast(carry, DType::I32, label), label);
  return {lo, hi};
}

Int64Words sub_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label) {
  const int lo = g.binary(ExprOp::Sub, a.lo, b.lo, label);
  const int borrow = unsigned_less(g, a.lo, b.lo, label);
  const int hi = g.binary(ExprOp::Sub, g.binary(ExprOp::Sub, a.hi, b.hi, label), g.cast(borrow, DType::I32, label), label);
  return {lo, hi};
}

Int64Words mul_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label) {
  const auto add = [&](int x, int y) { return g.binary(ExprOp::Add, x, y, label); };
  const auto mul = [&](int x, int y) { return g.binary(ExprOp::Mul, x, y, label); };  // int32, wrapping
  const auto high16 = [&](int w) { return g.binary_scalar(ExprOp::Shr, w, 16, false, label); };  // logical
  const auto low16 = [&](int w) { return g.binary_scalar(ExprOp::BitAnd, w, 65535, false, label); };
  // The high word of the unsigned product a.lo * b.lo, from 16-bit halves x, y: partial products
  // below 2^32 (their bits kept by the wrapping multiply), the middle column's carry from the sum of
  // three 16-bit digits.
  const WordHalves x = halves_of(g, a.lo, label), y = halves_of(g, b.lo, label);
  const int p00 = mul(x.low, y.low), p01 = mul(x.low, y.high), p10 = mul(x.high, y.low), p11 = mul(x.high, y.high);
  const int middle = add(add(high16(p00), low16(p01)), low16(p10));
  const int carried = add(add(add(p11, high16(p01)), high16(p10)), high16(middle));
  // Two's complement: the signed product modulo 2^64 is the unsigned one; a.hi * b.hi only reaches 2^64.
  return {mul(a.lo, b.lo), add(carried, add(mul(a.lo, b.hi), mul(a.hi, b.lo)))};
}

int less_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label) {
  const int high_less = g.binary(ExprOp::Lt, a.hi, b.hi, label);
  const int high_equal = g.binary(ExprOp::Eq, a.hi, b.hi, label);
  return g.binary(ExprOp::Or, high_less, g.binary(ExprOp::And, high_equal, unsigned_less(g, a.lo, b.lo, label), label), label);
}

int equal_int64(Graph& g, Int64Words a, Int64Words b, const std::string& label) {
  return g.binary(ExprOp::And, g.binary(ExprOp::Eq, a.lo, b.lo, label), g.binary(ExprOp::Eq, a.hi, b.hi, label), label);
}

Int64Words select_int64(Graph& g, int condition, Int64Words a, Int64Words b, const std::string& label) {
  return {g.where(condition, a.lo, b.lo, label), g.where(condition, a.hi, b.hi, label)};
}

Int64Words bitwise_int64(Graph& g, ExprOp op, Int64Words a, Int64Words b, const std::string& label) {
  if (op != ExprOp::BitAnd && op != ExprOp::BitOr && op != ExprOp::BitXor) {
    throw KernelError(fmt::format("{}: '{}' is not a word-by-word bitwise op", label, expr_op_name(op)));
  }
  return {g.binary(op, a.lo, b.lo, label), g.binary(op, a.hi, b.hi, label)};
}

WordHalves halves_of(Graph& g, int word, const std::string& label) {
  return {g.binary_scalar(ExprOp::Shr, word, 16, false, label), g.binary_scalar(ExprOp::BitAnd, word, 65535, false, label)};
}

int word_from_halves(Graph& g, int high, int low, const std::string& label) {
  return g.binary(ExprOp::Add, g.binary_scalar(ExprOp::Mul, as_i32(g, high, label), 65536, false, label), as_i32(g, low, label), label);
}

Int64Words sum_int64_bytes(Graph& g, Int64Words x, const std::function<int(int f32_plane)>& reduce, const std::string& label) {
  // Reading every byte unsigned sums x + 2^64 for negative x: the same value modulo 2^64.
  std::array<int, 8> sums{};
  for (int k = 0; k < 8; ++k) {
    const int plane = g.cast(g.byte_of(k < 4 ? x.lo : x.hi, k % 4, label), DType::F32, label);
    sums[k] = g.cast(reduce(plane), DType::I32, label);  // exact: below 2^24
  }
  // Carries from byte to byte: each digit is (sum + carry) mod 256, the carry the rest (>= 0).
  std::array<int, 4> low{}, high{};
  int carry = -1;
  for (int k = 0; k < 8; ++k) {
    const int t = carry < 0 ? sums[k] : g.binary(ExprOp::Add, sums[k], carry, label);
    (k < 4 ? low : high)[k % 4] = g.byte_of(t, 0, label);
    if (k < 7) carry = g.binary_scalar(ExprOp::Shr, t, 8, false, label);
  }
  return {word_from_bytes(g, low, label), word_from_bytes(g, high, label)};
}

RowExtreme row_extreme_int64(Graph& g, Int64Words x, bool max, bool int32_values, const std::string& label) {
  const auto& shape = g.node(x.lo).type.shape;
  if (shape.size() != 2 || shape[1] > (int64_t{1} << 24)) {
    throw KernelError(fmt::format("{}: rows of at most 2^24 words, not {}", label, to_string(g.node(x.lo).type)));
  }
  const int64_t rows = shape[0], width = shape[1];
  // 16-bit digits, exact in f32; a signed word's top digit biased by 2^15 keeps its order unsigned.
  const auto bias = [&](int digit) { return g.binary_scalar(ExprOp::BitXor, digit, 32768, false, label); };
  const WordHalves lo = halves_of(g, x.lo, label);
  std::vector<int> digits = {bias(lo.high), lo.low};
  if (!int32_values) {
    const WordHalves hi = halves_of(g, x.hi, label);
    digits = {bias(hi.high), hi.low, lo.high, lo.low};
  }
  const double loser = max ? -1.0 : 65536.0;  // below (above) every digit
  int tied = -1;  // the elements equal to the row's extreme on the digits so far (bool [rows, width])
  std::vector<int> best;
  for (int digit : digits) {
    const int f = g.cast(digit, DType::F32, label);
    const int candidates = tied < 0 ? f : g.where(tied, f, g.full({{1}, DType::F32}, loser, label), label);
    const int extreme = g.reshape(g.row(max ? RowOp::Max : RowOp::Min, candidates, -1, -1, 1e-5, label), {rows, 1}, label);
    const int equal = g.binary(ExprOp::Eq, candidates, extreme, label);
    tied = tied < 0 ? equal : g.binary(ExprOp::And, tied, equal, label);
    best.push_back(g.cast(g.reshape(extreme, {rows}, label), DType::I32, label));
  }
  // the digits back into words, the top digit unbiased
  RowExtreme r;
  if (int32_values) {
    r.value.lo = word_from_halves(g, bias(best[0]), best[1], label);
    r.value.hi = widen_to_int64(g, r.value.lo, label).hi;
  } else {
    r.value = {word_from_halves(g, best[2], best[3], label), word_from_halves(g, bias(best[0]), best[1], label)};
  }
  const int position = g.where(tied, g.iota({{width}, DType::F32}, label), g.full({{1}, DType::F32}, double(width), label), label);
  r.position = g.cast(g.row(RowOp::Min, position, -1, -1, 1e-5, label), DType::I32, label);
  return r;
}

}  // namespace vtpu::kernels
