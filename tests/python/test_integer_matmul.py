"""Integer matmuls and convolutions on the chip, exact (kernels/compose/integer_matmul.h,
torch_bridge/csrc/aten/linalg.cc and convolution.cc): int32 at any value (wrapping as the CPU's),
torch._int_mm's int8 products in int32, int64 of known small magnitude, and what stays on the CPU,
named."""
import pytest
import torch
import torch.nn.functional as F

import vtpu


def ints(shape, low, high, dtype, seed):
    return torch.randint(low, high, shape, generator=torch.Generator().manual_seed(seed), dtype=dtype)


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("dtype,low,high", [(torch.int32, -(2**31), 2**31 - 1), (torch.int32, -9, 10), (torch.int64, -9, 10),
                                            (torch.int64, -300, 301)])
def test_matmul_family(mode, dtype, low, high, no_fallback):
    vtpu.set_mode(mode)
    a, b = ints((5, 600), low, high, dtype, 1), ints((600, 3), low, high, dtype, 2)
    assert torch.equal((a.to("tpu") @ b.to("tpu")).cpu(), a @ b)
    x, y = ints((4, 3, 6), low, high, dtype, 3), ints((4, 6, 2), low, high, dtype, 4)
    assert torch.equal(torch.bmm(x.to("tpu"), y.to("tpu")).cpu(), torch.bmm(x, y))
    bias = ints((3, 2), -5, 5, dtype, 5)
    got = torch.addmm(bias.to("tpu"), x[0].to("tpu"), y[0].to("tpu"), beta=2, alpha=3).cpu()
    assert torch.equal(got, torch.addmm(bias, x[0], y[0], beta=2, alpha=3))
    assert torch.equal((x[0].to("tpu").t() @ x[1].to("tpu")).cpu(), x[0].t() @ x[1])  # a transposed view
    assert torch.equal(torch.mv(x[0].to("tpu"), y[0, :, 0].to("tpu")).cpu(), torch.mv(x[0], y[0, :, 0]))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int8_products_summed_in_int32(no_fallback):
    a, b = ints((32, 2500), -128, 128, torch.int8, 6), ints((2500, 16), -128, 128, torch.int8, 7)  # three K slices
    got = torch._int_mm(a.to("tpu"), b.to("tpu"))
    assert got.dtype == torch.int32 and torch.equal(got.cpu(), torch._int_mm(a, b))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("conv", ["conv1d", "conv2d", "conv_transpose2d"])
def test_int64_convolutions(conv, no_fallback):
    spatial = (9,) if conv == "conv1d" else (7, 6)
    x = ints((2, 4) + spatial, -20, 21, torch.int64, 8)
    channels = (4, 3) if conv == "conv_transpose2d" else (6, 2)  # 6 output channels in 2 groups either way
    w = ints(channels + (3,) * len(spatial), -20, 21, torch.int64, 9)
    bias = ints((6,), -100, 100, torch.int64, 10)
    f = getattr(F, conv)
    kwargs = dict(stride=2, padding=1, groups=2)
    assert torch.equal(f(x.to("tpu"), w.to("tpu"), bias.to("tpu"), **kwargs).cpu(), f(x, w, bias, **kwargs))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_what_stays_on_the_cpu(no_fallback):
    big = torch.full((2, 3), 2**20).to("tpu")
    with pytest.raises(NotImplementedError, match="mm.*int64 operands whose products summed over K are not known below 2\\^31"):
        big @ big.t()
    with pytest.raises(NotImplementedError, match="mm.*integer operands other than int32"):
        torch.ones(2, 2, dtype=torch.int8, device="tpu") @ torch.ones(2, 2, dtype=torch.int8, device="tpu")
    with pytest.raises(NotImplementedError, match="convolution.*known magnitude at most 256"):
        F.conv1d(torch.full((1, 1, 4), 1000).to("tpu"), torch.ones(1, 1, 2, dtype=torch.int64).to("tpu"))
