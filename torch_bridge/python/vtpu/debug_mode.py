"""Debug mode: TorchTPU's third eager mode, launch-blocking with checks (vtpu.set_mode("debug"),
VTPU_MODE=debug or VTPU_LAUNCH_BLOCKING=1).

Every op on tpu tensors runs at once, as in strict_eager (the C++ side), and this dispatch mode
checks it:
- an op whose inputs are all finite but whose output holds NaN or Inf raises FloatingPointError
  naming the op and the Python line that called it (like JAX's debug_nans/debug_infs): the first
  op where the non-finite values appear, not the loss many ops later;
- any error an op raises (a kernel's trap, an out-of-range index) gets the op's name and Python
  line added to its message;
- user kernels (vtpu.run_assembly) also check reads of VMEM they never wrote; races between a
  DMA and vector accesses of the same bytes are reported in every mode.

The checks copy each op's floating inputs and outputs to the host, so debug mode is slow; it is a
mode for finding where something goes wrong. Ops that make uninitialised memory (torch.empty)
are not checked for NaN. The dispatch mode is entered on the thread that turns debug mode on;
autograd's backward runs under it too (torch carries dispatch modes to its threads). There the
op has no Python line of its own: debug mode turns on autograd's anomaly mode (without its NaN
check, which this one replaces) so each backward node keeps the traceback of its forward call,
and the message names the node and the forward's line.
"""
import math
import pathlib
import re
import sys
import sysconfig

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

# Frames in these files are torch's, vtpu's or the standard library's, never the user's line. The
# standard library's directory also holds site-packages, so installed libraries (transformers)
# count as library code too: the line named is the user's own call into them.
_INTERNAL = tuple(str(p) for p in (pathlib.Path(torch.__file__).parent, pathlib.Path(__file__).parent,
                                   pathlib.Path(sysconfig.get_paths()["stdlib"]))) + ("<frozen",)

# Their results are uninitialised memory by definition: whatever bits they hold is no finding.
_UNINITIALISED_RESULTS = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty",
                          "new_empty_strided", "resize_", "set_"}


_FRAME = re.compile(r'File "(.*)", line (\d+), in (.*)')


def user_line() -> str:
    """Where the running op was called from: 'at file:line in function' for the innermost frame
    outside torch, vtpu, the standard library and installed packages; in the backward pass, the
    node and the line of its forward call (from anomaly mode's traceback)."""
    frame = sys._getframe(1)
    while frame is not None:
        path = frame.f_code.co_filename
        if not path.startswith(_INTERNAL):
            return f"at {path}:{frame.f_lineno} in {frame.f_code.co_name}"
        frame = frame.f_back
    node = torch._C._current_autograd_node()
    if node is None:
        return "from C++ (no Python line)"
    forward = [m.groups() for m in map(_FRAME.search, node.metadata.get("traceback_") or []) if m]
    forward = [f for f in forward if not f[0].startswith(_INTERNAL)]
    if not forward:
        return f"in the backward pass, in {node.name()} (no forward line recorded)"
    path, line, function = forward[-1]
    return f"in the backward pass, in {node.name()}, whose forward ran at {path}:{line} in {function}"


def located(error: BaseException, what: str) -> BaseException:
    """`error` with `what` and the caller's Python line added to its message."""
    where = f"\n(vtpu: {what}, called {user_line()})"
    if error.args and isinstance(error.args[0], str):
        error.args = (error.args[0] + where,) + error.args[1:]
    else:
        error.add_note(where.strip())
    return error


def _op_name(func) -> str:
    overload = func._overloadname
    return func._schema.name + ("" if overload == "default" else "." + overload)


def _floating(x) -> bool:
    return isinstance(x, torch.Tensor) and (x.is_floating_point() or x.is_complex()) and x.device.type != "meta"


def _all_finite(leaves) -> bool:
    for x in leaves:
        if isinstance(x, float) and not math.isfinite(x):
            return False
        if _floating(x) and x.numel() and not torch.isfinite(x.detach().cpu()).all():
            return False
    return True


def _non_finite_counts(result):
    """(NaNs, Infs) among the floating tpu tensors of an op's result."""
    nans = infs = 0
    for x in pytree.tree_leaves(result):
        if _floating(x) and x.device.type == "tpu" and x.numel():
            host = x.detach().cpu()
            nans += int(torch.isnan(host).sum())
            infs += int(torch.isinf(host).sum())
    return nans, infs


class _CheckEachOp(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        leaves = pytree.arg_tree_leaves(*args, **kwargs)
        if not any(isinstance(x, torch.Tensor) and x.device.type == "tpu" for x in leaves):
            return func(*args, **kwargs)
        name = _op_name(func)
        check = func.overloadpacket.__name__ not in _UNINITIALISED_RESULTS and _all_finite(leaves)
        try:
            result = func(*args, **kwargs)
        except Exception as error:
            raise located(error, f"in {name}") from None
        if check:
            nans, infs = _non_finite_counts(result)
            if nans or infs:
                raise FloatingPointError(f"vtpu debug mode: {name} made {nans} NaN and {infs} Inf values from finite "
                                         f"inputs, {user_line()}")
        return result


_active = None
_anomaly_before = None  # (enabled, check_nan) to restore when debug mode ends


def enable() -> None:
    global _active, _anomaly_before
    if _active is None:
        _anomaly_before = (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled())
        torch.autograd.set_detect_anomaly(True, check_nan=False)
        _active = _CheckEachOp()
        _active.__enter__()


def disable() -> None:
    global _active
    if _active is None:
        return
    if _get_current_dispatch_mode() is not _active:
        raise RuntimeError("vtpu: debug mode cannot end while a TorchDispatchMode entered after it is still active")
    _active.__exit__(None, None, None)
    _active = None
    torch.autograd.set_detect_anomaly(*_anomaly_before)
