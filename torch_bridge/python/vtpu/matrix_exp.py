"""The matrix exponential on the chip as torch's CPU kernel computes its highest degree: the
matrix scaled by 2^-s so its 1-norm is at most theta_18, Bader, Blanes and Casas' optimised
degree-18 Taylor polynomial (five matrix products: A^2, A^3, A^6 and two more, the coefficients
torch uses), then s squarings. s is per matrix; the largest is read back (a sync point, as torch's
CUDA kernel has one) and every matrix takes that many squaring steps, each keeping the square
only where its own s asks for it. For small norms torch picks a lower degree: the results agree
to f32 rounding. bfloat16 and float16 matrices are exponentiated in f32 and rounded once: the
squarings amplify every rounding of an intermediate, and in those dtypes that costs whole digits
(the CPU's own bfloat16 and float16 kernels give NaN at OpInfo's norms). Registered at
PrivateUse1, so matrix_exp's backward (the exponential of a 2n x 2n block matrix) runs here too.
"""
from __future__ import annotations

import torch

from .python_kernels import register

THETA_18 = 3.010066362817634  # torch's float bound for degree 18
MAX_SQUARINGS = 130  # a norm below f32's largest needs at most 127; infinities and NaN stop here
# Row i: the coefficients of I, A, A^2, A^3, A^6 in B_i (ATen's compute_T18)
T18 = [[0.0, -1.00365581030144618291e-01, -8.02924648241156932449e-03, -8.92138498045729985177e-04, 0.0],
       [0.0, 3.97849749499645077844e-01, 1.36783778460411720168e+00, 4.98289622525382669416e-01, -6.37898194594723280150e-04],
       [-1.09676396052962061844e+01, 1.68015813878906206114e+00, 5.71779846478865511061e-02, -6.98210122488052056106e-03,
        3.34975017086070470649e-05],
       [-9.04316832390810593223e-02, -6.76404519071381882256e-02, 6.75961301770459654925e-02, 2.95552570429315521194e-02,
        -1.39180257516060693404e-05],
       [0.0, 0.0, -9.23364619367118555360e-02, -1.69364939002081722752e-02, -1.40086798182036094347e-05]]


def _degree_18(a):
    identity = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device).expand_as(a)
    a2 = a @ a
    a3 = a2 @ a
    powers = (identity, a, a2, a3, a3 @ a3)
    b = [sum(c * p for c, p in zip(row, powers) if c != 0) for row in T18]
    a9 = b[0] @ b[4] + b[3]
    return b[1] + (b[2] + a9) @ a9


def linalg_matrix_exp(a):
    if a.dtype in (torch.bfloat16, torch.float16):
        return linalg_matrix_exp(a.float()).to(a.dtype)
    n = a.shape[-1]
    if n == 0 or a.numel() == 0:
        return a.clone()
    if n == 1:
        return a.exp()
    norm = a.abs().sum(-2).amax(-1)  # the operator 1-norm: the largest column sum
    s = torch.ceil(torch.log2(norm / THETA_18)).clamp(min=0)
    s = torch.nan_to_num(s, nan=0.0, posinf=MAX_SQUARINGS).clamp(max=MAX_SQUARINGS)
    squarings = int(s.max().item())  # a sync point
    x = _degree_18(a * torch.pow(2.0, -s).to(a.dtype)[..., None, None])
    for i in range(squarings):
        x = torch.where((s > i)[..., None, None], x @ x, x)
    return x


register("linalg_matrix_exp", linalg_matrix_exp, "PrivateUse1")
