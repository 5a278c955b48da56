"""fmod, remainder and floor division of floats on the chip (kernels/compose/float_remainder.h):
C's exact fmod at every ratio, and torch's formulas on it, matched bit for bit against the CPU
in both eager modes with the fallback off."""
import pytest
import torch

import vtpu

INF, NAN = float("inf"), float("nan")

OPS = {
    "fmod": torch.fmod,
    "remainder": torch.remainder,
    "floor_divide": torch.floor_divide,
    "div_floor": lambda a, b: torch.div(a, b, rounding_mode="floor"),
}


def operands():
    g = torch.Generator().manual_seed(0)
    # magnitudes from 1e-8 to 1e8 each: ratios up to 1e16, far past where f32 division is exact
    a = torch.randn(3000, generator=g) * 10 ** torch.randint(-8, 9, (3000,), generator=g).float()
    b = torch.randn(3000, generator=g) * 10 ** torch.randint(-8, 9, (3000,), generator=g).float()
    special_a = torch.tensor([0.0, -0.0, 5.0, -5.0, 1e-40, -1e-42, INF, -INF, NAN, 7.0, 1.0, 2.0**30 + 64, 1e35, -3e37, 0.3, -0.3])
    special_b = torch.tensor([1.0, 1.0, 0.0, -0.0, 1e-38, 7e-45, 2.0, 2.0, 1.0, INF, 0.1, 3.0, 3e-3, 0.7, -0.1, 0.1])
    return torch.cat([a, special_a]), torch.cat([b, special_b])


def same(got, want):
    # equal values with equal signs (fmod keeps -0.0), NaN where NaN
    return bool((((got == want) & (torch.signbit(got) == torch.signbit(want))) | (got.isnan() & want.isnan())).all())


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_float_division_ops_match_cpu_bit_for_bit(name, mode, no_fallback):
    vtpu.set_mode(mode)
    a, b = operands()
    assert same(OPS[name](a.to("tpu"), b.to("tpu")).cpu(), OPS[name](a, b))
    assert same(OPS[name](a.to("tpu"), 2.5).cpu(), OPS[name](a, 2.5))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("name", sorted(OPS))
def test_half_precision_operands_divide_in_f32_and_round_once(name, no_fallback):
    a, b = operands()
    for dtype in (torch.bfloat16, torch.float16):
        x, y = a.to(dtype), b.to(dtype)
        assert same(OPS[name](x.to("tpu"), y.to("tpu")).cpu(), OPS[name](x, y))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_the_remainder_is_exact_where_a_quotient_rounds_up():
    # 1 / 0.1 rounds to 10.0 in f32 though 0.1f * 10 > 1: a naive a - trunc(a / b) * b gives 0 or
    # a negative number; fmod is 0.1f's exact remainder, and floor division 9
    a, b = torch.tensor([1.0]), torch.tensor([0.1])
    assert torch.equal(torch.fmod(a.to("tpu"), b.to("tpu")).cpu(), torch.fmod(a, b))
    assert torch.fmod(a, b).item() > 0.09
    assert torch.equal((a.to("tpu") // b.to("tpu")).cpu(), torch.tensor([9.0]))


def test_ratios_past_f32_get_cs_fmod_as_the_cpus_scalar_path_does():
    # torch's CPU kernel gives NaN where a / b overflows f32 in its vectorised part (Sleef) but C's
    # fmod in its scalar tail: one element takes the tail. The chip gives C's fmod everywhere.
    a, b = torch.tensor([3e38, 1e30]), torch.tensor([1e-38, 1e-30])
    got = torch.fmod(a.to("tpu"), b.to("tpu")).cpu()
    for i in range(2):
        assert torch.equal(got[i:i + 1], torch.fmod(a[i:i + 1], b[i:i + 1]))
        assert not got[i].isnan()


def test_detr_style_position_frequencies():
    # vision position embeddings (SAM 2, DETR): temperature ** (2 * (dim_t // 2) / features)
    dim_t = torch.arange(64, dtype=torch.float32)
    f = lambda d: 10000 ** (2 * torch.div(d, 2, rounding_mode="floor") / 64)
    torch.testing.assert_close(f(dim_t.to("tpu")).cpu(), f(dim_t), rtol=4e-6, atol=0)


def test_fmod_is_exact_across_the_whole_f32_range():
    # random bit patterns: every exponent, subnormals included; C's fmod of the two f32 values,
    # computed in double by Python (exact, and representable in f32), is the reference
    g = torch.Generator().manual_seed(1)
    bits = torch.randint(-(2**31), 2**31 - 1, (2, 4000), generator=g, dtype=torch.int32)
    a, b = bits.view(torch.float32)
    keep = a.isfinite() & b.isfinite() & (b != 0)
    a, b = a[keep], b[keep]
    import math

    want = torch.tensor([math.fmod(x, y) for x, y in zip(a.tolist(), b.tolist())], dtype=torch.float32)
    assert same(torch.fmod(a.to("tpu"), b.to("tpu")).cpu(), want)


@pytest.mark.parametrize("name", sorted(OPS))
def test_zero_dim_operands_keep_a_zero_dim_result(name, no_fallback):
    a, b = torch.tensor(5.5), torch.tensor(-2.0)
    got, want = OPS[name](a.to("tpu"), b.to("tpu")), OPS[name](a, b)
    assert got.shape == want.shape == () and torch.equal(got.cpu(), want)
