"""complex64 on the chip as (re, im) f32 pairs: elementwise rules (the inverse trigonometric and
hyperbolic functions, log1p, pow and logaddexp against complex128 too), conjugate and negative views,
copies and conversions, sums, matmuls, cat and where, predicates, triangles, scatters, index_put
and masked selection, view_as_real / view_as_complex / polar, and
a rotary embedding (llama's) forward and backward, each against the CPU with no CPU op in both
eager modes; ops without a complex rule name themselves (or run on the CPU when allowed)."""
import pytest
import torch

import vtpu
from cpu_comparison import assert_matches_cpu

native = pytest.mark.usefixtures("native_in_each_eager_mode")


def cplx(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.complex(torch.randn(*shape, generator=g), torch.randn(*shape, generator=g))


def on_chip(fn, *inputs):
    got = fn(*[x.to("tpu") if isinstance(x, torch.Tensor) else x for x in inputs])
    want = fn(*inputs)
    assert got.dtype == want.dtype and got.device.type == "tpu"
    got = got.cpu()
    if want.is_complex():  # part by part: an infinite part equal on both sides is equal
        got, want = torch.view_as_real(got.resolve_conj().resolve_neg()), torch.view_as_real(want.resolve_conj().resolve_neg())
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5, equal_nan=True)


UNARY = {"neg": torch.neg, "exp": torch.exp, "log": torch.log, "abs": torch.abs, "reciprocal": torch.reciprocal,
         "sin": torch.sin, "cos": torch.cos, "sin_wide": lambda z: torch.sin(z * 6), "cos_wide": lambda z: torch.cos(z * 6),
         "sgn": torch.sgn, "angle": torch.angle, "real": lambda z: z.real * 1, "imag": lambda z: z.imag * 1,
         "conj_physical": torch.conj_physical, "sum": lambda z: z.sum(0), "mean": lambda z: z.mean(),
         "view_as_real": lambda z: torch.view_as_real(z) * 1, "transpose": lambda z: z.t().contiguous(),
         "var": lambda z: z.var(1), "cumsum": lambda z: z.cumsum(0), "pad": lambda z: torch.nn.functional.pad(z, (1, 2)),
         "index_select": lambda z: z.index_select(1, torch.tensor([4, 0, 4], device=z.device)),
         "index": lambda z: z[torch.tensor([3, 1], device=z.device)], "mask": lambda z: z[z.real > 0],
         "gather": lambda z: z.gather(1, torch.tensor([[1, 0]] * 4, device=z.device)),
         "sqrt": torch.sqrt, "sqrt_of_zero_and_negative": lambda z: torch.sqrt(z.real.clamp(max=0) * (z.imag > 0)),
         "rsqrt": torch.rsqrt, "tanh": torch.tanh, "tanh_wide": lambda z: torch.tanh(z * 12), "sigmoid": torch.sigmoid,
         "silu": torch.nn.functional.silu, "square": torch.square, "cube": lambda z: z ** 3,
         "power_half": lambda z: z ** 0.5, "power_minus_two": lambda z: z ** -2, "sinh": torch.sinh, "cosh": torch.cosh,
         "tan": torch.tan, "tan_wide": lambda z: torch.tan(z * 12), "expm1": torch.expm1,
         "expm1_small": lambda z: torch.expm1(z * 1e-4), "exp2": torch.exp2, "log2": torch.log2, "log10": torch.log10,
         "prod": lambda z: z.prod(1), "prod_all": torch.prod, "prod_of_one": lambda z: z[:, :1].prod(1, keepdim=True),
         "cumprod": lambda z: z.cumprod(0), "take": lambda z: torch.take(z, torch.tensor([[0, 23], [5, 5]], device=z.device)),
         "nan_to_num": lambda z: torch.nan_to_num(z / z.real.clamp(min=0), posinf=7.0)}


@native
@pytest.mark.parametrize("name", UNARY)
def test_unary(name):
    on_chip(UNARY[name], cplx(4, 6))


def with_zeros_and_specials():
    """A [4, 6] complex64 tensor holding zeros, a zero real part, NaN and an infinity."""
    z = cplx(4, 6)
    z[0, :3] = 0
    z[1, 1] = complex(0, 2)
    z[2, 2] = complex(float("nan"), 1)
    z[3, 3] = complex(1, float("inf"))
    return z


def _index(*values):
    return lambda z: torch.tensor(values, device=z.device)


# Predicates read either part of each element; data movement moves each (re, im) pair together;
# triangles and scatter-adds are real-linear, so each plane goes alike.
PAIRWISE = {"isnan": torch.isnan, "isinf": torch.isinf, "logical_not": torch.logical_not,
            "logical_and": lambda z: torch.logical_and(z, z.flip(0)), "logical_or_real": lambda z: torch.logical_or(z, z.real),
            "all": lambda z: z.all(1), "any": lambda z: z.any(), "nonzero": torch.nonzero,
            "masked_select": lambda z: z.masked_select(z.real > 0), "tril": lambda z: torch.tril(z, -1),
            "triu": lambda z: torch.triu(z, 1),
            "scatter_add": lambda z: z.scatter_add(0, _index([0, 3, 0, 1, 2, 3], [2, 2, 1, 0, 0, 3])(z), z[:2]),
            "scatter": lambda z: z.scatter(1, _index([5, 0], [1, 4])(z), z[:2, :2] * 2),
            "scatter_value": lambda z: z.scatter(1, _index([5, 0], [1, 4])(z), 2 - 1j),
            "index_put_accumulate": lambda z: z.index_put((_index(0, 2, 0)(z),), z[1:4], accumulate=True),
            "index_add": lambda z: z.index_add(0, _index(3, 1)(z), z[:2], alpha=2),
            "masked_scatter": lambda z: z.masked_scatter(z.real > 0, z.flip(0))}


@native
@pytest.mark.parametrize("name", PAIRWISE)
def test_predicates_and_data_movement(name):
    on_chip(PAIRWISE[name], with_zeros_and_specials())


BINARY = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "eq": torch.eq, "ne": torch.ne,
          "add alpha": lambda a, b: torch.add(a, b, alpha=-2.5), "matmul": lambda a, b: a @ b.transpose(-1, -2),
          "cat": lambda a, b: torch.cat([a, b], -1), "where": lambda a, b: torch.where(a.real > 0, a, b)}
PAIRS = {"complex, complex": (cplx(3, 4, 5), cplx(3, 4, 5, seed=1)),
         "complex, real": (cplx(3, 4, 5), torch.randn(3, 4, 5)),
         "real, complex": (torch.randn(3, 4, 5), cplx(3, 4, 5)),
         "broadcast": (cplx(3, 1, 5), cplx(4, 5, seed=1))}


@native
@pytest.mark.parametrize("pair", PAIRS)
@pytest.mark.parametrize("name", BINARY)
def test_binary(name, pair):
    a, b = PAIRS[pair]
    if name == "matmul" and a.dtype != b.dtype:  # torch refuses mixed dtypes; so does the chip
        with pytest.raises(RuntimeError, match="same dtype"):
            torch.mm(a[0].to("tpu"), b[0].t().to("tpu"))
        return
    if name == "matmul" and pair == "broadcast":
        a = a.expand(3, 4, 5)
    if name == "cat" and pair == "broadcast":  # 3-d and 2-d pieces: torch's error on both devices
        with pytest.raises(RuntimeError, match="Tensors must have same number of dimensions"):
            torch.cat([a.to("tpu"), b.to("tpu")], -1)
        return
    on_chip(BINARY[name], a, b)


@native
@pytest.mark.parametrize("scalar", [2.5, 1 + 2j, -3j])
def test_python_numbers(scalar):
    on_chip(lambda z: z * scalar + scalar - z / scalar, cplx(8))
    on_chip(lambda x: x * scalar, torch.randn(8))  # a real tensor times a complex number is complex


@native
def test_division_scales_like_the_cpu():
    # Smith's scaling keeps huge divisors finite (c^2 + d^2 would overflow f32) and a zero divisor
    # gives torch's (a / |c|, b / |d|): inf or NaN per part.
    a = torch.tensor([1 + 1j, 3e30 - 2e30j, 1 + 0j, 0j, 2 - 1j])
    b = torch.tensor([2e30 + 1e30j, 1e30 + 3e30j, 0j, 0j, 1e-30 + 4e-30j])
    on_chip(torch.div, a, b)


@native
def test_conjugate_and_negative_views_are_read_as_their_values():
    z, w = cplx(5, 3), cplx(5, 3, seed=1)
    on_chip(lambda a, b: a * b.conj(), z, w)
    on_chip(lambda a: a.conj().resolve_conj(), z)
    on_chip(lambda a: a.conj().clone(), z)
    on_chip(lambda a: a.conj().imag + 1, z)  # imag of a conjugate view is a negative view
    on_chip(lambda a: a.conj().cpu().to(a.device) if a.device.type == "tpu" else a.conj(), z)
    t = torch.zeros(5, 3, dtype=torch.complex64, device="tpu")
    t.conj().copy_(w.to("tpu"))  # writing through a conjugate view stores the conjugate
    assert torch.equal(t.cpu(), w.conj().resolve_conj())


@native
def test_copies_and_conversions():
    x, z = torch.randn(4, 3), cplx(4, 3)
    on_chip(lambda a: a.to(torch.complex64), x)
    on_chip(lambda a, b: torch.complex(a, b), x, x * 2)
    on_chip(lambda r, t: torch.polar(r, t), x.abs(), x)
    on_chip(lambda a: torch.view_as_complex(a.reshape(4, -1, 2).contiguous()) * 1, torch.randn(4, 6))
    on_chip(lambda a: torch.full_like(a, 2 - 1j) * a + torch.zeros_like(a), z)
    on_chip(lambda a: a[1:, ::2] * 2, z)
    assert torch.equal(z.to("tpu").to(torch.float32).cpu(), z.real)  # the real part, as torch keeps
    assert z.to("tpu")[2, 1].item() == z[2, 1].item()


@native
def test_in_place_and_out_variants():
    z, w = cplx(6), cplx(6, seed=1)
    t = z.to("tpu")
    t.mul_(w.to("tpu")).add_(1j)
    assert torch.allclose(t.cpu(), z * w + 1j, atol=1e-6)
    out = torch.empty(0, dtype=torch.complex64, device="tpu")
    torch.mul(z.to("tpu"), w.to("tpu"), out=out)
    assert torch.allclose(out.cpu(), z * w, atol=1e-6)


def rotary(xq, freqs):
    """Llama's rotary embedding: pairs of features as complex numbers turned by the positions' angles."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs) * 0.9
    return torch.view_as_real(xq_ * freqs_cis[:, None, :]).flatten(2).type_as(xq)


@native
def test_rotary_embedding_forward_and_backward():
    assert_matches_cpu(rotary, torch.randn(5, 3, 8), torch.randn(5, 4), atol=1e-5, rtol=1e-5)


@native
def test_complex_gradients():
    def grad(device):
        z = cplx(4, 4).to(device).requires_grad_()
        out = torch.view_as_real((z * z.conj() + z.exp()) / (z + 3)).abs()
        (out * torch.linspace(-1, 1, out.numel()).reshape(out.shape).to(device)).sum().backward()
        return z.grad.cpu()
    torch.testing.assert_close(grad("tpu"), grad("cpu"), atol=1e-5, rtol=1e-5)


def test_ops_without_a_complex_rule_name_themselves_or_fall_back(no_fallback):
    z = cplx(8)
    with pytest.raises(NotImplementedError, match=r"aten::logcumsumexp cannot run on the chip: complex64 inputs"):
        torch.logcumsumexp(z.to("tpu"), 0)
    vtpu.set_cpu_fallback(True)
    try:
        on_chip(lambda t: torch.logcumsumexp(t, 0), z)
        on_chip(torch.linalg.eigvals, torch.randn(4, 4))  # a complex result made on the CPU comes back
    finally:
        vtpu.set_cpu_fallback(False)


def test_python_compositions_for_real_numbers_decline_complex_inputs(no_fallback):
    a = cplx(3, 3) + 3 * torch.eye(3)
    with pytest.raises(NotImplementedError, match=r"aten::linalg_lu_factor_ex cannot run on the chip: complex64 inputs"):
        torch.linalg.lu_factor(a.to("tpu"))
    vtpu.set_cpu_fallback(True)
    try:
        on_chip(lambda m: torch.linalg.solve(m, m[:, :1]), a)
    finally:
        vtpu.set_cpu_fallback(False)


def test_complex128_is_held_and_its_ops_name_the_dtype(no_fallback):
    z = cplx(3).to(torch.complex128)
    t = z.to("tpu")
    assert torch.equal(t.cpu(), z)
    with pytest.raises(NotImplementedError, match="aten::mul cannot run on the chip: ComplexDouble tensors"):
        (t * t).cpu()
    full = torch.full((2,), 1 / 3 + 1j, dtype=torch.complex128, device="tpu")
    assert torch.equal(full.cpu(), torch.full((2,), 1 / 3 + 1j, dtype=torch.complex128))  # every bit of the value
    vtpu.set_cpu_fallback(True)
    try:  # with the fallback: complex128 results, never complex64 planes
        m = torch.rand(3, 3, dtype=torch.complex128)
        for fn in (lambda a: torch.where(a.real > 0.5, a, a * 2), lambda a: a @ a, lambda a: a * a):
            got = fn(m.to("tpu"))
            assert got.dtype == torch.complex128
            torch.testing.assert_close(got.cpu(), fn(m))
    finally:
        vtpu.set_cpu_fallback(False)


# The inverse functions (Kahan's formulas, complex_functions.cc) and log1p, over the plane and at
# the points where the textbook formulas cancel: near 0, near the branch points +-1 and +-i, and
# far out along the axes. Against the CPU and within f32 rounding of complex128.
INVERSE = ["asin", "acos", "atan", "asinh", "acosh", "atanh", "log1p"]


@native
@pytest.mark.parametrize("name", INVERSE)
def test_inverse_functions_match_the_cpu_and_complex128(name):
    f = getattr(torch, name)
    hard = torch.tensor([1e-4 + 1e-4j, -1e-4j, 2, -2, 1e3, -1e3 + 1j, 0.5 + 1e3j, 0.999, 1.001j, 3e4 - 3e4j, -0.5 - 0.5j])
    z = torch.cat([cplx(64) * 3, hard.to(torch.complex64)])
    on_chip(f, z)
    got, exact = f(z.to("tpu")).cpu().to(torch.complex128), f(z.to(torch.complex128))
    assert ((got - exact).abs() <= 4e-7 * exact.abs() + 1e-7).all(), (got - exact).abs().max()


@native
def test_pow_of_complex_numbers():
    z, w = cplx(4, 6), cplx(4, 6, seed=1)
    on_chip(torch.pow, z, w)
    on_chip(lambda a: a ** 2.5, z)
    on_chip(lambda a: 2 ** a, z)
    on_chip(lambda a: torch.pow(a.real, a), z)  # a negative real base: its complex logarithm
    # a zero base, as the CPU's cpow gives it: 0 for an exponent with a positive real part,
    # (inf, NaN) for a negative one, NaN for a zero one
    on_chip(torch.pow, torch.zeros(5, dtype=torch.complex64), torch.tensor([2 + 1j, 1, -1 + 1j, 0, 1j]))


@native
def test_logaddexp_of_complex_numbers():
    z, w = cplx(4, 6), cplx(4, 6, seed=1)
    on_chip(torch.logaddexp, z, w)
    # equal real parts: the CPU takes y as the smaller, which picks the imaginary part's branch
    on_chip(torch.logaddexp, torch.tensor([1 + 0j, 1 + 4j]), torch.tensor([1 + 4j, 1 + 0j]))
    on_chip(torch.logaddexp, z, z.real)


@native
def test_three_dimensional_convolutions_of_complex_numbers():
    x, w = cplx(1, 2, 4, 5, 5), cplx(3, 2, 2, 3, 3, seed=1)
    on_chip(lambda a, b: torch.nn.functional.conv3d(a, b, padding=1), x, w)
    on_chip(lambda a, b: torch.nn.functional.conv_transpose3d(a, b.transpose(0, 1), stride=2), x, w)
