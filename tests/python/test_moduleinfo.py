"""A fixed sample of torch's ModuleInfo database through the differential harness (the full sweep
is scripts/moduleinfo_report.py -> docs/moduleinfo.md): forward and backward, training and eval,
outputs, gradients and buffers match the CPU with no CPU op at all."""
import pytest

pytest.importorskip("expecttest")
from torch.testing._internal.common_modules import module_db  # noqa: E402

import vtpu  # noqa: E402,F401
from moduleinfo_harness import run_module  # noqa: E402

SAMPLE = ["nn.Linear", "nn.Conv2d", "nn.BatchNorm2d", "nn.LayerNorm", "nn.GroupNorm", "nn.LSTM", "nn.GRUCell",
          "nn.TransformerEncoderLayer", "nn.MultiheadAttention", "nn.Embedding", "nn.CrossEntropyLoss", "nn.NLLLoss",
          "nn.MaxPool2d", "nn.AvgPool2d", "nn.LPPool1d", "nn.GELU", "nn.Hardshrink", "nn.LazyConv2d"]


@pytest.mark.parametrize("name", SAMPLE)
def test_module_runs_natively_and_matches_the_cpu(name):
    (info,) = [m for m in module_db if m.name == name]
    result = run_module(info)
    assert result.status == "native", (result.counts, result.first_problem)
