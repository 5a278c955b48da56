"""The Airy function Ai (special.airy_ai) on the chip, as ATen/native/Math.h computes it (Cephes'
airy.c).

Below -2.09 the oscillating asymptotic form (rational functions in 1 / zeta^2 times the sine and
cosine of zeta + pi / 4, zeta = (2/3) |x|^(3/2)); from 2.09 the decaying one (a rational function
in 1 / zeta over exp(zeta)), 0 past 103.892; between, the power series f and g of Ai = c1 f - c2 g.
Math.h sums the series until a term is below f32's epsilon relative to f; the chip runs the most
terms any x in (-2.09, 2.09) takes in f32 (found on the host once) and stops adding each
element's terms where Math.h's loop stops, so every element sums exactly the CPU's terms.
Infinities give NaN, as Math.h's.
"""
from __future__ import annotations

import functools
import math

import torch

from . import cephes_tables as tables
from .float_bits import round_to_f32 as r32
from .python_kernels import register
from .special_functions import f32_composition, polevl

_C1, _C2 = 0.355028053887817239260, 0.258819403792806798405
_SQRT_ONE_OVER_PI = 5.64189583547756286948e-01
_EPSILON = torch.finfo(torch.float32).eps


def _series_step(m, n, f, g, z, k, rounded=lambda v: v):
    """One pass of Math.h's power-series loop body (k: the counter before it): the next m, n, f
    and g, on tensors, or on the host's f32 values with `rounded` = r32 after each operation."""
    m = rounded(rounded(m * z) / (k + 1))
    n = rounded(rounded(n * z) / (k + 2))
    m = rounded(m / (k + 2))
    n = rounded(n / (k + 3))
    return m, n, rounded(f + m), rounded(g + n)


def _series_terms(x: float) -> int:
    """Iterations of Math.h's power-series loop at the f32 value x, in f32."""
    m, n, f, g, z, k = 1.0, x, 1.0, x, r32(r32(x * x) * x), 1.0
    count, t = 0, 1.0
    while t > _EPSILON:
        m, n, f, g = _series_step(m, n, f, g, z, k, r32)
        k, t, count = k + 3, abs(r32(m / f)), count + 1
    return count


@functools.cache
def _terms() -> int:
    """The most terms any x in (-2.09, 2.09) takes, found once, at the first call (not at import)."""
    grid = torch.linspace(-2.09, 2.09, 4001, dtype=torch.float32).tolist()
    return max(_series_terms(x) for x in grid) + 2


def _power_series(x):
    m, n, f, g, z = torch.ones_like(x), x, torch.ones_like(x), x, x * x * x
    active = torch.ones_like(x, dtype=torch.bool)
    for i in range(_terms()):  # each element's terms only while Math.h's loop runs for it
        stepped = _series_step(m, n, f, g, z, 1.0 + 3 * i)
        m, n, f, g = (torch.where(active, new, old) for new, old in zip(stepped, (m, n, f, g)))
        active = active & ((stepped[0] / stepped[2]).abs() > _EPSILON)
    return _C1 * f - _C2 * g


def _airy_ai(x):
    minus = -2.0 * x * torch.sqrt(-x) / 3.0  # zeta for x < 0
    z = 1.0 / minus
    zz = z * z
    oscillating_t = minus + 0.25 * r32(math.pi)
    oscillating = _SQRT_ONE_OVER_PI / torch.sqrt(torch.sqrt(-x)) * (
        torch.sin(oscillating_t) * (1.0 + zz * polevl(zz, tables.AIRY_AI_FORWARD_AFN) / polevl(zz, tables.AIRY_AI_FORWARD_AFD))
        - torch.cos(oscillating_t) * (z * polevl(zz, tables.AIRY_AI_FORWARD_AGN) / polevl(zz, tables.AIRY_AI_FORWARD_AGD)))
    zeta = 2.0 * x * torch.sqrt(x) / 3.0
    inverse = 1.0 / zeta
    decaying = _SQRT_ONE_OVER_PI * (polevl(inverse, tables.AIRY_AI_FORWARD_AN) / polevl(inverse, tables.AIRY_AI_FORWARD_AD)) \
        / (2.0 * torch.sqrt(torch.sqrt(x)) * torch.exp(zeta))
    result = torch.where(x < -2.09, oscillating, torch.where(x >= 2.09, decaying, _power_series(x)))
    result = torch.where(x > 103.892, torch.zeros_like(x), result)
    return torch.where(x.isinf(), torch.full_like(x, float("nan")), result)


register("special_airy_ai", f32_composition("special_airy_ai")(_airy_ai), "PrivateUse1")
