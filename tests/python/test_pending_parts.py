"""A dense part of a pending result (a chunk along its first dim, its bits viewed as another
dtype held as plain bytes, the attention's output beside its logsumexp) is read where it lies in
defer_and_fuse: no flush, no CPU op, the same values as after a flush."""
import torch

import vtpu


def flushes() -> int:
    return vtpu.stats()["flushes"]


def test_chunks_and_bit_views_of_a_pending_result_do_not_flush(no_fallback):
    x = torch.randn(4, 256)
    # int32 words whose halves are both normal bf16 numbers (in [2, 4) and [1, 1.5)), so bf16
    # arithmetic on the bit view is exact on the chip and on the CPU.
    high, low = torch.randint(0x4000, 0x4080, (2, 256), dtype=torch.int32), torch.randint(0, 64, (2, 256), dtype=torch.int32)
    xt, ht, lt = x.to("tpu"), high.to("tpu"), low.to("tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    y = torch.sigmoid(xt) * 3
    first, rest = y.chunk(2)                       # rows 0-1 and 2-3 of the pending value
    bits = y.view(torch.int32)[1:3]                # its bits, rows 1-2
    words = ht * 65536 + (lt + 0x3F80)
    halves = words.view(torch.bfloat16)[1:]        # int32 bytes read as bf16, the second row
    got = [rest * 2 - first, bits & 0xFFFF, halves * 2]
    assert flushes() == 0
    landed, landed_words = y.cpu(), words.cpu()
    assert torch.equal(got[0].cpu(), landed[2:] * 2 - landed[:2])
    assert torch.equal(got[1].cpu(), landed.view(torch.int32)[1:3] & 0xFFFF)
    assert torch.equal(got[2].cpu(), landed_words.view(torch.bfloat16)[1:] * 2)


def test_attention_forward_and_backward_in_one_flush(no_fallback):
    # The fused attention writes its output and logsumexp into one value; the output's readers
    # and the backward read their parts of it (each read flushed the pending graph before).
    torch.manual_seed(0)
    q, k, v = (torch.randn(2, 4, 256, 64) for _ in range(3))
    tq, tk, tv = (t.to("tpu").requires_grad_() for t in (q, k, v))
    vtpu.synchronize()
    vtpu.reset_stats()
    out = torch.nn.functional.scaled_dot_product_attention(tq, tk, tv, is_causal=True)
    out.square().sum().backward()
    assert flushes() == 0
    cq, ck, cv = (t.double().requires_grad_() for t in (q, k, v))
    expected = torch.nn.functional.scaled_dot_product_attention(cq, ck, cv, is_causal=True)
    expected.square().sum().backward()
    torch.testing.assert_close(out.detach().cpu().double(), expected.detach(), rtol=1e-4, atol=1e-4)
    for got, want in ((tq, cq), (tk, ck), (tv, cv)):
        torch.testing.assert_close(got.grad.cpu().double(), want.grad, rtol=1e-3, atol=1e-3)
    assert flushes() == 1
