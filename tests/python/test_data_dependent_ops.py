"""Ops whose result depends on the values, so the value is read back first (a sync point, as on
CUDA): repeat_interleave with a tensor of repeats, nonzero of 0-d and int64 tensors and
torch._assert_async, on the chip with no CPU op in both eager modes, against the CPU. They stopped
two zoo architectures (fastspeech2_conformer, openai_privacy_filter) and compiled graphs' asserts."""
import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")

REPEATS = [torch.tensor([1, 0, 3]), torch.tensor([2, 2, 5, 0, 1], dtype=torch.int32), torch.tensor([], dtype=torch.long),
           torch.tensor([0, 0]), torch.tensor([70000])]


@pytest.mark.parametrize("repeats", REPEATS, ids=lambda r: str(r.tolist()))
def test_indices_repeated(repeats):
    got = torch.repeat_interleave(repeats.to("tpu"))
    want = torch.repeat_interleave(repeats)
    assert got.dtype == want.dtype
    assert torch.equal(got.cpu(), want)


def test_rows_repeated_along_a_dim_and_its_gradient():
    x = torch.randn(4, 3, requires_grad=True)
    repeats = torch.tensor([2, 0, 1, 3])
    y = x.detach().to("tpu").requires_grad_()
    got = y.repeat_interleave(repeats.to("tpu"), dim=0)
    want = x.repeat_interleave(repeats, dim=0)
    assert torch.equal(got.detach().cpu(), want.detach())
    weights = torch.randn(want.shape)
    (want * weights).sum().backward()
    (got * weights.to("tpu")).sum().backward()
    torch.testing.assert_close(y.grad.cpu(), x.grad)


def test_bad_repeats_get_torchs_errors():
    with pytest.raises(RuntimeError, match="repeats can not be negative"):
        torch.repeat_interleave(torch.tensor([1, -1], device="tpu"))
    with pytest.raises(RuntimeError, match="repeat_interleave only accept 1D vector as repeat"):
        torch.repeat_interleave(torch.tensor([[1, 2]], device="tpu"))
    with pytest.raises(RuntimeError, match="allocated size does not match required size"):
        torch.repeat_interleave(torch.tensor([1, 2], device="tpu"), output_size=5)


@pytest.mark.parametrize("value", [3.0, 0.0, True, False])
def test_nonzero_of_a_0d_tensor(value):
    x = torch.tensor(value)
    got = torch.nonzero(x.to("tpu"))
    assert got.shape == torch.nonzero(x).shape and got.dtype == torch.long


def test_nonzero_of_an_int64_tensor():
    x = torch.tensor([[0, 5, -3_000_000_000], [0, 0, 7]])
    assert torch.equal(torch.nonzero(x.to("tpu")).cpu(), torch.nonzero(x))


def test_assert_async_reads_the_value_and_raises_the_cpus_errors():
    torch._assert_async(torch.tensor(2.0, device="tpu"))
    torch._assert_async(torch.tensor(True, device="tpu"), "never raised")
    with pytest.raises(RuntimeError, match="Expected Tensor with single nonzero value, but got zero"):
        torch._assert_async(torch.tensor(0, device="tpu"))
    with pytest.raises(RuntimeError, match="custom message"):
        torch._assert_async(torch.tensor(False, device="tpu"), "custom message")
    with pytest.raises(RuntimeError, match="more than one value is ambiguous"):
        torch._assert_async(torch.ones(2, device="tpu"))
