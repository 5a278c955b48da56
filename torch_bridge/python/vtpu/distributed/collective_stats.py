"""What the interconnect carried in this process, by collective, for vtpu.stats()["interconnect"]:
calls, bytes (each rank's view: its input for reductions, the whole output for gathers) and the
modelled seconds on the interconnect's timeline. How long the chips stalled for it is
vtpu.stats()["interconnect_wait_seconds"]."""

from __future__ import annotations

_totals: dict[str, dict[str, float]] = {}


def record(name: str, nbytes: int, modelled_s: float) -> None:
    entry = _totals.setdefault(name, {"calls": 0, "bytes": 0, "modelled_seconds": 0.0})
    entry["calls"] += 1
    entry["bytes"] += nbytes
    entry["modelled_seconds"] += modelled_s


def snapshot() -> dict[str, dict[str, float]]:
    return {name: dict(entry) for name, entry in _totals.items()}


def reset() -> None:
    _totals.clear()
