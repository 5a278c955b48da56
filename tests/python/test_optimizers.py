"""A fixed sample of torch's optimizer database through the differential harness (the full sweep
is scripts/optimizer_report.py -> docs/optimizers.md): each form steps natively (no CPU op) and
matches the CPU, under a scheduler and clip_grad_norm_."""
import pytest

pytest.importorskip("expecttest")
from torch.testing._internal.common_optimizers import optim_db  # noqa: E402

import vtpu  # noqa: E402,F401
from optimizer_harness import run_case  # noqa: E402

SAMPLE = [("Adam", "fused"), ("Adam", "foreach"), ("AdamW", "fused"), ("AdamW", "forloop"), ("SGD", "fused"),
          ("SGD", "foreach"), ("Adagrad", "fused"), ("RMSprop", "forloop"), ("NAdam", "foreach"), ("Adafactor", "forloop")]


@pytest.mark.parametrize("name,impl", SAMPLE)
def test_optimizer_steps_natively_and_matches_the_cpu(name, impl):
    (info,) = [o for o in optim_db if o.optim_cls.__name__ == name]
    inputs = info.optim_inputs_func(device="cpu")
    for optim_input in inputs:
        status, problem = run_case(info, optim_input, impl)
        assert status == "native", (optim_input.desc, status, problem)
