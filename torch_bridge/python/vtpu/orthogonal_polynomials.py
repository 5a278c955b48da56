"""torch.special's orthogonal polynomials on the chip (Chebyshev T/U/V/W and their shifted forms,
Hermite H/He, Laguerre L, Legendre P), evaluated as the CPU does (ATen/native/Math.h): the
three-term recurrence up to each element's degree (n truncated toward zero), the closed
trigonometric forms the CPU takes for high degrees inside (-1, 1), and its special cases at the
interval's ends and for negative n. Every branch is computed elementwise and chosen with `where`.

The recurrence runs to the largest degree present, so a tensor n is read back first (a sync point,
as bincount's range is); degrees beyond MAX_DEGREE run on the CPU, named. These ops have no
derivatives in torch.
"""
from __future__ import annotations

import torch

from .composed_fallback import run_on_cpu
from .python_kernels import register


MAX_DEGREE = 1024
HERMITE_LIMIT = 128  # the CPU's float limit: higher degrees are NaN (getHermitianLimit<float>)


def _operands(x, n):
    """x and n as tensors of the result's dtype on x's or n's device (torch passes Python scalars
    as CPU 0-d tensors, or as numbers), n truncated toward zero as the CPU's int64 cast does."""
    x, n = (v if isinstance(v, torch.Tensor) else torch.tensor(v) for v in (x, n))
    dtype = torch.result_type(x, n)
    dtype = dtype if dtype.is_floating_point else torch.get_default_dtype()
    device = x.device if x.device.type != "cpu" else n.device
    x, n = x.to(device, dtype), n.to(device, dtype)
    n = torch.where(n.isfinite(), n.trunc(), -1.0)  # NaN or inf degrees: the CPU gives 0 or garbage
    return torch.broadcast_tensors(x, n)


def _largest_degree(n) -> int:
    return max(int(n.max().item()), 0) if n.numel() else 0


def _recurrence(n, first, second, step, top):
    """P_n from P_0 = first, P_1 = second and P_{j+1} = step(j, P_j, P_{j-1}), for n up to top."""
    previous, current = torch.ones_like(n) * first, second
    result = torch.where(n == 0, previous, current)
    for j in range(1, top):
        previous, current = current, step(j, current, previous)
        result = torch.where(n == j + 1, current, result)
    return result


def _parity_sign(n):
    return 1 - 2 * (n - 2 * (n / 2).floor())  # (-1)^n


def _chebyshev(kind, shifted, x, n):
    """T, U, V or W at y = x (or 2x - 1, shifted). The ends are x = +-1 (x = 1 and x = 0 when
    shifted); the trigonometric forms apply above degree 6 or 8 (4 for shifted W) inside (-1, 1)."""
    x, n = _operands(x, n)
    top = _largest_degree(n)
    if top > MAX_DEGREE:
        return None
    y = x + x - 1 if shifted else x
    first = {"t": y, "u": y + y, "v": y + y - 1, "w": y + y + 1}[kind]
    out = _recurrence(n, 1.0, first, lambda j, q, p: (y + y) * q - p, top)
    theta = y.acos()
    above = {"t": 6, "u": 6 if shifted else 8, "v": 6 if shifted else 8, "w": 4 if shifted else 8}[kind]
    odd_sign = _parity_sign(n)
    if kind == "t":
        trig = (n * theta).cos()
    elif kind == "u":
        trig = torch.where(theta.sin() != 0, ((n + 1) * theta).sin() / theta.sin(), (n + 1) * ((n + 1) * theta).cos() / y)
    elif kind == "v":
        trig = torch.where((theta / 2).sin() != 1, ((n + 0.5) * theta).cos() / (theta / 2).cos(), odd_sign * (2 * n + 1))
    else:  # where cos(theta / 2) rounds to 1 the CPU gives 2n + 1 for x > 0 (unshifted only) or (-1)^n
        at_one = torch.where(y > 0, 2 * n + 1, odd_sign) if not shifted else odd_sign
        trig = torch.where((theta / 2).cos() != 1, ((n + 0.5) * theta).sin() / (theta / 2).sin(), at_one)
    out = torch.where((n > above) & (y.abs() < 1), trig, out)
    high_end = {"t": 1.0, "u": n + 1, "v": 1.0, "w": 2 * n + 1}[kind]
    low_end = {"t": odd_sign, "u": odd_sign * (n + 1), "v": odd_sign * (2 * n + 1), "w": odd_sign}[kind]
    at_high, at_low = (x == 1, x == 0) if shifted else (x == 1, x == -1)
    out = torch.where(at_high, high_end, torch.where(at_low, low_end, out))
    return torch.where(n < 0, 0.0, out)


def _hermite(physicists, x, n):
    x, n = _operands(x, n)
    top = min(_largest_degree(n), HERMITE_LIMIT + 1)
    if physicists:  # H: 2x H_j - 2j H_{j-1}
        out = _recurrence(n, 1.0, x + x, lambda j, q, p: (x + x) * q - (2 * j) * p, top)
    else:  # He: x He_j - j He_{j-1}
        out = _recurrence(n, 1.0, x, lambda j, q, p: x * q - j * p, top)
    out = torch.where(n > HERMITE_LIMIT, torch.nan, out)
    return torch.where(n < 0, 0.0, out)


def _laguerre(x, n):
    x, n = _operands(x, n)
    top = _largest_degree(n)
    if top > MAX_DEGREE:
        return None
    out = _recurrence(n, 1.0, 1 - x, lambda j, q, p: (((j + j) + (1 - x)) * q - j * p) / (j + 1), top)
    return torch.where(n < 0, 0.0, torch.where(x.abs() == 0, 1.0, out))


def _legendre(x, n):
    x, n = _operands(x, n)
    top = _largest_degree(n)
    if top > MAX_DEGREE:
        return None
    out = _recurrence(n, 1.0, x, lambda j, q, p: ((j + j + 1) * x * q - j * p) / (j + 1), top)
    at_end = torch.where((x > 0) | (_parity_sign(n) > 0), 1.0, -1.0)
    return torch.where(n < 0, 0.0, torch.where(x.abs() == 1, at_end, out))


def _register(name, evaluate):
    def kernel(x, n):
        out = evaluate(x, n)
        if out is None:
            device = next(v.device for v in (x, n) if isinstance(v, torch.Tensor) and v.device.type != "cpu")
            return run_on_cpu(name, f"degrees above {MAX_DEGREE}", x, n).to(device)
        return out
    register(name, kernel, "PrivateUse1")


for _kind in "tuvw":
    _register(f"special_chebyshev_polynomial_{_kind}", lambda x, n, k=_kind: _chebyshev(k, False, x, n))
    _register(f"special_shifted_chebyshev_polynomial_{_kind}", lambda x, n, k=_kind: _chebyshev(k, True, x, n))
_register("special_hermite_polynomial_h", lambda x, n: _hermite(True, x, n))
_register("special_hermite_polynomial_he", lambda x, n: _hermite(False, x, n))
_register("special_laguerre_polynomial_l", _laguerre)
_register("special_legendre_polynomial_p", _legendre)
