"""A fixed sample of torch's optimizer database through the differential harness (the full sweep
is scripts/optimizer_report.py -> docs/optimizers.md): each form steps natively (no CPU op) and
matches the CPU, under a scheduler and clip_grad_norm_."""
import pytest

pytest.importorskip("expecttest")
from torch.testing._internal.common_optimizers import optim_db  # noqa: E402

import vtpu  # noqa: E402,F401
from optimizer_harness import run_case, worst_status  # noqa: E402

SAMPLE = [("Adam", "fused"), ("Adam", "foreach"), ("AdamW", "fused"), ("AdamW", "forloop"), ("SGD", "fused"),
          ("SGD", "foreach"), ("Adagrad", "fused"), ("RMSprop", "forloop"), ("NAdam", "foreach"), ("Adafactor", "forloop"),
          ("Muon", "forloop")]  # Muon: bf16 Newton-Schulz, then param.add_(bf16 update, alpha=-lr) in f32


@pytest.mark.parametrize("name,impl", SAMPLE)
def test_optimizer_steps_natively_and_matches_the_cpu(name, impl):
    (info,) = [o for o in optim_db if o.optim_cls.__name__ == name]
    inputs = info.optim_inputs_func(device="cpu")
    for optim_input in inputs:
        status, problem = run_case(info, optim_input, impl)
        assert status == "native", (optim_input.desc, status, problem)


def test_a_reports_cell_is_its_worst_configuration():
    # The report once ranked the statuses backwards and showed a form native while one of its
    # configurations mismatched.
    assert worst_status({"native": 6, "mismatch": 1}) == "mismatch"
    assert worst_status({"native": 2, "fallback": 1}) == "fallback"
    assert worst_status({"error": 1, "mismatch": 3, "native": 1}) == "error"
    assert worst_status({"native": 4, "mismatch": 0}) == "native"
