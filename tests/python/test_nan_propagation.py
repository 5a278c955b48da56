"""NaN and infinities through lowered ops and their gradients, as torch's CPU propagates them:
comparisons, max/min, pooling (a window holding NaN names its last NaN), clamps, threshold
backward (a NaN input lets the gradient through), pow, masked fills, hypot; and nn.LPPool1d's
gradient, NaN where the CPU's is (it was 0 on tpu); f32 matmuls and attention, margin losses,
polygamma, cdist, adaptive average pooling and linear interpolation."""
import pytest
import torch
import torch.nn.functional as F

import vtpu

VALUES = torch.tensor([float("nan"), -1.0, 0.0, 2.0, float("inf"), float("-inf"), float("nan"), 0.5])

OPS = {
    "relu": torch.relu, "threshold": lambda t: F.threshold(t, 0.1, 20.0), "hardtanh": F.hardtanh,
    "leaky_relu": F.leaky_relu, "elu": F.elu, "clamp": lambda t: t.clamp(-0.5, 0.5), "clamp_min": lambda t: t.clamp_min(0.5),
    "maximum": lambda t: torch.maximum(t, torch.zeros_like(t)), "minimum": lambda t: torch.minimum(t, torch.zeros_like(t)),
    "max": lambda t: t.max(), "amax": lambda t: t.amax(0), "min": lambda t: t.min(), "max_dim": lambda t: t.max(0)[0],
    "sign": torch.sign, "abs": torch.abs, "pow": lambda t: t.pow(2), "pow_fraction": lambda t: t.pow(1.5),
    "sqrt": torch.sqrt, "log": torch.log, "softmax": lambda t: torch.softmax(t, 0), "sum": lambda t: t.sum(),
    "max_pool": lambda t: F.max_pool1d(t.view(1, 1, -1), 3, stride=2), "avg_pool": lambda t: F.avg_pool1d(t.view(1, 1, -1), 2),
    "where": lambda t: torch.where(t > 0, t, 0.0), "tanh": torch.tanh, "silu": F.silu, "softplus": F.softplus,
    "masked_fill": lambda t: t.masked_fill(t > 0, torch.tensor(3.0)), "mse": lambda t: F.mse_loss(t, torch.zeros_like(t)),
    "eq": lambda t: (t == t).float() * t, "floor": torch.floor, "round": torch.round, "atan": torch.atan,
    "hypot": lambda t: torch.hypot(t, t.flip(0)),  # hypot(inf, nan) is inf, as C's
    "cumsum": lambda t: t.flip(0).cumsum(0),
}


pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


@pytest.mark.parametrize("name", sorted(OPS))
def test_nan_and_inf_propagate_forward_and_backward_as_on_the_cpu(name):
    results = {}
    for device in ("cpu", "tpu"):
        x = VALUES.detach().to(device).requires_grad_()
        y = OPS[name](x)
        (grad,) = torch.autograd.grad(y.sum(), x, allow_unused=True)
        results[device] = (y.detach().cpu(), torch.zeros(8) if grad is None else grad.cpu())
    torch.testing.assert_close(results["tpu"], results["cpu"], equal_nan=True, atol=1e-6, rtol=1e-6)


def test_max_pool_indices_name_the_last_nan_of_a_window():
    x = torch.tensor([float("nan"), -1.0, 0.0, 2.0, float("inf"), float("-inf"), float("nan"), float("nan")]).view(1, 1, 8)
    _, want = F.max_pool1d(x, 3, stride=2, return_indices=True)
    _, got = F.max_pool1d(x.to("tpu"), 3, stride=2, return_indices=True)
    assert torch.equal(got.cpu(), want)


def test_lp_pool1d_input_gradient_is_nan_where_the_cpus_is():
    torch.manual_seed(0)
    x = torch.randn(1, 3, 7)
    grads = {}
    for device in ("cpu", "tpu"):
        a = x.detach().to(device).requires_grad_()
        torch.nn.LPPool1d(1.5, 2)(a).sum().backward()
        grads[device] = a.grad.cpu()
    assert torch.isnan(grads["cpu"]).any()
    torch.testing.assert_close(grads["tpu"], grads["cpu"], equal_nan=True)


def test_hypot_neither_overflows_nor_underflows():
    # sqrt(x^2 + y^2) gave inf past 1.8e19 and 0 below 1e-19; C's hypot scales by the larger value
    x = torch.tensor([3e30, 3e-30, 0.0, -5e37, 1.0])
    y = torch.tensor([4e30, 4e-30, 0.0, 1e37, 1e-20])
    torch.testing.assert_close(torch.hypot(x.to("tpu"), y.to("tpu")).cpu(), torch.hypot(x, y), rtol=1e-6, atol=0)


def test_cumsum_carries_infinities_and_nan_forward_only():
    # a matmul with a triangle of ones made every element of such a row NaN (0 * inf)
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1.0, inf, 2.0, 3.0], [1.0, 2.0, 3.0, -inf], [1.0, nan, 2.0, 3.0], [1.0, inf, -inf, 2.0],
                      [1.0, 2.0, 3.0, 4.0]])
    for dim in (0, 1):
        torch.testing.assert_close(x.to("tpu").cumsum(dim).cpu(), x.cumsum(dim), equal_nan=True)


@pytest.mark.parametrize("precision", ["highest", "high"])
def test_float32_matmuls_carry_infinities_as_the_cpus(precision):
    # An f32 matmul splits its operands into bf16 parts; an infinity split as it is met a value
    # bf16 holds exactly (1.0: part 1 is 0) as inf * 0 = NaN where the CPU's product is inf.
    inf = float("inf")
    torch.manual_seed(0)
    a, b = torch.randn(6, 40), torch.randn(40, 5)
    b[:, 0] = 1.0
    b[3, 1] = 0.0
    a[0, 3], a[1, 7], a[2, 9] = inf, -inf, float("nan")
    a[3, 3], a[3, 4] = inf, -inf  # +inf and -inf terms: NaN
    w = torch.randn(5, 40)
    w[2, 11] = inf
    previous = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        for f in (lambda x, y: x @ y, lambda x, y: F.linear(x, w.to(x.device)), lambda x, y: torch.addmm(y[0], x, y)):
            want = f(a, b)
            got = f(a.to("tpu"), b.to("tpu")).cpu()
            assert (~want.isfinite()).sum() >= 10
            torch.testing.assert_close(got, want, equal_nan=True, atol=1e-4, rtol=1e-4)
    finally:
        torch.set_float32_matmul_precision(previous)


@pytest.mark.parametrize("causal", [False, True])
def test_float32_attention_carries_infinities_as_the_cpus(causal):
    # Attention's own kernel splits q, k, v and p into bf16 parts as the matmul does: an infinity
    # in v met p's parts of 0, an infinity in k turned its whole score row NaN.
    inf = float("inf")
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 2, 16, 32), torch.randn(2, 2, 16, 32), torch.randn(2, 2, 16, 32)
    v[0, 0, 3, 5] = inf
    v[0, 1, 7, :] = 1.0  # exact in bf16
    v[0, 1, 7, 2] = -inf
    k[1, 0, 12, 4] = -inf
    q[1, 1, 5, 0] = float("nan")
    weights = torch.linspace(-1, 1, 32)
    results = {}
    for device in ("cpu", "tpu"):
        a, b, c = (t.to(device).requires_grad_() for t in (q, k, v))
        out = F.scaled_dot_product_attention(a, b, c, is_causal=causal)
        dq, dk, _ = torch.autograd.grad((out * weights.to(device)).nan_to_num().sum(), (a, b, c))
        results[device] = (out.detach().cpu(), dq.cpu(), dk.cpu())
    assert (~results["cpu"][0].isfinite()).sum() >= 100
    torch.testing.assert_close(results["tpu"], results["cpu"], equal_nan=True, atol=1e-3, rtol=1e-3)


def test_margin_losses_skip_nan_terms_and_the_targets_own_class_as_the_cpus_loops():
    # The CPU counts a term only where margin - x[y] + x[i] > 0 (NaN does not) and never the
    # target's own class; multiplying by a 0/1 mask made inf * 0 = NaN of both.
    inf = float("inf")
    x = torch.tensor([[0.5, inf, -1.0, 2.0], [float("nan"), 0.3, -inf, 1.0], [1.0, 2.0, 3.0, -inf]])
    y = torch.tensor([1, 2, 0])
    labels = torch.tensor([[1, 3, -1, 0], [0, -1, 2, 2], [2, 1, 0, -1]])
    for f, target in ((F.multi_margin_loss, y), (lambda a, t, **kw: F.multi_margin_loss(a, t, p=2, **kw), y),
                      (F.multilabel_margin_loss, labels)):
        want = f(x, target, reduction="none")
        got = f(x.to("tpu"), target.to("tpu"), reduction="none").cpu()
        torch.testing.assert_close(got, want, equal_nan=True)


def test_polygamma_at_infinities_and_negative_arguments_beside_them():
    # zeta's term count came from the minimum of q: an infinity beside -7.95 cut its terms short.
    # polygamma(1, x) is the CPU's trigamma: 0 at +inf, NaN at -inf.
    x = torch.tensor([float("inf"), -float("inf"), float("nan"), -7.95, 3.0, -0.5])
    for n in (1, 2, 3):
        torch.testing.assert_close(torch.polygamma(n, x.to("tpu")).cpu(), torch.polygamma(n, x), equal_nan=True,
                                   rtol=1e-4, atol=1e-4)


def test_zeta_of_an_infinite_order_returns_where_the_cpu_does():
    # x = inf: terms with |q + i| < 1 are inf, the others 0; the CPU returns the sum at its first
    # negligible term, where the Euler-Maclaurin terms after it would give inf * 0 = NaN.
    x = torch.tensor([float("inf")] * 5 + [30.0, 2.5])
    q = torch.tensor([-8.07, 3.13, 0.5, -0.5, float("inf"), 1.5, -3.0])
    torch.testing.assert_close(torch.special.zeta(x.to("tpu"), q.to("tpu")).cpu(), torch.special.zeta(x, q), equal_nan=True,
                               rtol=1e-5, atol=0)


def test_cdist_p0_counts_a_nan_coordinate_as_nan():
    a = torch.tensor([[0.0, float("nan"), 1.0], [2.0, 0.5, float("inf")]])
    b = torch.tensor([[0.0, 1.0, 1.0], [2.0, 0.5, 3.0], [1.0, 1.0, 1.0]])
    torch.testing.assert_close(torch.cdist(a.to("tpu"), b.to("tpu"), p=0).cpu(), torch.cdist(a, b, p=0), equal_nan=True)


def _with_non_finite(*shape):
    torch.manual_seed(0)
    x = torch.randn(*shape)
    flat = x.view(-1)
    n = flat.numel()
    flat[0], flat[n // 3], flat[n // 2], flat[n // 2 + 1], flat[-1] = float("nan"), float("inf"), float("inf"), -float("inf"), -float("inf")
    return x


def _matches_the_cpu_mostly_finite(f, *inputs, tol):
    """f on tpu equals f on the CPU, NaN where it is, and the inputs' non-finite elements did not
    reach most outputs."""
    want = f(*inputs)
    got = f(*(t.to("tpu") for t in inputs)).cpu()
    assert want.isfinite().sum() > want.numel() // 2
    torch.testing.assert_close(got, want, equal_nan=True, atol=tol, rtol=tol)


ADAPTIVE = {
    "1d": (lambda t: F.adaptive_avg_pool1d(t, 7), (2, 3, 26)),
    "2d": (lambda t: F.adaptive_avg_pool2d(t, (3, 4)), (2, 3, 7, 9)),
    "2d_growing": (lambda t: F.adaptive_avg_pool2d(t, (10, 13)), (2, 3, 7, 9)),
    "3d": (lambda t: F.adaptive_avg_pool3d(t, (3, 2, 4)), (1, 2, 4, 5, 6)),
    "area": (lambda t: F.interpolate(t, size=(4, 5), mode="area"), (2, 3, 7, 9)),
}


@pytest.mark.parametrize("name", sorted(ADAPTIVE))
def test_adaptive_average_pooling_keeps_an_infinity_inside_its_windows(name):
    # Adaptive windows of varying size were a product with an averaging matrix: an infinity met
    # its row's zeros (inf * 0 = NaN) and made every output of the row NaN.
    f, shape = ADAPTIVE[name]
    _matches_the_cpu_mostly_finite(f, _with_non_finite(*shape), tol=1e-5)


UPSAMPLE = {
    "linear": (lambda t: F.interpolate(t, size=30, mode="linear"), (2, 3, 26)),
    "linear_scale": (lambda t: F.interpolate(t, scale_factor=1.7, mode="linear"), (2, 3, 26)),
    "linear_same_size": (lambda t: F.interpolate(t, size=26, mode="linear"), (2, 3, 26)),
    "bilinear": (lambda t: F.interpolate(t, size=(14, 18), mode="bilinear"), (2, 3, 7, 9)),
    "bilinear_corners": (lambda t: F.interpolate(t, size=(5, 13), mode="bilinear", align_corners=True), (2, 3, 7, 9)),
    "trilinear": (lambda t: F.interpolate(t, size=(6, 7, 3), mode="trilinear"), (1, 2, 4, 5, 6)),
}


@pytest.mark.parametrize("name", sorted(UPSAMPLE))
def test_linear_upsampling_weighs_infinities_as_the_cpus_kernel(name):
    # The CPU sums x0 * (1 - t) + x1 * t (x1 = x0 at the edge and in a same-size copy); torch's
    # decomposition wrote x0 + (x1 - x0) * t: NaN from inf - inf, and a neighbour's infinity in a copy.
    f, shape = UPSAMPLE[name]
    _matches_the_cpu_mostly_finite(f, _with_non_finite(*shape), tol=1e-5)


@pytest.mark.parametrize("mode", ["linear", "bilinear"])
def test_linear_upsampling_gradient_matches_the_cpus(mode):
    shape, size = ((2, 3, 11), (17,)) if mode == "linear" else ((2, 3, 7, 9), (11, 5))
    x = torch.randn(*shape)
    results = {}
    for device in ("cpu", "tpu"):
        xd = x.to(device).requires_grad_()
        y = F.interpolate(xd, size=size, mode=mode)
        (grad,) = torch.autograd.grad((y * torch.linspace(-1, 1, y.numel()).view(y.shape).to(device)).sum(), xd)
        results[device] = (y.detach().cpu(), grad.cpu())
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-5, rtol=1e-5)


SAMPLED = [(dims, mode) for dims in (2, 3) for mode in ("bilinear", "nearest", "bicubic") if (dims, mode) != (3, "bicubic")]


@pytest.mark.parametrize("dims, mode", SAMPLED, ids=[f"{d}d-{m}" for d, m in SAMPLED])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
def test_grid_sample_weighs_outside_corners_and_nan_coordinates_as_the_cpus_kernels(dims, mode, padding_mode):
    # The CPU's 2-D kernel adds 0 * weight for a corner outside the input; torch's decomposition
    # read element (0, 0) with weight 0 there (its NaN and infinities spread: inf * 0) and gave 0
    # for a NaN coordinate, where the CPU's weight makes the sample NaN. The CPU's 3-D kernel
    # (which ran on the CPU fallback) skips outside corners. Their clamps take a NaN coordinate to
    # 0 (2-D) and to the last element (3-D) under border and reflection padding.
    torch.manual_seed(0)
    x = torch.randn(2, 3, *(4, 5, 6)[3 - dims:])
    grid = torch.rand(2, *(3, 4, 7)[3 - dims:], dims) * 2.4 - 1.2
    x.view(-1)[0], x.view(-1)[40], x.view(-1)[-1] = float("nan"), float("inf"), -float("inf")
    grid.view(-1)[0], grid.view(-1)[77] = float("nan"), float("nan")
    for align_corners in (False, True):
        f = lambda a, g: F.grid_sample(a, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)  # noqa: E731
        _matches_the_cpu_mostly_finite(f, x, grid, tol=1e-4)


@pytest.mark.parametrize("source", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("target", [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64])
def test_casts_to_integers_give_nan_and_out_of_range_values_the_cpus_results(source, target):
    # The CPU converts through int32 (x86's cvttss2si): NaN, the infinities and values beyond int32
    # become INT32_MIN, and its low bytes (0) for the narrower types; the chip's conversion saturates.
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 3e9, -3e9, 1e20, 300.7, -300.7, 2.5, -0.5])
    x = x.to(source).repeat(20)
    torch.testing.assert_close(x.to("tpu").to(target).cpu(), x.to(target), rtol=0, atol=0)


@pytest.mark.parametrize("groups", [1, 2, 4])
def test_transposed_convolution_adds_infinite_weights_only_where_they_reach(groups):
    # The CPU sums each input position's window (col2im): an infinite weight reaches the outputs
    # its taps touch, as inf. The chip computed a convolution over x dilated by the stride, where
    # the same weight also met the inserted zeros: inf * 0 = NaN, and NaN where the CPU has inf.
    g = torch.Generator().manual_seed(0)
    x, w, b = torch.randn(2, 4, 5, 6, generator=g), torch.randn(4, 8 // groups, 3, 3, generator=g), torch.randn(8, generator=g)
    w[1, 0, 1, 2], w[2, 1, 0, 0], x[0, 3, 2, 2] = float("inf"), -float("inf"), float("nan")
    for kw in ({"stride": 2, "padding": 1, "output_padding": 1}, {"stride": (3, 2), "dilation": 2}):
        want = F.conv_transpose2d(x, w, b, groups=groups, **kw)
        got = F.conv_transpose2d(x.to("tpu"), w.to("tpu"), b.to("tpu"), groups=groups, **kw).cpu()
        assert want.isinf().any() and want.isnan().any()
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, equal_nan=True)
