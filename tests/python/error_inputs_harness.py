"""Bad input against PyTorch's OpInfo database: each op's `error_inputs` (inputs torch's own tests
expect an op to reject, with the exception type and a message pattern) run on "tpu" with the CPU
fallback off, results read back so deferred work runs too. Used by scripts/error_inputs_report.py
(the full sweep, written to docs/error_inputs.md) and by test_error_inputs.py (a fixed sample in CI).

Each error input is classified:
  match        raised the expected exception type with a message matching the pattern, as the CPU does,
               or exactly what torch's meta kernel raises for the same call (its wording of the check)
  other error  raised, but another type or another message (the cause in the report)
  unsupported  raised vtpu's NotImplementedError: the chip declined the op before torch's checks ran
  silent       returned a result where the CPU raises: bad input accepted
  skipped      the CPU itself does not raise as expected (device-specific inputs): not counted
"""
from __future__ import annotations

import re
import warnings

import torch
from torch.utils._pytree import tree_map

import vtpu
from opinfo_harness import OpResult, op_name

STATUSES = ("match", "other error", "unsupported", "silent", "crash")


class ErrorInputsResult(OpResult):
    WORST_FIRST = ("crash", "silent", "other error", "unsupported")
    BEST = "match"


def _mover(device):
    """Moves tensors to `device` keeping their storage sharing and strides: several error inputs
    are about an out= tensor that overlaps an input, or overlaps itself (stride 0)."""
    storages = {}

    def move(x):
        if not isinstance(x, torch.Tensor) or device == "cpu":
            return x
        if x.device.type != "cpu":  # (inputs about devices carry meta tensors)
            return x.to(device)
        key = (x.untyped_storage().data_ptr(), x.dtype)
        if key not in storages:
            whole = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage())
            storages[key] = whole.to(device)
        return storages[key].as_strided(x.shape, x.stride(), x.storage_offset())

    return move


def _call(op, sample, device):
    move = _mover(device)
    result = op(*tree_map(move, [sample.input, *sample.args]), **tree_map(move, sample.kwargs))
    # Read every result back: deferred kernels run (and fail) here, as CUDA's asynchronous errors
    # surface at a synchronisation.
    if device != "meta":
        tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, result)


def _raised(op, sample, device):
    try:
        _call(op, sample, device)
    except Exception as e:  # noqa: BLE001 - every exception is a result here
        return e
    return None


def classify(op, error_input) -> tuple[str, str]:
    """(status, detail) of one error input on tpu."""
    sample, expected, pattern = error_input.sample_input, error_input.error_type, error_input.error_regex
    on_cpu = _raised(op, sample, "cpu")
    if not isinstance(on_cpu, expected) or not re.search(pattern, str(on_cpu)):
        return "skipped", ""
    on_tpu = _raised(op, sample, "tpu")
    if on_tpu is None:
        return "silent", f"no error; the CPU raises {type(on_cpu).__name__}: {str(on_cpu)[:160]}"
    if isinstance(on_tpu, expected) and re.search(pattern, str(on_tpu)):
        return "match", ""
    # torch's own check, in its meta kernel's words (vtpu asks the meta kernel before declining an
    # op, and some meta kernels word a check differently from the CPU's: cat's ranks)
    on_meta = _raised(op, sample, "meta")
    if type(on_tpu) is type(on_meta) and str(on_tpu).splitlines()[:1] == str(on_meta).splitlines()[:1]:
        return "match", ""
    message = str(on_tpu).splitlines()[0][:200] if str(on_tpu) else ""
    if isinstance(on_tpu, NotImplementedError) and "vtpu" in message:
        return "unsupported", message
    return "other error", f"{type(on_tpu).__name__}: {message} (expected {expected.__name__} matching {pattern!r})"


def run_error_inputs(op) -> ErrorInputsResult:
    """Every error input of one OpInfo entry, with the fallback off."""
    counts: dict = {}
    problem = ""
    fallback = vtpu._C.cpu_fallback_allowed()
    vtpu.set_cpu_fallback(False)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for error_input in op.error_inputs("cpu"):
                status, detail = classify(op, error_input)
                counts[status] = counts.get(status, 0) + 1
                if detail and not problem:
                    problem = detail
                try:
                    vtpu.synchronize()  # (work a failed call left pending is not this input's)
                except Exception:  # noqa: BLE001
                    pass
    finally:
        vtpu.set_cpu_fallback(fallback)
    return ErrorInputsResult(op_name(op), counts, problem)


def ops_with_error_inputs() -> list:
    from torch.testing._internal.common_methods_invocations import op_db

    return [op for op in op_db if op.error_inputs_func is not None]
