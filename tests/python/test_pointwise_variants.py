"""The pointwise op table's in-place and out= variants (torch_bridge/csrc/aten/pointwise.cc): each
row's one lowering serves its functional, in-place and out= overloads, on the chip in both eager
modes, matching the CPU; results that cannot be cast into the destination are refused with
torch's message instead of being truncated."""
import pytest
import torch

import vtpu

UNARY = ["neg", "exp", "log", "tanh", "sigmoid", "relu", "silu", "sqrt", "rsqrt", "abs", "reciprocal", "erf", "sin", "cos"]
BINARY = [(torch.mul, "mul_"), (torch.div, "div_"), (torch.maximum, None), (torch.minimum, None), (torch.pow, "pow_")]
COMPARE = ["eq", "ne", "lt", "le", "gt", "ge"]


@pytest.fixture(autouse=True, params=["strict_eager", "defer_and_fuse"])
def mode_on_the_chip(request, no_fallback):
    vtpu.set_mode(request.param)
    yield
    vtpu.synchronize()
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def positive(*shape):
    return torch.rand(*shape) + 0.5  # inside every unary op's domain (log, sqrt, rsqrt, reciprocal)


def close(tpu, cpu):
    torch.testing.assert_close(tpu.cpu(), cpu, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("name", UNARY)
def test_unary_in_place_and_out_match_cpu(name):
    # Through torch.ops.aten: the overloads themselves (torch.silu and relu's out= have no Python
    # binding of their own, but F.silu(inplace=True) and the optimizers call them).
    op = getattr(torch.ops.aten, name)
    x = positive(4, 130)
    expected = op(x)
    t = x.to("tpu")
    assert getattr(torch.ops.aten, name + "_")(t) is t
    close(t, expected)
    out = torch.empty(0, device="tpu")  # empty: resized without a warning, as torch does
    assert op.out(x.to("tpu"), out=out) is out
    close(out, expected)


@pytest.mark.parametrize("op,inplace", BINARY, ids=[op.__name__ for op, _ in BINARY])
def test_binary_out_and_in_place_match_cpu(op, inplace):
    a, b = positive(3, 7, 129), positive(7, 129)
    expected = op(a, b)
    out = torch.empty(0, device="tpu")
    op(a.to("tpu"), b.to("tpu"), out=out)
    close(out, expected)
    if inplace:
        t = a.to("tpu")
        getattr(t, inplace)(b.to("tpu"))
        close(t, expected)


@pytest.mark.parametrize("name", COMPARE)
def test_comparisons_in_place_and_out_match_cpu(name):
    a = torch.randint(0, 4, (5, 33)).float()
    b = torch.randint(0, 4, (5, 33)).float()
    op = getattr(torch, name)
    for other in (b, 2.0):
        other_tpu = other.to("tpu") if isinstance(other, torch.Tensor) else other
        out = torch.empty(0, dtype=torch.bool, device="tpu")
        op(a.to("tpu"), other_tpu, out=out)
        assert torch.equal(out.cpu(), op(a, other))
        t = a.to("tpu")
        getattr(t, name + "_")(other_tpu)  # the comparison written back as 1.0 / 0.0, in self's dtype
        expected = a.clone()
        getattr(expected, name + "_")(other)
        assert torch.equal(t.cpu(), expected)


def test_a_float_result_is_not_truncated_into_an_integer_tensor():
    ints = torch.arange(6, dtype=torch.int32).to("tpu")
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        ints.exp_()
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        torch.sigmoid(torch.rand(6).to("tpu"), out=torch.empty(6, dtype=torch.int32, device="tpu"))
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        ints.add_(torch.rand(6).to("tpu"))
    # The CPU refuses the same.
    with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type Int"):
        torch.arange(6, dtype=torch.int32).add_(torch.rand(6))


def test_in_place_relu_in_a_training_step_stays_on_the_chip():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(inplace=True), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    cpu_loss = model(x).square().mean()
    cpu_loss.backward()
    cpu_grad = model[0].weight.grad.clone()
    model.zero_grad()
    model.to("tpu")
    loss = model(x.to("tpu")).square().mean()
    loss.backward()
    torch.testing.assert_close(loss.cpu(), cpu_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(model[0].weight.grad.cpu(), cpu_grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("base", [2.0, 0.5, 10.0])
def test_a_number_to_a_tensors_power(base):
    # pow.Scalar (ALiBi slopes, XLNet's frequencies): float and int64 exponents, and its out= form
    x = torch.linspace(-5, 5, 40)
    close(torch.pow(base, x.to("tpu")), torch.pow(base, x))
    n = torch.arange(-3, 9)
    close(torch.pow(base, n.to("tpu")), torch.pow(base, n))
    out = torch.empty(40, device="tpu")
    torch.pow(base, x.to("tpu"), out=out)
    close(out, torch.pow(base, x))
    with pytest.raises(NotImplementedError, match="pow.*integer powers"):
        torch.pow(3, n.to("tpu"))  # an int64 result: exact on the CPU only


@pytest.mark.parametrize("condition", [False, True])
def test_where_with_a_host_condition(condition):
    # A 0-dim CPU condition (torch allows one beside device operands) selects on the chip. Before,
    # the recorder skipped it and the kernel read its operands one place off: a wrong result.
    a, b = torch.randn(4, 6), torch.randn(4, 6)
    c = torch.tensor(condition)
    assert torch.equal(torch.where(c, a.to("tpu"), b.to("tpu")).cpu(), torch.where(c, a, b))
    assert torch.equal(torch.where(c, a.to("tpu"), 2.0).cpu(), torch.where(c, a, 2.0))
    assert torch.equal(a.to("tpu").masked_fill(c, 5.0).cpu(), a.masked_fill(c, 5.0))
