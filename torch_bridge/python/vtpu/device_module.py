"""torch.tpu: the device module torch expects of a backend (is_available, device_count, seeding,
memory statistics), registered by `import vtpu`."""
from __future__ import annotations

import contextlib
import threading

import torch

from . import _C


def is_available() -> bool:
    return _C.device_count() > 0


def device_count() -> int:
    return _C.device_count()


def current_device() -> int:
    return _C.current_device()


def set_device(device) -> None:
    index = torch.device(device).index if not isinstance(device, int) else device
    _C.set_device(0 if index is None else index)


def _index(device) -> int:
    if device is None:
        return current_device()
    if isinstance(device, int):
        return device
    index = torch.device(device).index
    return current_device() if index is None else index


class device:
    """Makes a tpu device current inside a `with` block, as torch.cuda.device does (torch.load
    enters it to restore tensors saved from tpu onto their device)."""

    def __init__(self, device):
        self.index = -1 if device is None else _index(device)
        self.previous = -1

    def __enter__(self):
        self.previous = current_device()
        if self.index >= 0:
            set_device(self.index)
        return self

    def __exit__(self, *exc):
        set_device(self.previous)
        return False


def Event(enable_timing: bool = False, blocking: bool = False, interprocess: bool = False) -> torch.Event:
    """torch.tpu.Event, as torch.cuda.Event: record() marks a point of the program on the current
    device (a sync point: pending work runs first) and elapsed_time() between two events is the
    simulated time, in milliseconds, the chip spent between them."""
    return torch.Event(device=torch.device("tpu", current_device()), enable_timing=enable_timing, blocking=blocking,
                       interprocess=interprocess)


def Stream(device=None, priority: int = 0) -> torch.Stream:
    """A tpu stream. The simulated chip runs one stream per device: every stream is that one, so
    work never overlaps across streams and synchronising any stream synchronises the device."""
    return torch.Stream(device=torch.device("tpu", _index(device)), priority=priority)


def current_stream(device=None) -> torch.Stream:
    return Stream(device)


def default_stream(device=None) -> torch.Stream:
    return Stream(device)


_side_streams = threading.local()


def in_side_stream() -> bool:
    """Whether the caller is inside a `torch.tpu.stream(s)` block."""
    return getattr(_side_streams, "depth", 0) > 0


@contextlib.contextmanager
def stream(stream):
    """`with torch.tpu.stream(s):` as torch.cuda.stream. Kernels still run on the device's one
    stream, but a collective waited for inside the block (FSDP2 issues its all-gathers and
    reduce-scatters inside such blocks, on side streams) does not make the chip's compute wait:
    only what reads its results does (vtpu.distributed), as on CUDA, where such a wait holds up
    the side stream alone."""
    _side_streams.depth = getattr(_side_streams, "depth", 0) + 1
    try:
        yield stream
    finally:
        _side_streams.depth -= 1


def synchronize(device=None) -> None:
    _C.synchronize(_index(device))


def is_initialized() -> bool:
    return True


def _lazy_init() -> None:
    pass


def _is_in_bad_fork() -> bool:
    return False


def manual_seed(seed: int) -> None:
    _C.manual_seed(current_device(), int(seed) & 0xFFFFFFFFFFFFFFFF)


def manual_seed_all(seed: int) -> None:
    for i in range(device_count()):
        _C.manual_seed(i, int(seed) & 0xFFFFFFFFFFFFFFFF)


def initial_seed() -> int:
    return _C.initial_seed(current_device())


def get_rng_state(device="tpu") -> torch.Tensor:
    return _C.get_rng_state(_index(device))


def set_rng_state(new_state: torch.Tensor, device="tpu") -> None:
    _C.set_rng_state(_index(device), new_state)


def get_amp_supported_dtype():
    """bf16 (the MXU's type, autocast's default on tpu) and f16 (a storage format: computed in f32,
    rounded to f16 where torch rounds, as XLA does on TPUs)."""
    return [torch.bfloat16, torch.float16]


def memory_allocated(device=None) -> int:
    return _C.stats()["memory"][_index(device)]["allocated_bytes"]


def max_memory_allocated(device=None) -> int:
    return _C.stats()["memory"][_index(device)]["peak_allocated_bytes"]


def reset_peak_memory_stats(device=None) -> None:
    _C.reset_peak_memory_stats(_index(device))


def memory_summary(device=None) -> str:
    m = _C.stats()["memory"][_index(device)]
    mib = 1024 * 1024
    return (f"tpu:{_index(device)} ({_C.chip_name()}, simulated HBM): "
            f"{m['allocated_bytes'] / mib:.2f} MiB allocated, peak {m['peak_allocated_bytes'] / mib:.2f} MiB, "
            f"capacity {m['capacity_bytes'] / mib:.0f} MiB; VMEM held for a flush's intermediates: peak "
            f"{m['held_vmem_peak_bytes'] / mib:.2f} of {m['held_vmem_capacity_bytes'] / mib:.0f} MiB; both together: peak "
            f"{m['peak_combined_bytes'] / mib:.2f} MiB")


def get_device_name(device=None) -> str:
    """The simulated chip's preset name, as torch.cuda.get_device_name gives the GPU's (every
    chip of a process is the same preset)."""
    return f"vtpu {_C.chip_name()} (simulated TPU)"


class _DeviceProperties:
    """What torch.cuda.get_device_properties offers that a chip has: its name and HBM capacity,
    plus the preset's units (trainers size batches and report memory percentages from these)."""

    def __init__(self, index: int):
        preset = next((p for p in _C.chip_presets() if p["name"] == _C.chip_name()), {})
        self.name = get_device_name(index)
        self.total_memory = _C.stats()["memory"][index]["capacity_bytes"]
        self.tensor_cores = preset.get("tensor_cores")
        self.mxu_per_core = preset.get("mxu_per_core")
        self.clock_hz = preset.get("clock_hz")
        self.vmem_bytes = preset.get("vmem_bytes")

    def __repr__(self):
        return f"_DeviceProperties(name='{self.name}', total_memory={self.total_memory // 2**20}MB)"


def get_device_properties(device=None) -> _DeviceProperties:
    return _DeviceProperties(_index(device))


def memory_stats(device=None) -> dict:
    """torch.cuda.memory_stats's keys that describe simulated HBM. The chip's allocator reserves
    nothing beyond what tensors hold and never retries, so reserved equals allocated."""
    m = _C.stats()["memory"][_index(device)]
    stats = {"num_alloc_retries": 0}
    for kind in ("allocated_bytes", "active_bytes", "reserved_bytes"):
        stats[f"{kind}.all.current"] = m["allocated_bytes"]
        stats[f"{kind}.all.peak"] = m["peak_allocated_bytes"]
    return stats


def memory_reserved(device=None) -> int:
    return memory_allocated(device)


def max_memory_reserved(device=None) -> int:
    return max_memory_allocated(device)


def mem_get_info(device=None) -> tuple[int, int]:
    """(free, total) bytes of the chip's simulated HBM."""
    m = _C.stats()["memory"][_index(device)]
    return m["capacity_bytes"] - m["allocated_bytes"], m["capacity_bytes"]


def empty_cache() -> None:
    """Nothing to give back: freed HBM returns to the chip's allocator at once (no caching)."""
