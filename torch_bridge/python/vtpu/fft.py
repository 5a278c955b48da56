"""FFTs as the MXU computes them: a discrete Fourier transform along a dim is a matmul by the
n x n DFT matrix W[j][k] = exp(-+2 pi i jk / n) (complex: four real matmuls over the (re, im)
planes; a real input or output needs two). n^2 multiply-adds per transformed row instead of
n log n, which the MXU does at ~n/128 cycles per 8 rows: fine for the lengths models transform
(FNet's token and hidden dims, spectral filters), as XLA's TPU FFT also leans on matmuls for small
sizes. The matrices are built on the host in float64, rounded once to f32, and kept on the device
per (n, kind); the products use the runtime's matmul precision (f32-accurate by default).

torch's three kernels are served: _fft_c2c (complex to complex, each dim in turn), _fft_r2c (a
real input: its last dim transformed to the n // 2 + 1 non-redundant frequencies when one-sided,
then the other dims as c2c) and _fft_c2r (the other dims first as inverse c2c, then the last dim
back to `last_dim_size` real values from its Hermitian half). Normalisation: 0 none, 1 by
1 / sqrt(n), 2 by 1 / n, per transformed dim (their product is torch's).
"""
from __future__ import annotations

import math

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register

_matrices: dict = {}


def _angles(n: int, rows: int, cols: int):
    """2 pi jk / n for j < rows, k < cols, in float64, jk reduced mod n first (exact for large jk)."""
    jk = torch.outer(torch.arange(rows, dtype=torch.float64), torch.arange(cols, dtype=torch.float64))
    return (2 * math.pi / n) * torch.remainder(jk, n)


def _matrix(n: int, kind: str, sign: int, device, columns: int | None = None):
    """The DFT matrix of order n as [n, columns] (columns: the output frequencies, default n):
    `complex` exp(sign 2 pi i jk / n); `cos` and `sin` its real parts for the real transforms."""
    key = (n, kind, sign, columns, device)
    if key not in _matrices:
        angle = _angles(n, n, n if columns is None else columns)
        if kind == "complex":
            m = torch.polar(torch.ones_like(angle), sign * angle).to(torch.complex64)
        elif kind == "cos":
            m = torch.cos(angle).float()
        else:
            m = (sign * torch.sin(angle)).float()
        _matrices[key] = m.to(device)
    return _matrices[key]


def _scale(n: int, normalization: int) -> float:
    return {0: 1.0, 1: 1 / math.sqrt(n), 2: 1 / n}[normalization]


def _along(x, dim, transform):
    """transform([.., n]) applied along `dim` (moved last and back)."""
    return transform(x.movedim(dim, -1)).movedim(-1, dim)


def _c2c_dim(x, dim, normalization, forward):
    n = x.size(dim)
    w = _matrix(n, "complex", -1 if forward else 1, x.device)
    out = _along(x, dim, lambda t: t @ w)
    scale = _scale(n, normalization)
    return out if scale == 1.0 else out * scale


def fft_c2c(x, dim, normalization, forward):
    if x.dtype != torch.complex64:
        return run_on_cpu("_fft_c2c", f"{x.dtype} (the chip's DFT serves complex64)", x, dim, normalization, forward)
    out = x
    for d in dim:
        out = _c2c_dim(out, d, normalization, forward)
    return out.contiguous() if out is not x else out.clone()


def fft_r2c(x, dim, normalization, onesided):
    if x.dtype != torch.float32:
        return run_on_cpu("_fft_r2c", f"{x.dtype} (the chip's DFT serves float32)", x, dim, normalization, onesided)
    last = dim[-1]
    n = x.size(last)
    cols = n // 2 + 1 if onesided else n
    cos, sin = _matrix(n, "cos", -1, x.device, cols), _matrix(n, "sin", -1, x.device, cols)
    out = _along(x, last, lambda t: torch.complex(t @ cos, t @ sin))
    scale = _scale(n, normalization)
    if scale != 1.0:
        out = out * scale
    for d in dim[:-1]:
        out = _c2c_dim(out, d, normalization, True)
    return out.contiguous()


def fft_c2r(x, dim, normalization, last_dim_size):
    if x.dtype != torch.complex64:
        return run_on_cpu("_fft_c2r", f"{x.dtype} (the chip's DFT serves complex64)", x, dim, normalization, last_dim_size)
    for d in dim[:-1]:
        x = _c2c_dim(x, d, normalization, False)
    last, n = dim[-1], last_dim_size
    half = x.size(last)  # the frequencies 0 .. n // 2 given (more are ignored, fewer are zeros)
    used = min(half, n // 2 + 1)
    # x_j = sum_k w_k (Re X_k cos(2 pi jk / n) - Im X_k sin(2 pi jk / n)), w_k = 2 but for k = 0
    # and k = n / 2: the other half's conjugates folded in (their imaginary parts drop out).
    key = ("c2r", n, used, x.device)
    if key not in _matrices:
        weight = torch.full((used, 1), 2.0, dtype=torch.float64)
        weight[0] = 1.0
        if n % 2 == 0 and used == n // 2 + 1:
            weight[n // 2] = 1.0
        angle = _angles(n, used, n)
        _matrices[key] = ((weight * torch.cos(angle)).float().to(x.device), (weight * torch.sin(angle)).float().to(x.device))
    cos, sin = _matrices[key]
    pairs = torch.view_as_real(x.narrow(last, 0, used).resolve_conj())
    re, im = pairs.select(-1, 0), pairs.select(-1, 1)
    out = _along(re, last, lambda t: t @ cos) - _along(im, last, lambda t: t @ sin)
    scale = _scale(n, normalization)
    return (out * scale if scale != 1.0 else out).contiguous()


register("_fft_c2c", fft_c2c, "PrivateUse1", complex_aware=True)
register("_fft_r2c", fft_r2c, "PrivateUse1", complex_aware=True)
register("_fft_c2r", fft_c2r, "PrivateUse1", complex_aware=True)
