"""add and sub with alpha: torch's CPU computes self + alpha * other as one f32 fused
multiply-add and rounds once to the result's dtype (for bf16 and f16 results after rounding alpha
to that dtype). The chip used to scale `other` in its own dtype first: a bf16 update added to f32
parameters with alpha = -lr (Muon's step) was off by up to a bf16 ulp of the product."""
import pytest
import torch

import vtpu  # noqa: F401

ALPHAS = (-0.01, 0.3, 2.5, -1.7e-3)


@pytest.mark.parametrize("other_dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("op", ["add", "sub"])
@pytest.mark.parametrize("n", [7, 1000])
def test_f32_result_equals_the_cpu_bit_for_bit(other_dtype, op, n):
    torch.manual_seed(n)
    for alpha in ALPHAS:
        a, b = torch.randn(n), torch.randn(n).to(other_dtype)
        want = getattr(torch, op)(a, b, alpha=alpha)
        got = getattr(torch, op)(a.to("tpu"), b.to("tpu"), alpha=alpha).cpu()
        assert got.dtype == torch.float32
        assert torch.equal(got, want), (alpha, (got - want).abs().max())


@pytest.mark.parametrize("form", ["inplace", "out"])
def test_in_place_and_out_forms_round_as_the_functional_one(form):
    torch.manual_seed(0)
    p, u = torch.randn(6, 5), torch.randn(6, 5).bfloat16()
    if form == "inplace":
        want, got = p.clone().add_(u, alpha=-0.01), p.to("tpu").add_(u.to("tpu"), alpha=-0.01).cpu()
    else:
        want = torch.add(p, u, alpha=-0.01, out=torch.empty(6, 5))
        got = torch.add(p.to("tpu"), u.to("tpu"), alpha=-0.01, out=torch.empty(6, 5, device="tpu")).cpu()
    assert torch.equal(got, want)


def test_broadcast_operands_within_an_ulp():
    # Where an operand broadcasts along the innermost dim, the CPU's loop rounds otherwise (it
    # matches neither one fused rounding nor a product rounded apart in every element).
    torch.manual_seed(1)
    a, b = torch.randn(4, 1, 8), torch.randn(3, 1).bfloat16()
    want = torch.sub(a, b, alpha=0.7)
    got = torch.sub(a.to("tpu"), b.to("tpu"), alpha=0.7).cpu()
    assert got.shape == want.shape
    assert ((got - want).abs() <= torch.finfo(torch.float32).eps * want.abs()).all()


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_16_bit_results_match_the_cpus_vector_loop(dtype):
    # The CPU's vector loop rounds alpha to the dtype and fuses; its scalar loop, which serves
    # the last n % 32 elements, rounds the product as well. The chip does as the vector loop.
    torch.manual_seed(2)
    n = 1000
    body = n - n % 32
    for alpha in ALPHAS:
        a, b = torch.randn(n).to(dtype), torch.randn(n).to(dtype)
        want = torch.add(a, b, alpha=alpha)
        got = torch.add(a.to("tpu"), b.to("tpu"), alpha=alpha).cpu()
        assert torch.equal(got[:body], want[:body]), alpha
        ulp = torch.finfo(dtype).eps * want[body:].float().abs().clamp(min=torch.finfo(dtype).tiny)
        assert ((got[body:].float() - want[body:].float()).abs() <= ulp).all(), alpha


def test_integer_add_with_alpha_stays_exact():
    a, b = torch.arange(-50, 50, dtype=torch.int32), torch.arange(100, dtype=torch.int32) * 3
    assert torch.equal(torch.add(a.to("tpu"), b.to("tpu"), alpha=7).cpu(), torch.add(a, b, alpha=7))
