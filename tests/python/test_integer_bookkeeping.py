"""Integer tensors through ops written for floats, which the OpInfo report's int64 pass found:
argmax/argmin/max of a 0-dim integer (a 0-dim result, not [1]), argmax of bool refused as the
CPU refuses it, addmv/addbmm of integers taking alpha and beta as integers (not promoting to
float), tril/triu of int64 at any magnitude, isnan of integers (all false, on the chip), logical
ops, any/all, signbit and relu of int64 at any magnitude, fmax/fmin keeping integer dtypes, and
integer avg_pool3d (C's integer division once) on the CPU, named. Each against the CPU."""
import pytest
import torch

import vtpu


@pytest.fixture(autouse=True, params=["strict_eager", "defer_and_fuse"])
def mode(request, no_fallback):
    vtpu.set_mode(request.param)
    yield


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.float32])
def test_extremes_of_a_zero_dim_tensor_stay_zero_dim(dtype):
    x = torch.tensor(-4, dtype=dtype)
    for keepdim in (False, True):
        for fn in (torch.argmax, torch.argmin):
            got, want = fn(x.to("tpu"), dim=0, keepdim=keepdim), fn(x, dim=0, keepdim=keepdim)
            assert got.shape == want.shape == () and torch.equal(got.cpu(), want)
        got, want = torch.max(x.to("tpu"), dim=0, keepdim=keepdim), torch.max(x, dim=0, keepdim=keepdim)
        assert got.values.shape == () and torch.equal(got.values.cpu(), want.values)
        assert torch.equal(got.indices.cpu(), want.indices)


def test_argmax_of_bool_is_refused_as_on_the_cpu():
    for fn in (torch.argmax, torch.argmin):
        with pytest.raises(RuntimeError, match=rf"{fn.__name__}\(\): does not support bool input"):
            fn(torch.tensor([True, False], device="tpu"))


@pytest.mark.parametrize("beta, alpha", [(0.2, 0.6), (1.7, 2.9), (-1.5, -2.5), (2, 3)])
def test_integer_addmv_and_addbmm_take_alpha_and_beta_as_integers(beta, alpha, cpu_fallback):
    # (the int64 product itself is an mm on the CPU fallback: int64 matmuls have no chip kernel)
    g = torch.Generator().manual_seed(0)
    m, v, s = (torch.randint(-9, 9, shape, generator=g) for shape in ((5, 10), (10,), (5,)))
    got = torch.addmv(s.to("tpu"), m.to("tpu"), v.to("tpu"), beta=beta, alpha=alpha).cpu()
    assert got.dtype == torch.int64 and torch.equal(got, torch.addmv(s, m, v, beta=beta, alpha=alpha))
    b1, b2, s2 = (torch.randint(-9, 9, shape, generator=g) for shape in ((3, 4, 5), (3, 5, 2), (4, 2)))
    got = torch.addbmm(s2.to("tpu"), b1.to("tpu"), b2.to("tpu"), beta=beta, alpha=alpha).cpu()
    assert got.dtype == torch.int64 and torch.equal(got, torch.addbmm(s2, b1, b2, beta=beta, alpha=alpha))


def test_triangles_and_isnan_of_int64_on_the_chip():
    x = torch.arange(-10**12, 10**12, 10**11).reshape(4, 5)  # words past int32: every bit must survive
    for diagonal in (-1, 0, 2):
        assert torch.equal(torch.tril(x.to("tpu"), diagonal).cpu(), torch.tril(x, diagonal))
        assert torch.equal(torch.triu(x.to("tpu"), diagonal).cpu(), torch.triu(x, diagonal))
    assert torch.equal(torch.isnan(x.to("tpu")).cpu(), torch.zeros(4, 5, dtype=torch.bool))
    assert torch.equal(torch.clamp(x.to("tpu"), -5, 5).cpu(), torch.clamp(x, -5, 5))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_integer_avg_pool3d_runs_on_the_cpu_named():
    x = torch.randint(-9, 9, (1, 2, 4, 4, 4), generator=torch.Generator().manual_seed(1))
    with pytest.raises(NotImplementedError, match=r"aten::avg_pool3d cannot run on the chip: integer inputs"):
        torch.nn.functional.avg_pool3d(x.to("tpu"), 2)
    vtpu.set_cpu_fallback(True)
    try:
        assert torch.equal(torch.nn.functional.avg_pool3d(x.to("tpu"), 2).cpu(), torch.nn.functional.avg_pool3d(x, 2))
    finally:
        vtpu.set_cpu_fallback(False)


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "sigmoid", "sin", "erf", "lgamma", "asinh", "log1p", "rsqrt"])
def test_float_functions_of_int64_promote_on_the_chip(name):
    # torch promotes integer inputs to float32 first; int64 (word pairs) now converts on the chip
    # instead of falling back (2^40 + 1 rounds to f32 as the CPU rounds it; sin reduces it exactly).
    x = torch.tensor([0, 1, -3, 7, 2**20 + 1, -(2**22), 2**40 + 1])
    fn = getattr(torch, name)
    got, want = fn(x.to("tpu")).cpu(), fn(x)
    assert got.dtype == want.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6, equal_nan=True)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor", "fmax", "fmin", "atan2"])
def test_binary_ops_of_integers_keep_torchs_dtype_and_values(name):
    # int64 truth is != 0 at any magnitude (2^40's low word is 0); fmax and fmin of integers are
    # maximum and minimum in the integers' dtype (they returned float32, rounding past 2^24)
    a = torch.tensor([0, 2**40, -3, 7, 2**30 + 1, -(2**31) + 5, 16777217])
    b = torch.tensor([5, 0, -3, 0, 2**30, -1, 16777219])
    fn = getattr(torch, name)
    for dtype in (torch.int64, torch.int32):
        x, y = a.to(dtype), b.to(dtype)
        got, want = fn(x.to("tpu"), y.to("tpu")).cpu(), fn(x, y)
        assert got.dtype == want.dtype
        torch.testing.assert_close(got, want, rtol=1e-6, atol=0)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_unary_predicates_and_reductions_of_int64():
    x = torch.tensor([[0, 2**40, -3], [7, -(2**40), 0]])
    t = x.to("tpu")
    for got, want in [(torch.logical_not(t), torch.logical_not(x)), (torch.signbit(t), torch.signbit(x)),
                      (torch.relu(t), torch.relu(x)), (t.any(dim=1), x.any(dim=1)), (t.all(dim=0), x.all(dim=0)),
                      (t.all(), x.all())]:
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "fmod", "shift_right", "shift_left", "pow", "number_pow"])
def test_empty_integer_tensors_by_constants(name):
    # an empty operand sends the op to the CPU for its shape: the constant went missing (a crash)
    fn = {"floor_divide": lambda t: t // 3, "remainder": lambda t: t % 3, "fmod": lambda t: torch.fmod(t, 3),
          "shift_right": lambda t: t >> 1, "shift_left": lambda t: t << 1, "pow": lambda t: t**2, "number_pow": lambda t: 3**t}[name]
    for dtype in (torch.int32, torch.uint8):
        x = torch.empty(1, 0, 3, dtype=dtype)
        got, want = fn(x.to("tpu")).cpu(), fn(x)
        assert got.shape == want.shape and got.dtype == want.dtype


def test_integer_sums_in_the_dtype_asked_for():
    # tensordot sums int32 products with dtype=int32: the sum wraps in int32, as on the CPU (it
    # came back int64)
    x = torch.tensor([[1, 2, 2**31 - 1], [5, -7, -(2**31)]], dtype=torch.int32)
    for dtype in (torch.int32, torch.int8, torch.uint8, torch.int64, None):
        for dims in ((), (1,)):
            got, want = torch.sum(x.to("tpu"), dims, dtype=dtype).cpu(), torch.sum(x, dims, dtype=dtype)
            assert got.dtype == want.dtype and torch.equal(got, want), (dtype, dims)
    a, b = torch.randint(-5, 5, (2, 2, 1), dtype=torch.int32), torch.randint(-5, 5, (2, 1, 2), dtype=torch.int32)
    got = torch.tensordot(a.to("tpu"), b.to("tpu"), dims=([0, 1], [2, 0])).cpu()
    assert got.dtype == torch.int32 and torch.equal(got, torch.tensordot(a, b, dims=([0, 1], [2, 0])))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_dropout_backward_of_integers_is_float_as_on_the_cpu(dtype):
    grad, mask = torch.tensor([3, -2, 5], dtype=dtype), torch.tensor([True, False, True])
    got = torch.ops.aten.native_dropout_backward(grad.to("tpu"), mask.to("tpu"), 2.5).cpu()
    want = torch.ops.aten.native_dropout_backward(grad, mask, 2.5)
    assert got.dtype == want.dtype == torch.float32 and torch.equal(got, want)


def test_all_and_any_of_uint8_keep_its_dtype():
    x = torch.tensor([[0, 3, 255], [1, 1, 1]], dtype=torch.uint8)
    for fn in (lambda t: t.all(), lambda t: t.any(dim=1), lambda t: t.all(dim=0, keepdim=True)):
        got, want = fn(x.to("tpu")).cpu(), fn(x)
        assert got.dtype == want.dtype == torch.uint8 and torch.equal(got, want)
