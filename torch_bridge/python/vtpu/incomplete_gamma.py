"""The regularized incomplete gamma functions igamma (P) and igammac (Q) on the chip, as the CPU
evaluates them in f32 (ATen/native/Math.h's calc_igamma and calc_igammac, from SciPy's igam and
Boost's Lanczos approximation): the boundary values first, then per element one of four methods
by where (a, x) lies: DLMF 8.12's uniform asymptotic expansion for large a near x, the power
series of 8.11.4, the cancellation-free series of 8.7.3 for small x, or the continued fraction of
8.9.2. Each method runs only when some element needs it (a sync point reads that), for every
element, and `where` keeps each element's own; its loop steps every element still short of the
CPU's stopping test (the step count read back every STEPS_PER_CHECK steps), and an element that
has stopped keeps its value, so each element sums the CPU's terms. Registered at PrivateUse1: the
gradient with respect to x (torch's formula) runs on the chip too.
"""
from __future__ import annotations

import math

import torch

from . import cephes_tables as tables
from .composed_fallback import float64_on_cpu
from .python_kernels import register
from .special_functions import polevl

MACHEP = 5.9604644775390625e-08  # Math.h's float epsilon for the stopping tests
MAXLOG = 88.72283905206835
MAXITER = 2000
LANCZOS_G = 6.024680040776729583740234375
STEPS_PER_CHECK = 16  # loop steps recorded between reads of "does any element still step?"


def _ratevl(x, num, den):
    """Math.h's ratevl: num(x) / den(x), as polynomials in 1/x where |x| > 1 (equal degrees)."""
    big = x.abs() > 1
    y = torch.where(big, 1 / x, x)
    return torch.where(big, polevl(y, num[::-1]) / polevl(y, den[::-1]), polevl(y, num) / polevl(y, den))


def _fac(a, x):
    """x^a e^-x / Gamma(a) (_igam_helper_fac): directly far from a == x, else Lanczos' form."""
    ax = a * x.log() - x - torch.lgamma(a)
    far = torch.where(ax < -MAXLOG, 0.0, ax.exp())
    fac = a + LANCZOS_G - 0.5
    res = (fac / math.e).sqrt() / _ratevl(a, tables.LANCZOS_SUM_EXPG_SCALED_NUM, tables.LANCZOS_SUM_EXPG_SCALED_DENOM)
    small = res * (a - x).exp() * ((x / fac).log() * a).exp()
    numfac = (x - a - LANCZOS_G + 0.5) / fac
    large = res * (a * (numfac.log1p() - numfac) + x * (0.5 - LANCZOS_G) / fac).exp()
    near = torch.where((a < 200) & (x < 200), small, large)
    return torch.where((a - x).abs() > 0.4 * a.abs(), far, near)


def _iterate(state, active, step):
    """Runs `step(state, active) -> (state, still_active)` until no element is active or MAXITER
    steps; `step` leaves inactive elements' state as it was."""
    for start in range(0, MAXITER, STEPS_PER_CHECK):
        if not bool(active.any()):  # a sync point
            break
        for i in range(start, min(start + STEPS_PER_CHECK, MAXITER)):
            state, active = step(state, active, i)
    return state


def _lower_series(a, x, wanted):
    """P by its power series (_igam_helper_series)."""
    ax = _fac(a, x)

    def step(state, active, _):
        r, c, ans = state
        r = torch.where(active, r + 1, r)
        c = torch.where(active, c * (x / r), c)
        ans = torch.where(active, ans + c, ans)
        return (r, c, ans), active & ~(c <= MACHEP * ans)

    one = torch.ones_like(x)
    _, _, ans = _iterate((a, one, one), wanted & (ax != 0), step)
    return torch.where(ax == 0, 0.0, ans * ax / a)


def _upper_series(a, x, wanted):
    """Q for small x (_igamc_helper_series), free of 1 - P's cancellation."""
    def step(state, active, i):
        fac, total = state
        fac = torch.where(active, fac * (-x / (i + 1)), fac)
        term = fac / (a + (i + 1))
        total = torch.where(active, total + term, total)
        return (fac, total), active & ~(term.abs() <= MACHEP * total.abs())

    _, total = _iterate((torch.ones_like(x), torch.zeros_like(x)), wanted, step)
    logx = x.log()
    return -torch.expm1(a * logx - torch.lgamma(1 + a)) - (a * logx - torch.lgamma(a)).exp() * total


def _upper_continued_fraction(a, x, wanted):
    """Q by its continued fraction (_igamc_helper_continued_fraction), rescaled past 2^24."""
    ax = _fac(a, x)
    y = 1 - a
    z = x + y + 1
    pkm1, qkm1 = x + 1, z * x

    def step(state, active, _):
        c, y, z, pkm2, qkm2, pkm1, qkm1, ans = state
        c, y, z = c + 1, y + 1, z + 2
        yc = y * c
        pk, qk = pkm1 * z - pkm2 * yc, qkm1 * z - qkm2 * yc
        r = pk / qk
        moved = qk != 0
        t = torch.where(moved, ((ans - r) / r).abs(), 1.0)
        new_ans = torch.where(moved, r, ans)
        big = pk.abs() > 16777216.0
        scale = torch.where(big, MACHEP, 1.0)
        new = (c, y, z, pkm1 * scale, qkm1 * scale, pk * scale, qk * scale, new_ans)
        state = tuple(torch.where(active, n, o) for n, o in zip(new, state))
        return state, active & ~(t <= MACHEP)

    state = (torch.zeros_like(x), y, z, torch.ones_like(x), x, pkm1, qkm1, pkm1 / qkm1)
    ans = _iterate(state, wanted & (ax != 0), step)[-1]
    return torch.where(ax == 0, 0.0, ans * ax)


def _asymptotic(a, x, lower):
    """P (lower) or Q by DLMF 8.12.3/8.12.4 (_igam_helper_asymptotic_series): 25 coefficients c_k,
    each a polynomial in eta summed until its terms fall below MACHEP, and the sum over k stopped
    where a term grows or falls below MACHEP of the sum."""
    sign = -1.0 if lower else 1.0
    sigma = (x - a) / a
    root = (-2 * (sigma.log1p() - sigma)).sqrt()
    lam = x / a
    eta = torch.where(lam > 1, root, torch.where(lam < 1, -root, 0.0))
    powers = [torch.ones_like(x)]
    for _ in range(24):
        powers.append(eta * powers[-1])
    total, afac = torch.zeros_like(x), torch.ones_like(x)
    old = torch.full_like(x, math.inf)
    going = torch.ones_like(x, dtype=torch.bool)
    for row in tables.IGAMMA_ASYMPTOTIC_D:
        ck, inner = torch.full_like(x, row[0]), torch.ones_like(going)
        for coefficient, power in zip(row[1:], powers[1:]):
            term = coefficient * power
            ck = torch.where(inner, ck + term, ck)
            inner = inner & ~(term.abs() < MACHEP * ck.abs())
        term = ck * afac
        going = going & ~(term.abs() > old)
        total = torch.where(going, total + term, total)
        going = going & ~(term.abs() < MACHEP * total.abs())
        old, afac = torch.where(going, term.abs(), old), torch.where(going, afac / a, afac)
    res = 0.5 * torch.erfc(sign * eta * (a / 2).sqrt())
    return res + sign * (-0.5 * a * eta * eta).exp() * total / (2 * math.pi * a).sqrt()


def _regime(a, x):
    """Where the CPU takes the asymptotic expansion: a large and x near it."""
    near = (x - a).abs() / a
    return ((a > 20) & (a < 200) & (near < 0.3)) | ((a > 200) & (near < 4.5 / a.sqrt()))


def _pick(branches, shape_like, within):
    """The value of the first branch whose mask holds, per element of `within`; each branch is
    computed only when some element takes it (a sync point)."""
    out = torch.full_like(shape_like, math.nan)
    taken = ~within
    for mask, compute in branches:
        mine = mask & ~taken
        if bool(mine.any()):
            out = torch.where(mine, compute(mine), out)
        taken = taken | mine
    return out


def _upper(a, x, asymptotic, within):
    lower_first = torch.where(x > 1.1, x < a, torch.where(x <= 0.5, -0.4 / x.log() < a, x * 1.1 < a))
    return _pick([(asymptotic, lambda m: _asymptotic(a, x, False)),
                  (lower_first, lambda m: 1 - _lower_series(a, x, m)),
                  ((x > 1.1) & ~lower_first, lambda m: _upper_continued_fraction(a, x, m)),
                  (~lower_first, lambda m: _upper_series(a, x, m))], x, within)


def _lower(a, x, asymptotic, within):
    complement = (x > 1) & (x > a)  # 1 - Q, Q by calc_igammac's own choice of method
    return _pick([(asymptotic, lambda m: _asymptotic(a, x, True)),
                  (complement, lambda m: 1 - _upper(a, x, asymptotic, m)),
                  (~complement, lambda m: _lower_series(a, x, m))], x, within)


def _incomplete_gamma(op: str, lower: bool):
    def kernel(a, x):
        dtype = torch.result_type(a, x)
        dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()
        if dtype == torch.float64:
            return float64_on_cpu(op, a, x)
        device = a.device if isinstance(a, torch.Tensor) and a.device.type != "cpu" else x.device
        a, x = torch.broadcast_tensors(torch.as_tensor(a).to(device, torch.float32), torch.as_tensor(x).to(device, torch.float32))
        inside = (a > 0) & (x > 0) & a.isfinite() & x.isfinite()
        # the methods see harmless values outside the domain; the boundary rules below decide those
        sa, sx = torch.where(inside, a, 1.0), torch.where(inside, x, 1.0)
        asymptotic = _regime(sa, sx) & inside
        value = (_lower if lower else _upper)(sa, sx, asymptotic, inside)
        # Math.h's boundary values, last rule first so the first one holding wins; a NaN the
        # methods would have propagated yields to them (P(NaN, inf) = 1, as on the CPU)
        at_zero_x, at_inf_a, at_inf_x = (0.0, 0.0, 1.0) if lower else (1.0, 1.0, 0.0)
        value = torch.where(a.isnan() | x.isnan(), math.nan, value)
        value = torch.where(x.isinf(), at_inf_x, value)
        value = torch.where(a.isinf(), torch.where(x.isinf(), math.nan, at_inf_a), value)
        value = torch.where(x == 0, at_zero_x, value)
        value = torch.where(a == 0, torch.where(x > 0, 1.0 if lower else 0.0, math.nan), value)
        return torch.where((x < 0) | (a < 0), math.nan, value).to(dtype)
    return kernel


register("igamma", _incomplete_gamma("igamma", True), "PrivateUse1")
register("igammac", _incomplete_gamma("igammac", False), "PrivateUse1")
