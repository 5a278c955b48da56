"""torch._assert_async on the chip (torch.compile's graphs assert shapes and values with it): the
value is read back, a sync point where CUDA would assert on the device later, and a zero raises
the CPU's error (or the given message)."""
from __future__ import annotations

from .python_kernels import register


def _assert_async(self, assert_msg=None):
    if self.numel() == 0:
        raise RuntimeError("Boolean value of Tensor with no values is ambiguous")
    if self.numel() > 1:
        raise RuntimeError("Boolean value of Tensor with more than one value is ambiguous")
    if not bool(self.cpu().item()):
        raise RuntimeError(assert_msg if assert_msg is not None else "Expected Tensor with single nonzero value, but got zero")


register("_assert_async", _assert_async, "PrivateUse1")
register("_assert_async.msg", _assert_async, "PrivateUse1")
