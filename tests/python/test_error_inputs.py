"""A fixed sample of the OpInfo error-input sweep (scripts/error_inputs_report.py, docs/error_inputs.md):
for these ops every error input torch's tests define is rejected on tpu as on the CPU (or in the
words of torch's meta kernel), with the fallback off. Chosen to cover each way vtpu gets there:
torch's checks run on meta tensors before declining (hstack, ormqr), checks in the lowerings
(native_layer_norm, neg, gelu, amax, roll, adaptive_max_pool2d), and compositions behind the
Python registration path (multi_margin_loss)."""
import pytest

from error_inputs_harness import op_name, ops_with_error_inputs, run_error_inputs

SAMPLE = ["native_layer_norm", "neg", "nn.functional.gelu", "amax", "amin", "roll", "nn.functional.adaptive_max_pool2d",
          "nn.functional.multi_margin_loss", "hstack", "mean", "narrow_copy", "ormqr", "nn.functional.max_pool2d",
          "nn.functional.embedding", "masked_scatter", "nn.functional.group_norm", "nn.functional.rms_norm", "linalg.cross",
          "nn.functional.avg_pool3d", "diag_embed"]
OPS = {op_name(op): op for op in ops_with_error_inputs()}


@pytest.mark.parametrize("name", SAMPLE)
def test_error_inputs_are_rejected_as_on_the_cpu(name):
    result = run_error_inputs(OPS[name])
    assert result.counts.get("match"), result.counts
    assert result.status == "match", (result.counts, result.first_problem)
