"""Bit shifts of integer tensors on the chip (torch_bridge/csrc/aten/bit_shifts.cc,
kernels/compose/bit_shifts.h) against the CPU: every amount in and out of each dtype's width,
by tensors and by constants, the operator, function, in-place and out= forms, int64 of known
magnitude, and what stays on the CPU, named."""
import pytest
import torch

import vtpu

EDGES = {torch.int32: [-(2**31), 2**31 - 1, -1, 0, 1, 5, -7, 2**24 + 3, -(2**30) - 5, 123456789],
         torch.int8: [-128, 127, -1, 0, 1, 5, -7, 64, -65, 100], torch.uint8: [0, 1, 5, 7, 64, 100, 127, 128, 200, 255]}


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("dtype", sorted(EDGES, key=str))
@pytest.mark.parametrize("direction", ["left", "right"])
def test_every_amount_by_a_tensor_and_by_constants(mode, dtype, direction, no_fallback):
    vtpu.set_mode(mode)
    fn = torch.bitwise_left_shift if direction == "left" else torch.bitwise_right_shift
    values = torch.tensor(EDGES[dtype], dtype=dtype)
    low = 0 if dtype == torch.uint8 else -3
    amounts = torch.arange(low, 40, dtype=dtype)  # inside the width, at it, past it, negative
    a, s = torch.meshgrid(values, amounts, indexing="ij")
    assert torch.equal(fn(a.to("tpu"), s.to("tpu")).cpu(), fn(a, s))
    for amount in range(low, 40):
        assert torch.equal(fn(values.to("tpu"), amount).cpu(), fn(values, amount)), amount
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_operator_in_place_out_and_number_forms(no_fallback):
    x = torch.tensor([3, -9, 200, -(2**20)], dtype=torch.int32)
    t = x.to("tpu")
    assert torch.equal((t << 3).cpu(), x << 3) and torch.equal((t >> 2).cpu(), x >> 2)
    assert torch.equal((1 << t.abs().clamp(max=30)).cpu(), 1 << x.abs().clamp(max=30))
    u = t.clone()
    u <<= 4
    u >>= 1
    assert torch.equal(u.cpu(), (x << 4) >> 1)
    out = torch.empty(4, dtype=torch.int32, device="tpu")
    torch.bitwise_right_shift(t, 1, out=out)
    assert torch.equal(out.cpu(), x >> 1)
    packed = torch.tensor([0x1F, 0xA3, 0x70], dtype=torch.uint8)  # int4 pairs, unpacked as quantization code does
    p = packed.to("tpu")
    assert torch.equal(((p >> 4) & 0xF).cpu(), (packed >> 4) & 0xF) and torch.equal((p << 4).cpu(), packed << 4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_int64_of_known_magnitude(no_fallback):
    x = torch.tensor([5, -7, 2**20, -(2**30), 0, 2**31 - 1])
    t = x.to("tpu")
    for amount in (0, 1, 17, 31, 40, 63, 64, -1):
        assert torch.equal((t >> amount).cpu(), x >> amount), amount
    small = torch.tensor([5, -7, 1000, 0])
    assert torch.equal((small.to("tpu") << 20).cpu(), small << 20)
    amounts = torch.tensor([0, 3, 20, 1])
    assert torch.equal((small.to("tpu") << amounts.to("tpu")).cpu(), small << amounts)
    assert torch.equal((t >> amounts.repeat(2)[:6].to("tpu")).cpu(), x >> amounts.repeat(2)[:6])
    precision = torch.arange(22)  # torch's bicubic decomposition: 1 << (precision + 1)
    assert torch.equal((1 << (precision.to("tpu") + 1)).cpu(), 1 << (precision + 1))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_what_stays_on_the_cpu(no_fallback):
    with pytest.raises(NotImplementedError, match="bitwise_left_shift.*int64 whose magnitude"):
        torch.tensor([2**20]).to("tpu") << 12  # 2^32: past int32
    with pytest.raises(NotImplementedError, match="bitwise_right_shift.*int16"):
        torch.tensor([5], dtype=torch.int16).to("tpu") >> 1
    with pytest.raises(NotImplementedError, match="bitwise_left_shift.*inputs other than integers"):
        torch.tensor([1.5]).to("tpu") << 1
