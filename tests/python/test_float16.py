"""float16 on the chip as a storage format (docs/bridge.md): loaded into f32, computed in f32 and
rounded to f16 where torch rounds, so f16 ops match the CPU's (which also compute f16 in f32) in
each eager mode with no CPU op: pointwise chains, overflow to inf, reductions, softmax and norms,
matmuls and convolutions (exact products), and a whole f16 model's training step."""
import copy

import pytest
import torch
import torch.nn.functional as F
from cpu_comparison import assert_matches_cpu

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def half_inputs(*shapes, seed=0, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return [(torch.randn(*s, generator=g) * scale).half() for s in shapes]


def test_a_pointwise_chain_rounds_after_every_op_as_the_cpu_does():
    x, y = half_inputs((37, 129), (37, 129))
    fn = lambda a, b: torch.tanh(a * b + 1.5) / (b.abs() + 0.25) - a.sigmoid()  # noqa: E731
    got, want = fn(x.to("tpu"), y.to("tpu")).cpu(), fn(x, y)
    assert got.dtype == torch.float16
    torch.testing.assert_close(got, want, atol=0, rtol=2 ** -10)  # at most an ulp (tanh/exp differ in the last bit)


def test_overflow_gives_inf_and_small_values_stay_subnormal():
    x = torch.tensor([60000.0, -60000.0, 3e-6, -7e-8, 1.0]).half()
    got, want = (x.to("tpu") * 2).cpu(), x * 2
    assert torch.equal(got, want)
    assert got[0] == float("inf") and got[1] == float("-inf") and 0 < got[2] < 6.2e-5  # a subnormal
    assert torch.equal((x.to("tpu").float() * 3).half().cpu(), (x.float() * 3).half())  # casts both ways


@pytest.mark.parametrize("fn", [lambda t: t.sum(-1), lambda t: t.mean(0), lambda t: t.amax(-1),
                                lambda t: torch.softmax(t, -1), lambda t: F.layer_norm(t, (t.shape[-1],)),
                                lambda t: torch.cumsum(t, -1)],
                         ids=["sum", "mean", "amax", "softmax", "layer_norm", "cumsum"])
def test_reductions_and_row_ops_match_the_cpu(fn):
    (x,) = half_inputs((9, 300), seed=1)
    assert_matches_cpu(fn, x, atol=1e-3, rtol=2e-3)


def test_matmul_products_are_exact_whatever_the_f32_precision():
    a, b = half_inputs((70, 300), (300, 50), seed=2)
    want = (a.float() @ b.float()).half()  # exact products, f32 sums, one rounding: the CPU's f16 mm
    previous = torch.get_float32_matmul_precision()
    try:
        torch.set_float32_matmul_precision("medium")  # asks f32 for one bf16 pass; f16 must not take it
        got = (a.to("tpu") @ b.to("tpu")).cpu()
    finally:
        torch.set_float32_matmul_precision(previous)
    torch.testing.assert_close(got, want, atol=1e-3, rtol=2 ** -10)
    torch.testing.assert_close(got, a @ b, atol=1e-3, rtol=2 ** -10)


def test_linear_and_convolution_with_their_gradients():
    x, w, b = half_inputs((4, 3, 10, 10), (6, 3, 3, 3), (6,), seed=3)
    assert_matches_cpu(lambda t, k, c: F.conv2d(t, k, c, padding=1), x, w, b, atol=2e-2, rtol=4e-3)
    x, w = half_inputs((16, 64), (32, 64), seed=4)
    assert_matches_cpu(F.linear, x, w, atol=1e-2, rtol=4e-3)


def test_an_f16_model_trains_as_on_the_cpu(sgd_losses):
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.LayerNorm(64), torch.nn.Linear(64, 8))
    x, y = torch.randn(16, 32).half(), torch.randint(0, 8, (16,))
    curves = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).half().to(device)
        curves[device] = sgd_losses(m, lambda mod: F.cross_entropy(mod(x.to(device)).float(), y.to(device)), lr=0.05)
    torch.testing.assert_close(torch.tensor(curves["tpu"]), torch.tensor(curves["cpu"]), atol=5e-3, rtol=5e-3)
