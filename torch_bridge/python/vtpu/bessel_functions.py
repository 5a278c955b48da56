"""Bessel functions of the first and second kind, orders 0 and 1 (special.bessel_j0, bessel_j1,
bessel_y0, bessel_y1), on the chip as ATen/native/Math.h computes them (Cephes' j0.c and j1.c).

Up to x = 5 a rational function in x^2 (J0 near 0: 1 - x^2 / 4; Y0 and Y1 add (2 / pi) log(x)
times J0 or the J1 term); beyond, the Hankel asymptotic form, rational functions in 25 / x^2
times the cosine and sine of x minus a quarter or three quarters of pi, over sqrt(x). Every term
is the CPU's expression in the input's precision with Math.h's coefficient tables
(vtpu/cephes_tables.py), each branch chosen per element. Y0 and Y1 are -inf at 0 and NaN below.
"""
from __future__ import annotations

import torch

from . import cephes_tables as tables
from .python_kernels import register
from .special_functions import f32_composition, polevl

_TWO_OVER_PI = 0.636619772367581343075535053490057448
_SQRT_TWO_OVER_PI = 0.797884560802865355879892119868763737
_QUARTER_PI, _THREE_QUARTERS_PI = 0.785398163397448309615660845819875721, 2.356194490192344928846982537459627163


def _asymptotic(x, z, phase, tab, second_kind: bool):
    """(P cos(x - phase) - (5 / x) Q sin(x - phase)) sqrt(2 / pi) / sqrt(x) (first kind), or with
    sin and cos exchanged and the sign (second kind), P and Q rational in z."""
    p = polevl(z, tab["PP"]) / polevl(z, tab["PQ"])
    q = polevl(z, tab["QP"]) / polevl(z, tab["QQ"])
    shifted = x - phase
    if second_kind:
        return (p * torch.sin(shifted) + 5.0 / x * q * torch.cos(shifted)) * _SQRT_TWO_OVER_PI / torch.sqrt(x)
    return (p * torch.cos(shifted) - 5.0 / x * q * torch.sin(shifted)) * _SQRT_TWO_OVER_PI / torch.sqrt(x)


def _tables(prefix: str) -> dict:
    return {name: getattr(tables, f"{prefix}_{name}") for name in ("PP", "PQ", "QP", "QQ", "RP", "RQ", "YP", "YQ")
            if hasattr(tables, f"{prefix}_{name}")}


_J0, _J1 = _tables("BESSEL_J0_FORWARD"), _tables("BESSEL_J1_FORWARD")
_Y0, _Y1 = _tables("BESSEL_Y0_FORWARD"), _tables("BESSEL_Y1_FORWARD")


def _j0(x):
    x = x.abs()
    x2 = x * x
    near = (x2 - 5.78318596294678452118e+00) * (x2 - 3.04712623436620863991e+01) * polevl(x2, _J0["RP"]) \
        / polevl(x2, _J0["RQ"])
    near = torch.where(x < 0.00001, 1.0 - x2 / 4.0, near)
    return torch.where(x <= 5.0, near, _asymptotic(x, 25.0 / x2, _QUARTER_PI, _J0, False))


def _j1(x):
    ax = x.abs()
    x2 = ax * ax
    near = polevl(x2, _J1["RP"]) / polevl(x2, _J1["RQ"]) * ax * (x2 - 1.46819706421238932572e+01) \
        * (x2 - 4.92184563216946036703e+01)
    z = 5.0 / ax * (5.0 / ax)
    value = torch.where(ax <= 5.0, near, _asymptotic(ax, z, _THREE_QUARTERS_PI, _J1, False))
    return torch.where(x < 0, -value, value)  # odd, as Math.h's -bessel_j1_forward(-x)


def _y0(x):
    x2 = x * x
    near = polevl(x2, _Y0["YP"]) / polevl(x2, _Y0["YQ"]) + _TWO_OVER_PI * torch.log(x) * _j0(x)
    near = torch.where(x == 0, float("-inf"), torch.where(x < 0, float("nan"), near))
    return torch.where(x <= 5.0, near, _asymptotic(x, 25.0 / x2, _QUARTER_PI, _Y0, True))


def _y1(x):
    x2 = x * x
    near = x * (polevl(x2, _Y1["YP"]) / polevl(x2, _Y1["YQ"])) + _TWO_OVER_PI * (_j1(x) * torch.log(x) - 1.0 / x)
    near = torch.where(x == 0, float("-inf"), torch.where(x <= 0, float("nan"), near))
    z = 5.0 / x * (5.0 / x)
    return torch.where(x <= 5.0, near, _asymptotic(x, z, _THREE_QUARTERS_PI, _Y1, True))


for _name, _fn in (("bessel_j0", _j0), ("bessel_j1", _j1), ("bessel_y0", _y0), ("bessel_y1", _y1)):
    register(f"special_{_name}", f32_composition(f"special_{_name}")(_fn), "PrivateUse1")
