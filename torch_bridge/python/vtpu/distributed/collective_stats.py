"""What the interconnect carried in this process, by collective, for vtpu.stats()["interconnect"]:
calls, bytes (each rank's view: its input for reductions, the whole output for gathers) and
simulated seconds, both the collective's own modelled time and how far it moved this rank's
clock (which includes waiting for the last rank to arrive)."""

from __future__ import annotations

_totals: dict[str, dict[str, float]] = {}


def record(name: str, nbytes: int, modelled_s: float, clock_advance_s: float) -> None:
    entry = _totals.setdefault(name, {"calls": 0, "bytes": 0, "modelled_seconds": 0.0, "clock_seconds": 0.0})
    entry["calls"] += 1
    entry["bytes"] += nbytes
    entry["modelled_seconds"] += modelled_s
    entry["clock_seconds"] += clock_advance_s


def snapshot() -> dict[str, dict[str, float]]:
    return {name: dict(entry) for name, entry in _totals.items()}


def reset() -> None:
    _totals.clear()
