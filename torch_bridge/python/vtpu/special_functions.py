"""Special functions on the chip, composed of lowered elementwise ops the way the CPU evaluates
them (ATen/native/Math.h): the modified Bessel functions (i0, i0e, i1, i1e, k0, k1, scaled k0
and k1) as the same Cephes Chebyshev series (vtpu/cephes_tables.py, generated from torch's own
header), ndtri as Cephes' rational approximations, erfcx as the Faddeeva package's 100 interval
polynomials (their coefficients gathered per element from a table) and log_ndtr through it,
spherical_bessel_j0, angle, erfinv (Newton steps on the chip's erf), heaviside, and the Hurwitz
zeta (so polygamma). Each branch of the C code is computed for every element and the right one
chosen with `where`, as XLA lowers them on TPUs; defer_and_fuse fuses each function into one
kernel. Registered at PrivateUse1, so torch's derivative formulas (i0' = i1, ...) run on the chip
too. The orthogonal polynomials are in vtpu/orthogonal_polynomials.py.
"""
from __future__ import annotations

import functools
import math

import torch

from . import cephes_tables as tables
from .composed_fallback import float64_on_cpu
from .python_kernels import register


def chbevl(x, coefficients):
    """Cephes' Chebyshev series sum (Clenshaw's recurrence), as Math.h's chbevl."""
    b0, b1, b2 = coefficients[0], 0.0, 0.0
    for c in coefficients[1:]:
        b2, b1 = b1, b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def polevl(x, coefficients):
    """Cephes' polynomial (highest power first), as Math.h's polevl."""
    result = coefficients[0]
    for c in coefficients[1:]:
        result = result * x + c
    return result


def _floating(x):
    return x if x.is_floating_point() else x.to(torch.get_default_dtype())


def f32_composition(op: str):
    """For compositions that compute in f32: integers promote to the default dtype; float64 (given,
    or integers promoted to a float64 default dtype) runs aten `op` on the CPU, named, rather than
    return f32 precision in a float64 tensor; bf16 and f16 compute in f32 and return their dtype."""
    def wrap(fn):
        @functools.wraps(fn)
        def kernel(x):
            x = _floating(x)
            if x.dtype == torch.float64:
                return float64_on_cpu(op, x)
            return fn(x.float()).to(x.dtype)
        return kernel
    return wrap


def _exp_scaled_i0(x):
    """exp(-|x|) I0(x) (i0e): one series on [0, 8], another in 1/x beyond."""
    ax = x.abs()
    small = chbevl(ax / 2 - 2, tables.CHEBYSHEV_COEFFICIENTS_I0E_A_COEFF)
    large = chbevl(32 / ax - 2, tables.CHEBYSHEV_COEFFICIENTS_I0E_B_COEFF) / ax.sqrt()
    return torch.where(ax <= 8, small, large)


def _exp_scaled_i1(x):
    """exp(-|x|) I1(x) (i1e), odd in x."""
    ax = x.abs()
    small = chbevl(ax / 2 - 2, tables.CHEBYSHEV_COEFFICIENTS_I1E_A_COEFF) * ax
    large = chbevl(32 / ax - 2, tables.CHEBYSHEV_COEFFICIENTS_I1E_B_COEFF) / ax.sqrt()
    out = torch.where(ax <= 8, small, large)
    return torch.where(x < 0, -out, out)


def i0(x):
    x = _floating(x)
    return _exp_scaled_i0(x) * x.abs().exp()


def i0e(x):
    return _exp_scaled_i0(_floating(x))


def i1(x):
    x = _floating(x)
    return _exp_scaled_i1(x) * x.abs().exp()


def i1e(x):
    return _exp_scaled_i1(_floating(x))


def _bessel_k(x, order, scaled):
    """K0 / K1 (scaled: times exp(x)): a series in x^2 plus log(x/2) I_n(x) up to 2, a series in
    8/x beyond; inf at 0 and NaN below it, as Math.h's modified_bessel_k*_forward."""
    x = _floating(x)
    prefix = ("SCALED_" if scaled else "") + f"MODIFIED_BESSEL_K{order}_FORWARD_"
    near, far = getattr(tables, prefix + "A"), getattr(tables, prefix + "B")
    series = chbevl(x * x - 2, near)
    small = series - (0.5 * x).log() * i0(x) if order == 0 else (0.5 * x).log() * i1(x) + series / x
    large = chbevl(8 / x - 2, far) / x.sqrt()
    if scaled:
        small = small * x.exp()
    else:
        large = large * (-x).exp()
    out = torch.where(x <= 2, small, large)
    out = torch.where(x == 0, math.inf, out)
    return torch.where(x < 0, math.nan, out)


def ndtri(y):
    """The inverse of the standard normal CDF: Cephes' rational approximations, central and two
    tails (as Math.h's calc_ndtri)."""
    y = _floating(y)
    exp_minus_2 = 0.13533528323661269189
    upper = y > 1 - exp_minus_2  # the upper tail is the lower one mirrored
    t = torch.where(upper, 1 - y, y)
    centred = t - 0.5
    c2 = centred * centred
    central = (centred + centred * (c2 * polevl(c2, tables.CALC_NDTRI_P0) / polevl(c2, tables.CALC_NDTRI_Q0))) \
        * 2.50662827463100050242
    x = (-2 * t.log()).sqrt()
    z = 1 / x
    x1 = torch.where(x < 8, z * polevl(z, tables.CALC_NDTRI_P1) / polevl(z, tables.CALC_NDTRI_Q1),
                     z * polevl(z, tables.CALC_NDTRI_P2) / polevl(z, tables.CALC_NDTRI_Q2))
    tail = x - x.log() / x - x1
    out = torch.where(t > exp_minus_2, central, torch.where(upper, tail, -tail))
    out = torch.where(y == 0, -math.inf, torch.where(y == 1, math.inf, out))
    return torch.where((y < 0) | (y > 1), math.nan, out)


def spherical_bessel_j0(x):
    """sin(x)/x, by its Taylor series below 0.5 (where the quotient loses digits), 0 at +-inf."""
    x = _floating(x)
    x2 = x * x
    series = 1 + x2 * polevl(x2, [1 / 6227020800, -1 / 39916800, 1 / 362880, -1 / 5040, 1 / 120, -1 / 6])
    out = torch.where(x.abs() < 0.5, series, x.sin() / x)
    return torch.where(x.isinf(), 0.0, out)


# Euler-Maclaurin coefficients of Cephes' zeta: (2k)! / B_2k
_ZETA_A = [12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15, 1.8152105401943546773e17,
           -7.1661652561756670113e18]


_MACHEP = 1.11022302462515654042e-16  # Math.h's zeta: the relative size of a term that ends the sum


def _power(base, exponent):
    """base ** exponent for an integral exponent and any base's sign (the chip's pow is exp(e log b))."""
    magnitude = (exponent * base.abs().log()).exp()
    odd = exponent - 2 * (exponent / 2).floor() == 1
    return torch.where((base < 0) & odd, -magnitude, magnitude)


def zeta(x, q):
    """Hurwitz zeta(x, q) as Math.h's zeta: terms (q + i)^-x until at least 9 of them and past
    q + i = 9 (a count read back from q's minimum when q < 0), then 12 Euler-Maclaurin terms. An
    element keeps its sum where the CPU returns early (a term below MACHEP of the sum): the terms
    after it are below f32's precision, or NaN where they are inf * 0 (x = inf: the sum is inf or 0)."""
    x, q = (v if isinstance(v, torch.Tensor) else torch.tensor(v) for v in (x, q))
    result = torch.result_type(x, q)
    result = result if result.is_floating_point else torch.get_default_dtype()
    device = x.device if x.device.type != "cpu" else q.device
    x, q = torch.broadcast_tensors(x.to(device, torch.float32), q.to(device, torch.float32))  # in f32, as the CPU widens
    # the finite q's minimum: an infinity or NaN elsewhere must not cut a negative q's terms short
    lowest = float(torch.where(q.isfinite(), q, math.inf).min()) if q.numel() else 0.0
    steps = max(9, int(math.floor(9 - lowest)) + 2) if math.isfinite(lowest) else 9
    total, a, b = _power(q, -x), q, torch.zeros_like(q)
    returned = torch.zeros_like(q, dtype=torch.bool)
    early = torch.zeros_like(q)  # the sum where the CPU returned it

    def exit_where(condition, total):
        nonlocal returned, early
        condition = condition & ~returned
        early, returned = torch.where(condition, total, early), returned | condition

    for i in range(steps):
        active = (a <= 9) if i >= 9 else torch.ones_like(q, dtype=torch.bool)
        a = torch.where(active, a + 1, a)
        term = _power(a, -x)
        total, b = torch.where(active, total + term, total), torch.where(active, term, b)
        exit_where(active & (-_MACHEP * total < term) & (term < _MACHEP * total), total)
    w = a
    total = total + b * w / (x - 1) - 0.5 * b
    factor, k = torch.ones_like(x), 0.0
    for coefficient in _ZETA_A:
        factor, b = factor * (x + k), b / w
        term = factor * b / coefficient
        total = total + term
        exit_where((term / total).abs() < _MACHEP, total)
        factor, b, k = factor * (x + k + 1), b / w, k + 2
    total = torch.where(returned, early, total)
    integral_q = q == q.floor()
    total = torch.where((q <= 0) & ~integral_q & (x != x.floor()), math.nan, total)
    total = torch.where((q <= 0) & integral_q, math.inf, total)
    return torch.where(x == 1, math.inf, torch.where(x < 1, math.nan, total)).to(result)


def polygamma(n, x):
    """digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x), as Math.h's calc_polygamma. For n = 1
    the CPU runs trigamma instead, whose series gives 0 at +inf and whose reflection NaN at -inf
    (zeta's are NaN and inf)."""
    x = _floating(x)
    if n == 0:
        return torch.digamma(x)
    out = (1.0 if n % 2 else -1.0) * math.factorial(n) * zeta(torch.full_like(x, n + 1.0), x)
    if n == 1:
        out = torch.where(x == math.inf, 0.0, torch.where(x == -math.inf, math.nan, out))
    return out


_ERFINV_A = [-0.140543331, 0.914624893, -1.645349621, 0.886226899]  # Math.h's calc_erfinv, highest power first
_ERFINV_B = [0.012229801, -0.329097515, 1.442710462, -2.118377725, 1.0]
_ERFINV_C = [1.641345311, 3.429567803, -1.624906493, -1.970840454]
_ERFINV_D = [1.637067800, 3.543889200, 1.0]


def erfinv(y):
    """Math.h's calc_erfinv: a rational first guess (central below |y| = 0.7, in
    sqrt(-log((1 - |y|) / 2)) beyond), then two Newton steps on the chip's erf."""
    y = _floating(y)
    result, y = y.dtype, y.float()  # bf16 and f16 through f32, as the CPU
    z = y * y
    central = y * polevl(z, _ERFINV_A) / polevl(z, _ERFINV_B)
    w = (-((1 - y.abs()) / 2).log()).sqrt()
    tail = torch.where(y < 0, -1.0, 1.0) * polevl(w, _ERFINV_C) / polevl(w, _ERFINV_D)
    x = torch.where(y.abs() <= 0.7, central, tail)
    for _ in range(2):
        x = x - (torch.erf(x) - y) / (2 / math.sqrt(math.pi) * (-x * x).exp())
    x = torch.where(y.abs() == 1, torch.where(y < 0, -math.inf, math.inf), x)
    return torch.where(y.abs() > 1, math.nan, x).to(result)


_erfcx_tables: dict = {}  # ERFCX_Y100 as an f32 [100, 7] tensor, one per device


def _erfcx_y100(y100):
    """Faddeeva's erfcx_y100 (Math.h): interval k = floor(y100)'s Chebyshev polynomial at
    t = 2 y100 - (2k + 1), its coefficients gathered from the table; 1 at y100 = 100 (x = 0)."""
    table = _erfcx_tables.get(y100.device)
    if table is None:
        table = _erfcx_tables[y100.device] = torch.tensor(tables.ERFCX_Y100, dtype=torch.float32).to(y100.device)
    k = torch.nan_to_num(y100, nan=0.0).floor().clamp(0, 99)  # a NaN input's lane must still index the table
    t = 2 * y100 - (2 * k + 1)
    coefficients = table.index_select(0, k.long().reshape(-1)).reshape(*y100.shape, table.shape[1])
    result = coefficients[..., -1]
    for j in range(table.shape[1] - 2, -1, -1):
        result = coefficients[..., j] + result * t
    return torch.where(y100 >= 100, 1.0, result)


@f32_composition("special_erfcx")
def erfcx(x):
    """exp(x^2) erfc(x) as Math.h's calc_erfcx: the interval polynomials of 400 / (4 + |x|), a
    continued fraction above 50 (one term above 5e7), 2 exp(x^2) minus the polynomial below 0
    (without it below -6.1, infinity below -26.7)."""
    base = _erfcx_y100(400 / (4 + x.abs()))
    square = x * x
    one_over_sqrt_pi = 0.56418958354775628694807945156
    fraction = one_over_sqrt_pi * (square * (square + 4.5) + 2) / (x * (square * (square + 5) + 3.75))
    positive = torch.where(x > 5e7, one_over_sqrt_pi / x, torch.where(x > 50, fraction, base))
    twice = 2 * square.exp()
    negative = torch.where(x < -26.7, math.inf, torch.where(x < -6.1, twice, twice - base))
    return torch.where(x.isnan(), x, torch.where(x >= 0, positive, negative))


@f32_composition("special_log_ndtr")
def log_ndtr(x):
    """log of the standard normal CDF as Math.h's calc_log_ndtr: through erfcx below -1, where
    erfc's tail would underflow, log1p(-erfc(t) / 2) above."""
    t = x * (1 / math.sqrt(2))
    lower = (erfcx(-t) / 2).log() - t * t
    return torch.where(x < -1, lower, torch.log1p(-torch.erfc(t) / 2))


def heaviside(x, values):
    """0 below zero (and at NaN), values at zero, 1 above, as torch's reference."""
    return torch.where(x == 0, values.to(x.dtype), (x > 0).to(x.dtype))


def angle(x):
    """The argument of a complex number, atan2(imag, real); of a real number: pi below zero, 0
    otherwise, NaN kept."""
    if x.is_complex():
        return torch.atan2(x.imag, x.real)
    x = _floating(x)
    return torch.where(x.isnan(), x, torch.where(x < 0, math.pi, 0.0).to(x.dtype))


for _name, _fn in {"i0": i0, "special_i0e": i0e, "special_i1": i1, "special_i1e": i1e,
                   "special_modified_bessel_i0": i0, "special_modified_bessel_i1": i1,
                   "special_modified_bessel_k0": lambda x: _bessel_k(x, 0, False),
                   "special_modified_bessel_k1": lambda x: _bessel_k(x, 1, False),
                   "special_scaled_modified_bessel_k0": lambda x: _bessel_k(x, 0, True),
                   "special_scaled_modified_bessel_k1": lambda x: _bessel_k(x, 1, True),
                   "special_ndtri": ndtri, "special_spherical_bessel_j0": spherical_bessel_j0,
                   "angle": angle, "special_zeta": zeta, "polygamma": polygamma, "erfinv": erfinv,
                   "heaviside": heaviside, "special_erfcx": erfcx, "special_log_ndtr": log_ndtr}.items():
    register(_name, _fn, "PrivateUse1", complex_aware=_name == "angle")
