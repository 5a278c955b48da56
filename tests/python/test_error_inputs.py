"""A fixed sample of the OpInfo error-input sweep (scripts/error_inputs_report.py, docs/error_inputs.md):
for these ops every error input torch's tests define is rejected on tpu as on the CPU (or in the
words of torch's meta kernel), with the fallback off. Chosen to cover each way vtpu gets there:
torch's checks run on meta tensors before declining (hstack, ormqr), checks in the lowerings
(native_layer_norm, neg, gelu, amax, roll, adaptive_max_pool2d), compositions behind the
Python registration path (multi_margin_loss), and torch's stricter out= rules, in the C++ variants
(gather, masked_select, kthvalue) and as checks torch makes only in its CPU kernels
(vtpu/cpu_kernel_checks.py: cat, take, index_select, aminmax, index_add)."""
import pytest
import torch

from error_inputs_harness import op_name, ops_with_error_inputs, run_error_inputs

SAMPLE = ["native_layer_norm", "neg", "nn.functional.gelu", "amax", "amin", "roll", "nn.functional.adaptive_max_pool2d",
          "nn.functional.multi_margin_loss", "hstack", "mean", "narrow_copy", "ormqr", "nn.functional.max_pool2d",
          "nn.functional.embedding", "masked_scatter", "nn.functional.group_norm", "nn.functional.rms_norm", "linalg.cross",
          "nn.functional.avg_pool3d", "diag_embed",
          # out= tensors overlapping an input or themselves, out= dtypes, index_add's source shape: accepted
          # silently until the checks below were written
          "masked_select", "kthvalue", "cat", "take", "index_select", "aminmax", "index_add"]
OPS = {op_name(op): op for op in ops_with_error_inputs()}


@pytest.mark.parametrize("name", SAMPLE)
def test_error_inputs_are_rejected_as_on_the_cpu(name):
    result = run_error_inputs(OPS[name])
    assert result.counts.get("match"), result.counts
    assert result.status == "match", (result.counts, result.first_problem)


def test_gather_out_takes_selfs_dtype_and_shares_no_memory_with_self():
    # (gather's other error input, an index out of range, is rejected with the chip's own message:
    # docs/error_inputs.md)
    x, index = torch.randn(2, 2, device="tpu"), torch.tensor([[0, 1], [1, 0]], device="tpu")
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype float, but got double instead"):
        torch.gather(x, 1, index, out=torch.empty(2, 2, dtype=torch.float64, device="tpu"))
    y = torch.randn(3, device="tpu")
    with pytest.raises(RuntimeError, match="some elements of the input tensor and the written-to tensor refer to a single memory"):
        torch.gather(y, 0, torch.tensor([2, 0, 1], device="tpu"), out=y)
    out = torch.empty(2, 2, device="tpu")
    torch.gather(x, 1, index, out=out)
    assert torch.equal(out.cpu(), torch.gather(x.cpu(), 1, index.cpu()))
