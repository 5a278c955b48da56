"""torch's flex_attention on tpu (vtpu/flex_attention.py admits tpu inputs to its eager
implementation): block masks built on the chip, forward and backward against the CPU's
scaled_dot_product_attention with the same mask, with the CPU fallback off."""
import warnings

import pytest
import torch
from torch.nn.attention.flex_attention import create_block_mask, flex_attention

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "flex_attention called without torch.compile()"
        yield


def causal(b, h, q, k):
    return q >= k


def qkv(seed, batch=2, heads=4, length=64, dim=16):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(batch, heads, length, dim, generator=g) for _ in range(3)]


def reference(q, k, v, mask):
    leaves = [t.clone().requires_grad_() for t in (q, k, v)]
    out = torch.nn.functional.scaled_dot_product_attention(*leaves, attn_mask=mask)
    (out * out).sum().backward()
    return out.detach(), [t.grad for t in leaves]


def on_chip(q, k, v, mask_mod, **kwargs):
    b, _, length, _ = q.shape
    block_mask = create_block_mask(mask_mod, b, None, length, length, device="tpu")
    leaves = [t.to("tpu").requires_grad_() for t in (q, k, v)]
    out = flex_attention(*leaves, block_mask=block_mask, **kwargs)
    (out * out).sum().backward()
    return out.detach().cpu(), [t.grad.cpu() for t in leaves]


def test_causal_forward_and_backward_match_the_cpu():
    q, k, v = qkv(0)
    got, grads = on_chip(q, k, v, causal)
    want, want_grads = reference(q, k, v, torch.ones(64, 64, dtype=torch.bool).tril())
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_document_mask_built_on_the_chip():
    """Packed documents (TorchTitan's mask): each query sees the earlier keys of its document.
    The block mask's own construction (argsort of int32 blocks, index_put with repeats) runs on
    the chip too."""
    q, k, v = qkv(1, batch=1, heads=2, length=128)
    document = torch.tensor([0] * 40 + [1] * 50 + [2] * 38)
    on_tpu = document.to("tpu")

    def same_document(b, h, qi, ki):
        return (qi >= ki) & (on_tpu[qi] == on_tpu[ki])

    got, grads = on_chip(q, k, v, same_document)
    mask = torch.ones(128, 128, dtype=torch.bool).tril() & (document[:, None] == document[None, :])
    want, want_grads = reference(q, k, v, mask)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    for g, w in zip(grads, want_grads):
        torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_inputs_on_different_devices_are_refused():
    q, k, v = qkv(2)
    with pytest.raises(ValueError, match="same device"):
        flex_attention(q.to("tpu"), k, v.to("tpu"))
