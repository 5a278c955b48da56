"""A fixed sample of PyTorch's OpInfo database through the differential harness (the full sweep
is scripts/opinfo_report.py -> docs/opinfo.md): these ops are lowered, so every sample must match
the CPU, natively or (for int64 corner cases) through the counted fallback."""
import pytest
import torch

pytest.importorskip("expecttest")
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import vtpu  # noqa: E402,F401
from opinfo_harness import run_op  # noqa: E402

SAMPLE = ["add", "sub", "mul", "div.no_rounding_mode", "exp", "log", "tanh", "sigmoid", "rsqrt", "abs", "neg", "maximum", "minimum",
          "clamp", "where", "softmax", "log_softmax", "mm", "bmm", "addmm", "sum", "mean", "amax", "cat",
          "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.layer_norm",
          "nn.functional.linear"]


# Their first samples use forms not lowered yet (0-dim inputs, tensor bounds): fallback only.
FALLBACK_ONLY = {"clamp", "sum", "mean", "amax"}


@pytest.mark.parametrize("name", SAMPLE)
def test_opinfo_sample_matches_cpu(name):
    base, _, variant = name.partition(".") if name.startswith(("div",)) else (name, "", "")
    ops = [op for op in op_db if op.name == base and op.variant_test_name == variant]
    assert ops, f"{name} is not in op_db"
    result = run_op(ops[0])
    assert result.status in ("native", "fallback"), (result.status, result.first_problem)
    if name not in FALLBACK_ONLY:
        assert result.counts.get("native", 0) >= 1  # at least one sample ran entirely on the chip
