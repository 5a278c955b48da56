"""nextafter and frexp on the chip, read from each float's bit pattern: the tensor viewed as
int32 (float32) or int16 (bfloat16, float16), a reinterpretation of the same bytes, then integer
and bitwise ops the chip lowers.

nextafter steps the pattern by one toward the other value (up in magnitude or down), from zero
to the smallest denormal with the other's sign; equal values give the other, NaN propagates.
frexp reads the biased exponent as (bits & exponent mask) converted to f32, exact since it is a
multiple of 2^23 below 2^31, and sets the mantissa's exponent field to 2^-1; denormals are scaled
by 2^25 first (exact). Zeros, infinities and NaN are their own mantissa with exponent 0, as the
CPU's std::frexp gives them. bfloat16 and float16 frexp run through f32 (every value widens
exactly and its mantissa rounds back exactly); float64 falls back, named.
"""
from __future__ import annotations

import struct

import torch

from .composed_fallback import float64_on_cpu
from .python_kernels import register

_INTEGER_OF = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}
_SIGN_BIT = {torch.float32: -(2**31), torch.bfloat16: -(2**15), torch.float16: -(2**15)}


def round_to_f32(value: float) -> float:
    """`value` rounded to the nearest f32 (ties to even), as a Python float. Host code reproduces
    the CPU's f32 arithmetic with it one operation at a time: +, -, * and / of f32 values computed
    in double and rounded once to f32 give f32's own result."""
    return struct.unpack("f", struct.pack("f", value))[0]


def nextafter(x, other):
    dtype = torch.result_type(x, other)
    if dtype not in _INTEGER_OF:
        return float64_on_cpu(torch.ops.aten.nextafter.default, x, other)
    device = x.device if x.device.type != "cpu" else other.device  # one may be a CPU 0-d tensor
    x, other = torch.broadcast_tensors(x.to(device, dtype), other.to(device, dtype))
    bits = x.contiguous().view(_INTEGER_OF[dtype]).to(torch.int32)
    away_from_zero = (x > 0) == (other > x)
    stepped = torch.where(away_from_zero, bits + 1, bits - 1)
    smallest = torch.where(other > 0, 1, _SIGN_BIT[dtype] + 1)  # from zero: the smallest denormal
    pattern = torch.where(x == 0, smallest, stepped).to(_INTEGER_OF[dtype]).view(dtype)
    result = torch.where(x == other, other, pattern)
    return torch.where(x.isnan() | other.isnan(), x + other, result)


def frexp(x):
    if x.dtype not in _INTEGER_OF:
        return float64_on_cpu(torch.ops.aten.frexp.Tensor, x)
    if x.dtype != torch.float32:
        mantissa, exponent = frexp(x.float())
        return mantissa.to(x.dtype), exponent
    denormal = (x != 0) & (x.abs() < torch.finfo(torch.float32).tiny)
    scaled = torch.where(denormal, x * 2.0**25, x).contiguous()
    bits = scaled.view(torch.int32)
    biased = ((bits & 0x7F800000).float() * 2.0**-23).to(torch.int32)
    mantissa = ((bits & ~0x7F800000) | 0x3F000000).view(torch.float32)  # exponent field of 2^-1
    special = (x == 0) | ~x.isfinite()
    exponent = torch.where(special, 0, biased - 126 - torch.where(denormal, 25, 0)).to(torch.int32)
    return torch.where(special, x, mantissa), exponent


def frexp_out(x, *, mantissa, exponent):
    m, e = frexp(x)
    for out, value in ((mantissa, m), (exponent, e)):
        out.resize_(value.shape).copy_(value)
    return mantissa, exponent


register("nextafter", nextafter, "PrivateUse1")
register("frexp.Tensor", frexp, "PrivateUse1")
register("frexp.Tensor_out", frexp_out, "PrivateUse1")
