"""What the Jacobi SVD (vtpu/linalg_svd.py) and eigh (vtpu/linalg_eigh.py) share: the order in
which n/2 disjoint index pairs are rotated at once, and the rotation of column pairs.

A round-robin tournament (the circle method) meets every pair of n (even) indices once in n - 1
steps: a sweep. Each step gathers its pairs' first columns, then their second columns, together
(`order`), rotates the halves elementwise, and puts the columns back with one permutation
(`back`). The sweep count is fixed (SWEEPS: a convergence test would read a value back to the
host); Jacobi converges quadratically, and a pair already converged gets the identity exactly.
"""
from __future__ import annotations

import torch

SWEEPS = 10
MAX_ORDER = 256  # n - 1 steps of a few kernels per sweep: larger matrices fall back, named
_schedules: dict = {}


def steps(n: int, device):
    """(order, back) for each step of SWEEPS sweeps over n (even) indices."""
    key = (n, device)
    if key not in _schedules:
        players, orders, backs = list(range(n)), [], []
        for _ in range(n - 1):
            order = players[: n // 2] + players[n // 2:][::-1]  # pair i: players[i] and players[n - 1 - i]
            orders.append(order)
            backs.append([order.index(column) for column in range(n)])
            players = [players[0], players[-1]] + players[1:-1]  # all but the first move round
        _schedules[key] = (torch.tensor(orders).to(device), torch.tensor(backs).to(device))
    orders, backs = _schedules[key]
    for _ in range(SWEEPS):
        for step in range(n - 1):
            yield orders[step], backs[step]


def halves(columns, order):
    """The step's pairs' first and second columns, [..., pairs] each along the last dim."""
    paired = columns.index_select(-1, order)
    half = paired.shape[-1] // 2
    return paired[..., :half], paired[..., half:]


def rotate(columns, c, s, order, back):
    """Each pair (p, q) of `columns` replaced by (c p - s q, s p + c q); c, s: [..., 1, pairs]."""
    p, q = halves(columns, order)
    return torch.cat([c * p - s * q, s * p + c * q], -1).index_select(-1, back)


def identity_if(converged, t):
    """t, or 0 where the pair has converged: its rotation is then the identity, exactly, so
    converged columns stop collecting a rounding at every later step. Returns (c, s) as
    [..., 1, pairs]."""
    t = torch.where(converged, 0.0, t)
    c = torch.rsqrt(1 + t * t)
    return c.unsqueeze(-2), (c * t).unsqueeze(-2)
