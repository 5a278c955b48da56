"""torch.compile of float32 grouped matmuls, as Hugging Face's mixture-of-experts layers call them
(vtpu/grouped_mm_meta.py): torch 2.13's meta function accepted bf16 only, so dynamo's fake-tensor
trace failed where eager ran, on the CPU and on tpu alike."""
import pytest
import torch
import torch.nn.functional as F

import vtpu


def _experts(x, weights, offsets):
    return F.grouped_mm(x, weights, offs=offsets)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_compiled_grouped_matmul_matches_eager_on_the_cpu(no_fallback, dtype):
    torch.manual_seed(0)
    x, weights = torch.randn(16, 64).to(dtype), torch.randn(4, 64, 32).to(dtype)
    offsets = torch.tensor([3, 8, 8, 16], dtype=torch.int32)  # one empty group
    want = _experts(x, weights, offsets)
    torch._dynamo.reset()
    got = torch.compile(_experts, backend="tpu")(x.to("tpu"), weights.to("tpu"), offsets.to("tpu")).cpu()
    assert got.dtype == dtype
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(got, want, atol=tolerance, rtol=tolerance)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_the_meta_function_still_refuses_what_torch_refuses():
    # Mixed dtypes and integer inputs keep torch's own message.
    a, b = torch.randn(16, 64, device="meta"), torch.randn(4, 64, 32, device="meta", dtype=torch.bfloat16)
    offsets = torch.tensor([4, 8, 12, 16], dtype=torch.int32, device="meta")
    with pytest.raises(RuntimeError, match="Expected inputs of BF16 type"):
        torch.ops.aten._grouped_mm(a, b, offs=offsets)
    shaped = torch.ops.aten._grouped_mm(a, b.float(), offs=offsets)
    assert shaped.shape == (16, 32) and shaped.dtype == torch.float32
