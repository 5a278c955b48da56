// The composite functions TileCodegen spells out in the chip's instructions, each with the error
// bound its approximation guarantees: erf (Abramowitz & Stegun 7.1.26), sin and cos (Cephes'
// reduction and polynomials, Payne-Hanek's reduction past 2^23), gelu's exact form through erf,
// and pow for any base and exponent (tile_codegen.h).
#include <fmt/format.h>

#include <bit>
#include <cmath>
#include <limits>

#include "kernels/codegen/tile_codegen.h"

namespace vtpu::kernels {

int TileCodegen::erf(int x) {
  // Abramowitz & Stegun 7.1.26: |error| <= 1.5e-7 over the real line, using one exp and one rcp.
  constexpr float p = 0.3275911f, a1 = 0.254829592f, a2 = -0.284496736f, a3 = 1.421413741f, a4 = -1.453152027f,
                  a5 = 1.061405429f;
  const int ax = vregs_.take(), t = vregs_.take(), acc = vregs_.take(), c = vregs_.take();
  w_.line("vabs v{}, v{}", ax, x);
  fill(c, p);
  w_.line("vmul v{}, v{}, v{}", t, ax, c);
  fill(c, 1.f);
  w_.line("vadd v{}, v{}, v{}", t, t, c);
  w_.line("vrcp v{}, v{}", t, t);
  fill(acc, a5);
  for (float a : {a4, a3, a2, a1}) {
    fill(c, a);
    w_.line("vfma v{}, v{}, v{}, v{}", acc, acc, t, c);
  }
  w_.line("vmul v{}, v{}, v{}", acc, acc, t);
  w_.line("vmul v{}, v{}, v{}", ax, ax, ax);
  w_.line("vneg v{}, v{}", ax, ax);
  w_.line("vexp v{}, v{}", ax, ax);
  w_.line("vmul v{}, v{}, v{}", acc, acc, ax);  // (poly) * exp(-x^2)
  fill(c, 1.f);
  w_.line("vsub v{}, v{}, v{}", acc, c, acc);  // erf(|x|)
  w_.line("vneg v{}, v{}", t, acc);
  fill(c, 0.f);
  const int m = masks_.take();
  w_.line("vcmp.lt m{}, v{}, v{}", m, x, c);
  w_.line("vsel v{}, m{}, v{}, v{}", acc, m, t, acc);
  masks_.release(m);
  vregs_.release(ax);
  vregs_.release(t);
  vregs_.release(c);
  return acc;
}

// 2/pi's fraction bits in 24-bit chunks (fdlibm's ipio2): chunk j is worth chunk * 2^-24(j+1).
constexpr uint32_t kTwoOverPiChunks[] = {0xA2F983, 0x6E4E44, 0x1529FC, 0x2757D1, 0xF534DD, 0xC0DB62, 0x95993C};

void TileCodegen::reduce_large(int x, int q, int r) {
  // Payne-Hanek in f32: x * 2/pi = sum over chunks of x * c_j, each product split exactly into
  // p_j + e_j (e_j = fma(x, c_j, -p_j)). x is scaled by 2^-64 and the chunks by 2^64, so no chunk
  // a finite x needs is subnormal. A term of magnitude 2^26 or more is a multiple of 8: it moves
  // neither the quadrant nor the fraction, and is dropped. The others split exactly into an int32
  // part (summed with wrapping: only the sum mod 4 matters) and a fraction, summed in f32 and
  // renormalised after each chunk so it stays within 1.5 of 0. Writes q (int32 quadrant) and r.
  const int xs = vregs_.take(), p = vregs_.take(), e = vregs_.take(), t = vregs_.take(), qi = vregs_.take();
  const int fp = vregs_.take(), c = vregs_.take(), limit = vregs_.take(), zero = vregs_.take();
  const int keep = masks_.take();
  fill(c, 0x1p-64f);
  w_.line("vmul v{}, v{}, v{}", xs, x, c);
  fill(zero, 0.f);  // 0.0f's bits are int32 0
  w_.line("vmov v{}, v{}", q, zero);
  w_.line("vmov v{}, v{}", fp, zero);
  fill(limit, 0x1p26f);
  const auto add_term = [&](int v) {
    w_.line("vabs v{}, v{}", t, v);
    w_.line("vcmp.lt m{}, v{}, v{}", keep, t, limit);
    w_.line("vcvt.f2i v{}, v{}", qi, v);  // exact below 2^26
    w_.line("vcvt.i2f v{}, v{}", t, qi);
    w_.line("vsub v{}, v{}, v{}", t, v, t);
    w_.line("vsel v{}, m{}, v{}, v{}", t, keep, t, zero);
    w_.line("vsel v{}, m{}, v{}, v{}", qi, keep, qi, zero);
    w_.line("viadd v{}, v{}, v{}", q, q, qi);
    w_.line("vadd v{}, v{}, v{}", fp, fp, t);
  };
  for (size_t j = 0; j < std::size(kTwoOverPiChunks); ++j) {
    fill(c, std::ldexp(static_cast<float>(kTwoOverPiChunks[j]), 64 - 24 * static_cast<int>(j + 1)));
    w_.line("vmul v{}, v{}, v{}", p, xs, c);
    w_.line("vneg v{}, v{}", t, p);
    w_.line("vfma v{}, v{}, v{}, v{}", e, xs, c, t);
    add_term(p);
    add_term(e);
    fill(c, 0x1.8p23f);  // the fraction's nearest integer (exact while |fp| < 2^22) moves to q
    w_.line("vadd v{}, v{}, v{}", t, fp, c);
    w_.line("vsub v{}, v{}, v{}", t, t, c);
    w_.line("vsub v{}, v{}, v{}", fp, fp, t);
    w_.line("vcvt.f2i v{}, v{}", qi, t);
    w_.line("viadd v{}, v{}, v{}", q, q, qi);
  }
  // r = fraction * pi/2 with pi/2 in two parts; x - x makes it NaN for an infinite or NaN x
  fill(c, static_cast<float>(M_PI_2 - static_cast<float>(M_PI_2)));
  w_.line("vmul v{}, v{}, v{}", r, fp, c);
  fill(c, static_cast<float>(M_PI_2));
  w_.line("vfma v{}, v{}, v{}, v{}", r, fp, c, r);
  w_.line("vsub v{}, v{}, v{}", t, x, x);
  w_.line("vadd v{}, v{}, v{}", r, r, t);
  masks_.release(keep);
  for (int v : {xs, p, e, t, qi, fp, c, limit, zero}) vregs_.release(v);
}

int TileCodegen::sin_cos(int x, bool cosine) {
  // Cephes sinf/cosf: q = round(x * 2/pi) picks the quadrant, r = x - q * pi/2 by Cody-Waite in
  // three fused steps, then a degree-7 odd or degree-8 even polynomial on |r| <= pi/4.
  // cos(x) = sin(x + pi/2): quadrant + 1. Past |x| = 2^23, where x * 2/pi rounded to f32 starts to
  // miss the quadrant's integer, q and r come from reduce_large's exact reduction instead.
  const int q = vregs_.take(), qf = vregs_.take(), r = vregs_.take(), c = vregs_.take(), half = vregs_.take();
  const int m = masks_.take();
  fill(c, static_cast<float>(M_2_PI));
  w_.line("vmul v{}, v{}, v{}", qf, x, c);
  fill(half, 0.5f);  // round half away from zero: truncate qf +- 0.5
  fill(c, 0.f);
  w_.line("vcmp.lt m{}, v{}, v{}", m, qf, c);
  w_.line("vneg v{}, v{}", c, half);
  w_.line("vsel v{}, m{}, v{}, v{}", half, m, c, half);
  w_.line("vadd v{}, v{}, v{}", qf, qf, half);
  w_.line("vcvt.f2i v{}, v{}", q, qf);
  w_.line("vcvt.i2f v{}, v{}", qf, q);
  w_.line("vmov v{}, v{}", r, x);
  for (float part : {-1.5703125f, -4.837512969970703125e-4f, -7.54978995489188216e-8f}) {
    fill(c, part);
    w_.line("vfma v{}, v{}, v{}, v{}", r, qf, c, r);
  }
  {
    const int large_q = vregs_.take(), large_r = vregs_.take(), large = masks_.take();
    reduce_large(x, large_q, large_r);
    w_.line("vabs v{}, v{}", qf, x);
    fill(c, 0x1p23f);
    w_.line("vcmp.lt m{}, v{}, v{}", large, qf, c);  // small |x| (NaN too: not below)
    w_.line("vsel v{}, m{}, v{}, v{}", q, large, q, large_q);
    w_.line("vsel v{}, m{}, v{}, v{}", r, large, r, large_r);
    masks_.release(large);
    vregs_.release(large_q);
    vregs_.release(large_r);
  }
  if (cosine) {
    fill(c, std::bit_cast<float>(1));
    w_.line("viadd v{}, v{}, v{}", q, q, c);
  }
  const int r2 = half, s = vregs_.take(), k = vregs_.take();
  w_.line("vmul v{}, v{}, v{}", r2, r, r);
  fill(s, -1.9515295891e-4f);  // sin(r) = r + r^3 (s1 + r^2 (s2 + r^2 s3))
  for (float a : {8.3321608736e-3f, -1.6666654611e-1f}) {
    fill(c, a);
    w_.line("vfma v{}, v{}, v{}, v{}", s, s, r2, c);
  }
  w_.line("vmul v{}, v{}, v{}", s, s, r2);
  w_.line("vfma v{}, v{}, v{}, v{}", s, s, r, r);
  fill(k, 2.443315711809948e-5f);  // cos(r) = 1 - r^2/2 + r^4 (c1 + r^2 (c2 + r^2 c3))
  for (float a : {-1.388731625493765e-3f, 4.166664568298827e-2f}) {
    fill(c, a);
    w_.line("vfma v{}, v{}, v{}, v{}", k, k, r2, c);
  }
  w_.line("vmul v{}, v{}, v{}", k, k, r2);
  w_.line("vmul v{}, v{}, v{}", k, k, r2);
  fill(c, -0.5f);
  w_.line("vfma v{}, v{}, v{}, v{}", k, r2, c, k);
  fill(c, 1.f);
  w_.line("vadd v{}, v{}, v{}", k, k, c);
  // Quadrant q & 3: 0 -> sin, 1 -> cos, 2 -> -sin, 3 -> -cos.
  fill(c, std::bit_cast<float>(1));
  w_.line("vand v{}, v{}, v{}", qf, q, c);
  w_.line("vcvt.i2f v{}, v{}", qf, qf);
  fill(c, 1.f);
  w_.line("vcmp.eq m{}, v{}, v{}", m, qf, c);
  w_.line("vsel v{}, m{}, v{}, v{}", s, m, k, s);
  fill(c, std::bit_cast<float>(2));
  w_.line("vand v{}, v{}, v{}", qf, q, c);
  w_.line("vcvt.i2f v{}, v{}", qf, qf);
  fill(c, 2.f);
  w_.line("vcmp.eq m{}, v{}, v{}", m, qf, c);
  w_.line("vneg v{}, v{}", k, s);
  w_.line("vsel v{}, m{}, v{}, v{}", s, m, k, s);
  masks_.release(m);
  for (int v : {q, qf, r, c, half, k}) vregs_.release(v);
  return s;
}

int TileCodegen::gelu_erf(int x) {
  const int c = constant_vreg(static_cast<float>(M_SQRT1_2));
  const int z = vregs_.take();
  w_.line("vmul v{}, v{}, v{}", z, x, c);
  const int e = erf(z);
  fill(c, 1.f);
  w_.line("vadd v{}, v{}, v{}", e, e, c);
  w_.line("vmul v{}, v{}, v{}", e, e, x);
  fill(c, 0.5f);
  w_.line("vmul v{}, v{}, v{}", e, e, c);
  vregs_.release(c);
  vregs_.release(z);
  return e;
}

// a^b as C's pow (and torch's): |a|^b = exp(b log|a|), then for a negative base the sign of an
// integer b ((-1)^b) or NaN for any other b; -inf counts as +inf there (pow(-inf, y) is +inf or +0
// unless y is an odd integer); x^0 and 1^y are 1 even for NaN. Exponents of 2^24 and more are
// all even integers in f32.
int TileCodegen::pow(int base, int exponent) {
  const int d = vregs_.take(), t = vregs_.take(), c = vregs_.take();
  const int integral = masks_.take(), odd = masks_.take(), m = masks_.take();
  w_.line("vabs v{}, v{}", d, base);
  w_.line("vlog v{}, v{}", d, d);
  w_.line("vmul v{}, v{}, v{}", d, d, exponent);
  w_.line("vexp v{}, v{}", d, d);  // |a|^b
  // integral: the f32 -> int32 -> f32 round trip keeps b, or |b| >= 2^24 (then even)
  w_.line("vcvt.f2i v{}, v{}", t, exponent);
  w_.line("vcvt.i2f v{}, v{}", c, t);
  w_.line("vcmp.eq m{}, v{}, v{}", integral, c, exponent);
  w_.line("vabs v{}, v{}", c, exponent);
  const int limit = constant_vreg(16777216.f);
  w_.line("vcmp.lt m{}, v{}, v{}", m, c, limit);  // m: |b| < 2^24
  vregs_.release(limit);
  // odd: the integer's low bit, below 2^24 only
  const int one = constant_vreg(std::bit_cast<float>(int32_t{1})), zero = constant_vreg(0.f);
  w_.line("vand v{}, v{}, v{}", t, t, one);
  w_.line("vicmp.lt m{}, v{}, v{}", odd, zero, t);
  w_.line("mand m{}, m{}, m{}", odd, odd, m);
  // integral |= !m  ==  !(!integral & m)
  w_.line("mnot m{}, m{}", integral, integral);
  w_.line("mand m{}, m{}, m{}", integral, integral, m);
  w_.line("mnot m{}, m{}", integral, integral);
  // t: the result for a negative base: -d for an odd b, d for an even one, NaN for any other
  w_.line("vneg v{}, v{}", t, d);
  w_.line("vsel v{}, m{}, v{}, v{}", t, odd, t, d);
  fill(c, std::numeric_limits<float>::quiet_NaN());
  w_.line("vsel v{}, m{}, v{}, v{}", t, integral, t, c);
  // but -inf with a non-integer b: d, as +inf would give
  fill(c, -std::numeric_limits<float>::infinity());
  w_.line("vcmp.eq m{}, v{}, v{}", m, base, c);
  w_.line("mnot m{}, m{}", integral, integral);
  w_.line("mand m{}, m{}, m{}", m, m, integral);
  w_.line("vsel v{}, m{}, v{}, v{}", t, m, d, t);
  w_.line("vcmp.lt m{}, v{}, v{}", m, base, zero);  // a negative base takes t
  w_.line("vsel v{}, m{}, v{}, v{}", d, m, t, d);
  // pow(x, 0) and pow(1, y) are 1, NaN included
  fill(c, 1.f);
  w_.line("vcmp.eq m{}, v{}, v{}", m, exponent, zero);
  w_.line("vsel v{}, m{}, v{}, v{}", d, m, c, d);
  w_.line("vcmp.eq m{}, v{}, v{}", m, base, c);
  w_.line("vsel v{}, m{}, v{}, v{}", d, m, c, d);
  for (int r : {integral, odd, m}) masks_.release(r);
  for (int r : {t, c, one, zero}) vregs_.release(r);
  return d;
}

}  // namespace vtpu::kernels
