"""vtpu on many chips: the torch.distributed backend "tpu_dist" (process_group.py), one rank per
simulated chip, its collectives timed by the simulator's interconnect model (interconnect.py).

    torch.distributed.init_process_group("tpu_dist", ...)   # under torchrun, or with a store

Registered for devices `tpu` and `cpu` when vtpu loads, so a group made without naming a backend
also uses it for tpu tensors.
"""

from __future__ import annotations

from .collective_stats import reset as reset_stats
from .collective_stats import snapshot as stats
from .interconnect import Slice, parse_topology

BACKEND = "tpu_dist"


def register() -> None:
    import torch.distributed as dist

    if not dist.is_available() or BACKEND.upper() in dist.Backend._plugins:
        return
    from .process_group import create

    dist.Backend.register_backend(BACKEND, create, devices=["tpu", "cpu"])


__all__ = ["BACKEND", "Slice", "parse_topology", "register", "reset_stats", "stats"]
