"""int64 arithmetic on the chip (torch_bridge/csrc/aten/int64.h): add/sub/mul/comparisons/max/min
and true division of int64 tensors whose magnitude is known, run on their narrowed int32 words;
add/sub/comparisons/max/min at any magnitude on the exact 64-bit word arithmetic; what neither
covers stays off the chip (an error naming the op); and the position-id arithmetic of decoder
models end to end."""
import pytest
import torch

import vtpu


OPS = {
    "add": lambda a, b: a + b,
    "sub_scalar_left": lambda a, b: 7 - a,
    "add_scalar": lambda a, b: a + 1000,
    "lt": lambda a, b: a < b,
    "eq_scalar": lambda a, b: a == 3,
    "ge_int32": lambda a, b: a >= b.int(),
    "maximum": lambda a, b: torch.maximum(a, b),
    "minimum": lambda a, b: torch.minimum(a, b),
    "true_div": lambda a, b: a / 4,
    "chain": lambda a, b: ((a + b) - (b - a)) + (a + b),
    "mul": lambda a, b: a * b,
    "mul_scalar": lambda a, b: (a + 1) * -3,
    "mul_float_scalar": lambda a, b: a * 0.5,
}


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_int64_ops_match_cpu(name, mode, no_fallback):
    vtpu.set_mode(mode)
    a, b = torch.arange(-6, 18).view(4, 6), torch.randint(-1000, 1000, (4, 6))
    got = OPS[name](a.to("tpu"), b.to("tpu"))
    want = OPS[name](a, b)
    assert got.dtype == want.dtype
    torch.testing.assert_close(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    vtpu.set_mode("defer_and_fuse")


EXACT_OPS = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "sub_alpha_scalar": lambda a, b: torch.sub(a, 2**35, alpha=3),
    "add_alpha_tensor": lambda a, b: torch.add(a, b, alpha=-7),
    "mul": lambda a, b: a * b,
    "mul_broadcast": lambda a, b: a * b[:1],
    "mul_in_place": lambda a, b: a.clone().mul_(b),
    "rsub_scalar": lambda a, b: 5 - a,
    "add_int32": lambda a, b: a + b[0].int(),
    "add_in_place": lambda a, b: a.clone().add_(b),
    "maximum": lambda a, b: torch.maximum(a, b),
    "minimum_row": lambda a, b: torch.minimum(a, b[:1]),
    "lt": lambda a, b: a < b,
    "le": lambda a, b: a <= b,
    "gt_scalar": lambda a, b: a > -(2**40),
    "ge": lambda a, b: a >= b,
    "eq": lambda a, b: a == b,
    "ne_scalar": lambda a, b: a != 0,
    "neg": lambda a, b: -a,
    "abs": lambda a, b: a.abs(),
    "sign": lambda a, b: a.sign(),
    "constant_pad": lambda a, b: torch.nn.functional.pad(a, (1, 2, 0, 1), value=-(2**40)),
    "constant_pad_crop": lambda a, b: torch.nn.functional.pad(a, (-1, 1), value=7),
}


@pytest.mark.parametrize("name", sorted(EXACT_OPS))
def test_any_magnitude_runs_exactly_on_the_words(name, no_fallback):
    # int64 extremes, carries across the low word, equal high words: what only 64-bit arithmetic
    # gets right (kernels/compose/int64_words.h); sums wrap modulo 2^64 as torch's do.
    torch.manual_seed(0)
    a = torch.randint(-2**62, 2**62, (5, 6))
    a[0, :4] = torch.tensor([2**63 - 1, -2**63, 0, 2**32 - 1])
    b = torch.randint(-2**62, 2**62, (5, 6))
    b[0, :4] = torch.tensor([1, -1, -1, 1])
    b[1] = a[1]
    b[2] = a[2] + 1
    got, want = EXACT_OPS[name](a.to("tpu"), b.to("tpu")), EXACT_OPS[name](a, b)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_bounds_follow_the_arithmetic_and_past_them_the_words_take_over(no_fallback):
    # Each sum doubles the known bound; past 2^30 the narrowed int32 path stops taking the
    # operands and the exact word arithmetic runs instead (int32 sums there could wrap).
    x = torch.tensor([2**27]).to("tpu")
    y = x + x  # 2^28
    y = y + y  # 2^29
    assert (y - 1).cpu().tolist() == [2**29 - 1]
    z = y + y  # 2^30
    assert (z + z + 2**31).cpu().tolist() == [2**31 + 2**31]
    assert (torch.tensor([2**40, -3]).to("tpu") + 1).cpu().tolist() == [2**40 + 1, -2]
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_float_operands_of_unknown_int64_stay_off_the_chip(no_fallback):
    # torch converts the int64 to the float first; past 2^24 f32 rounds it, which the chip's
    # narrowed path does not do: the op names itself instead of answering differently.
    with pytest.raises(NotImplementedError, match="aten::add"):
        torch.tensor([2**40, -3]).to("tpu") + torch.ones(2, device="tpu")


def test_products_past_int32_run_exactly_on_the_words(no_fallback):
    # Small known magnitudes take the narrowed int32 product; past 2^31 the words' product
    # (kernels::mul_int64, wrapping modulo 2^64 as torch's does) takes over instead of the CPU.
    a = torch.tensor([50000, -3]).to("tpu")
    assert (a * torch.tensor([40000, 7]).to("tpu")).cpu().tolist() == [2_000_000_000, -21]  # |a| * |b| < 2^31
    assert (a * torch.tensor([50000, 1]).to("tpu")).cpu().tolist() == [2_500_000_000, -3]
    edge = torch.tensor([0, 1, -1, 2**31, 2**32 - 1, -2**31, 2**63 - 1, -2**63, 2**32, 3037000499, 65535, 2**48 + 12345])
    for b in (edge.flip(0), edge, torch.full_like(edge, -7)):
        assert torch.equal((edge.to("tpu") * b.to("tpu")).cpu(), edge * b)
    assert torch.equal((edge.to("tpu") * 12345678901).cpu(), edge * 12345678901)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_decoder_position_ids_and_causal_mask_on_the_chip(no_fallback):
    past, length = 5, 7
    cache_position = torch.arange(past, past + length, device="tpu")
    position_ids = cache_position.unsqueeze(0) + 0
    kv = torch.arange(past + length, device="tpu")
    causal = kv.view(1, -1) <= cache_position.view(-1, 1)
    want_causal = torch.arange(past + length).view(1, -1) <= torch.arange(past, past + length).view(-1, 1)
    assert position_ids.cpu().tolist() == [list(range(past, past + length))]
    assert torch.equal(causal.cpu(), want_causal)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("args", [(), (1,), (0, True)])
def test_integer_sums_run_on_the_chip_exactly(args, no_fallback):
    mask = torch.rand(5, 9) > 0.4
    small = torch.randint(-128, 128, (5, 9), dtype=torch.int8)
    for t in (mask, small, torch.arange(45).view(5, 9)):
        got, want = t.to("tpu").sum(*args), t.sum(*args)
        assert got.dtype == want.dtype == torch.int64
        assert torch.equal(got.cpu(), want)
    assert (mask.to("tpu").sum() == mask.numel()).item() == bool(mask.all())  # transformers' fast_all
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    # any int32 and int64 values: byte planes summed exactly, wrapping modulo 2^64 as torch's
    big = torch.randint(-2**62, 2**62, (5, 9))
    big[0, :3] = torch.tensor([2**63 - 1, 2**63 - 1, 5])
    for t in (torch.randint(-2**31, 2**31 - 1, (5, 9), dtype=torch.int32), big):
        got, want = t.to("tpu").sum(*args), t.sum(*args)
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    with pytest.raises(NotImplementedError, match="integer sums"):
        torch.ones(70000, dtype=torch.int32, device="tpu").sum()  # past 65793 elements a byte sum may round


def test_integer_sums_of_one_element_tensors(no_fallback):
    """0-d bool and int64 sums (count_nonzero, amax's backward and masked.mean on 0-d inputs make
    them) run as one-element rows, like float ones."""
    for t in (torch.tensor(True), torch.tensor(False), torch.tensor(7)):
        for args in ((), (0,), (0, True)):
            got, want = t.to("tpu").sum(*args), t.sum(*args)
            assert got.shape == want.shape and got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert torch.count_nonzero(torch.tensor(3.0, device="tpu")).item() == 1
    x = torch.tensor(2.5, device="tpu", requires_grad=True)
    x.amax().backward()
    assert x.grad.item() == 1.0
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_one_element_slices_of_int64_tensors(no_fallback):
    # x[:, -1] of a [1, n] tensor is one element with stride n: its words are still dense.
    ids = torch.arange(8).view(1, 8).to("tpu")
    last = ids[:, -1]
    assert (last + 1).cpu().tolist() == [8]
    assert (ids[:, 3] < 5).cpu().tolist() == [True]


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_casts_to_and_from_int64_run_on_the_chip(mode, no_fallback):
    """bool, int8 and int32 widen to int64 words on the chip; int64 of known magnitude converts to
    f32, bf16, int32, int8 and bool there; nothing crosses to the host until the results are read.
    Values of unknown or large magnitude still convert (through the host) and stay exact."""
    vtpu.set_mode(mode)
    mask = torch.tensor([[True, False, True]])
    small = torch.tensor([-5, 2**31 - 1, -2**31], dtype=torch.int32)
    ids = torch.tensor([3, -7, 100])
    on_chip = [t.to("tpu") for t in (mask, small, ids)]
    vtpu.synchronize()
    before = vtpu.stats()["device_to_host_bytes"]
    widened = [on_chip[0].long(), on_chip[1].long(), on_chip[0].to(torch.int8).long()]
    narrowed = [on_chip[2].to(dtype) for dtype in (torch.float32, torch.bfloat16, torch.int32, torch.int8, torch.bool)]
    shifted = widened[0] + 1  # the widened values' bound is known: int64 add on the chip
    vtpu.synchronize()
    assert vtpu.stats()["device_to_host_bytes"] == before
    assert [t.dtype for t in widened] == [torch.int64] * 3
    assert torch.equal(widened[0].cpu(), mask.long()) and torch.equal(widened[1].cpu(), small.long())
    assert torch.equal(widened[2].cpu(), mask.long())
    for got, dtype in zip(narrowed, (torch.float32, torch.bfloat16, torch.int32, torch.int8, torch.bool)):
        assert got.dtype == dtype and torch.equal(got.cpu(), ids.to(dtype))
    assert torch.equal(shifted.cpu(), mask.long() + 1)
    big = torch.tensor([2**40 + 1, -3])
    assert torch.equal(big.to("tpu").float().cpu(), big.float())
    edge = torch.tensor([128, -128])  # int8 wraps 128 to -128 (the chip would saturate: host path)
    assert torch.equal(edge.to("tpu").to(torch.int8).cpu(), edge.to(torch.int8))
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    vtpu.set_mode("defer_and_fuse")


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("divisor", [2, 3, -4, 1000])
def test_floor_division_and_remainder_by_a_constant(mode, divisor, no_fallback):
    """Mixture-of-experts token indices (slot // top_k) and their remainders, negative values
    and divisors included, against Python's rule (torch's for integers)."""
    vtpu.set_mode(mode)
    values = torch.tensor([-100000, -7, -6, -1, 0, 1, 5, 7, 15, 99999])
    t = values.to("tpu")
    assert torch.equal((t // divisor).cpu(), values // divisor)
    assert torch.equal((t % divisor).cpu(), values % divisor)
    slots = torch.arange(16, device="tpu")
    assert torch.equal((slots // 2 + slots % 2).cpu(), torch.arange(16) // 2 + torch.arange(16) % 2)  # bounds carry on
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    vtpu.set_mode("defer_and_fuse")


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_floor_division_and_remainder_by_a_tensor(mode, no_fallback):
    """Element by element, signs of both kinds, broadcast divisors, and bounds that carry on."""
    vtpu.set_mode(mode)
    values = torch.tensor([[-100000, -7, -6, -1, 0, 1, 5, 7, 15, 99999]] * 3)
    divisors = torch.tensor([[3, 2, -4, 7, -1, 1000, -3, 5, 2, -999]] * 3)
    a, b = values.to("tpu"), divisors.to("tpu")
    assert torch.equal((a // b).cpu(), values // divisors)
    assert torch.equal((a % b).cpu(), values % divisors)
    column = torch.tensor([[2], [-5], [9]])
    assert torch.equal((a // column.to("tpu")).cpu(), values // column)  # broadcast
    assert torch.equal(((a // b) * 2 + a % b).cpu(), (values // divisors) * 2 + values % divisors)
    assert vtpu.stats()["cpu_fallback_ops"] == 0
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        a // torch.tensor([1, 0, 2] * 3 + [1]).to("tpu")
    vtpu.set_mode("defer_and_fuse")


def test_integer_division_by_zero_and_what_stays_on_the_cpu(no_fallback):
    with pytest.raises(RuntimeError, match="ZeroDivisionError"):
        torch.arange(4, device="tpu") // 0
    with pytest.raises(NotImplementedError, match="floor_divide.*known magnitude"):
        torch.tensor([2**40]).to("tpu") // 3
    x = torch.randn(3)  # floats' remainder: exact on the chip (test_float_division.py)
    assert torch.equal((x.to("tpu") % 2).cpu(), x % 2)


@pytest.mark.parametrize("dtype,exact_below", [(torch.float32, 2**24), (torch.float16, 2**11), (torch.bfloat16, 2**8)],
                         ids=str)
def test_int64_against_a_float_runs_on_the_chip_while_that_float_holds_it(dtype, exact_below, no_fallback):
    """torch converts the int64 operand to the float's dtype first: exact below 2^24 (f32), 2^11
    (f16), 2^8 (bf16), where computing in f32 gives the same; past that the rounding is the CPU's."""
    x = torch.linspace(-3, 3, 7).to(dtype)
    counts = torch.tensor([1, 2, 3, 5, 7, exact_below - 1, -(exact_below - 1)])
    assert torch.equal((x.to("tpu") / counts.to("tpu")).cpu(), x / counts)
    with pytest.raises(NotImplementedError, match="aten::div"):
        x.to("tpu") / (counts + 1).to("tpu")  # reaches exact_below


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_cat_and_stack_move_int64_words_whatever_their_magnitude(mode, no_fallback):
    vtpu.set_mode(mode)
    a, b = torch.tensor([[2**40, -3], [5, 6]]), torch.tensor([[7, -2**35]])
    narrow = torch.tensor([[1, 2]], dtype=torch.int32)  # widened to int64 words first
    assert torch.equal(torch.cat([a.to("tpu"), b.to("tpu"), narrow.to("tpu")]).cpu(), torch.cat([a, b, narrow]))
    assert torch.equal(torch.cat([a.to("tpu"), a.to("tpu")], 1).cpu(), torch.cat([a, a], 1))
    positions = torch.stack([torch.arange(5, device="tpu"), torch.arange(5, device="tpu") * 2])
    assert torch.equal((positions + 1).cpu(), torch.stack([torch.arange(5), torch.arange(5) * 2]) + 1)  # bounds carry over
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
def test_indexing_int64_tensors_gathers_their_words(mode, no_fallback):
    """x[idx], x[:, idx], x[i, j], x[mask] and index_select of int64 data of any magnitude: each
    element's two int32 words are gathered together; small values keep their bound."""
    vtpu.set_mode(mode)
    x = torch.tensor([[2**40, -3, 7], [5, 6, -2**33], [1, 2, 3]])
    i, mask = torch.tensor([2, 0, -1]), torch.tensor([True, False, True])
    for pick in (lambda t, j: t[j], lambda t, j: t[:, j], lambda t, j: t[j, j], lambda t, j: t.index_select(1, j.abs())):
        assert torch.equal(pick(x.to("tpu"), i.to("tpu")).cpu(), pick(x, i))
    assert torch.equal(x.to("tpu")[mask.to("tpu")].cpu(), x[mask])
    positions = torch.arange(6, device="tpu").view(2, 3)
    assert torch.equal((positions[:, torch.tensor([2, 0], device="tpu")] + 1).cpu(), torch.tensor([[3, 1], [6, 4]]))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


EXTREMES = {
    "amax": lambda t: t.amax(),
    "amin_dim": lambda t: t.amin(1),
    "amax_dims": lambda t: t.amax((0, 2)),
    "max": lambda t: t.max(),
    "argmax": lambda t: t.argmax(),
    "argmin_dim": lambda t: t.argmin(2),
    "argmax_keepdim": lambda t: t.argmax(1, keepdim=True),
    "max_dim": lambda t: t.max(1),
    "min_dim": lambda t: t.min(0),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8])
@pytest.mark.parametrize("name", sorted(EXTREMES))
def test_integer_max_min_and_their_positions_at_any_magnitude(name, dtype, no_fallback):
    # ties (the first position wins), the type's extremes, and int64 values that differ only in
    # the low word or only in the high word
    torch.manual_seed(0)
    info = torch.iinfo(dtype)
    x = torch.randint(info.min, info.max, (4, 5, 3), dtype=dtype)
    x[0, 0, 0], x[1, :, 1] = info.max, info.min
    x[2, 1:3, :] = x[2, 0, 0]
    if dtype == torch.int64:
        x[3, :, 2] = torch.tensor([2**40, 2**40 + 1, -(2**40), 2**40 + 1, 5])
    got, want = EXTREMES[name](x.to("tpu")), EXTREMES[name](x)
    for g, w in zip(got if isinstance(got, tuple) else [got], want if isinstance(want, tuple) else [want]):
        assert g.dtype == w.dtype and torch.equal(g.cpu(), w)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("scalar", [float("inf"), float("-inf"), float("nan"), 2.5, 16777217.0, -16777217.0, 2.0**40, 9.3e18, 1e30])
def test_int64_against_a_float_number_compares_as_torch_rounds_it(scalar, no_fallback):
    # torch compares f32(x) with f32(s): 2^24 + 1 rounds to 2^24, so it is not > 16777217.0; the
    # chip compares the words against the integer where f32 rounding crosses s.
    x = torch.tensor([0, 1, -1, 2**24, 2**24 + 1, 2**24 + 2, 2**24 + 3, -(2**24) - 1, 2**40 + 12345, 2**63 - 1, -(2**63)])
    for f in (lambda a: a < scalar, lambda a: a <= scalar, lambda a: a > scalar, lambda a: a >= scalar,
              lambda a: a == scalar, lambda a: a != scalar, lambda a: scalar < a, lambda a: scalar >= a):
        assert torch.equal(f(x.to("tpu")).cpu(), f(x))
    assert vtpu.stats()["cpu_fallback_ops"] == 0


DIV_MODES = {
    "trunc_by_constant": lambda x, y: x.div(3, rounding_mode="trunc"),
    "trunc_by_negative_constant": lambda x, y: x.div(-4, rounding_mode="trunc"),
    "trunc_by_tensor": lambda x, y: x.div(y, rounding_mode="trunc"),
    "floor_by_tensor": lambda x, y: x.div(y, rounding_mode="floor"),
    "float_trunc": lambda x, y: x.float().div(2.5, rounding_mode="trunc"),
    "bf16_trunc_in_f32": lambda x, y: x.bfloat16().div(y.bfloat16(), rounding_mode="trunc"),
    "int_by_float_trunc": lambda x, y: x.div(2.5, rounding_mode="trunc"),
    "float_floor": lambda x, y: x.float().div(y.float(), rounding_mode="floor"),
    "fmod_int64": lambda x, y: torch.fmod(x, y),
    "fmod_int64_by_constant": lambda x, y: torch.fmod(x, -3),
}


@pytest.mark.parametrize("name", sorted(DIV_MODES))
def test_division_rounding_modes(name, no_fallback):
    # MoE routing's token index (slot.div(top_k, rounding_mode="trunc")), negatives included
    a, b = torch.arange(-20, 20), torch.tensor([3, -3, 7, -1] * 10)
    got, want = DIV_MODES[name](a.to("tpu"), b.to("tpu")), DIV_MODES[name](a, b)
    assert got.dtype == want.dtype and torch.equal(got.cpu(), want)
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_zero_dim_int64_keeps_a_zero_dim_result(no_fallback):
    n = torch.tensor(2**40)
    for f in (lambda x: x + 1, lambda x: -x, lambda x: x.sign(), lambda x: x < 2.5, lambda x: x == 3,
              lambda x: torch.maximum(x, torch.tensor(3))):
        got, want = f(n.to("tpu")), f(n)
        assert got.shape == want.shape == () and torch.equal(got.cpu(), want)


@pytest.mark.parametrize("value", [2**63 - 1, -(2**63), 2**53 + 1, -(2**60) - 7])
def test_fills_keep_every_bit_of_an_int64_value(value, no_fallback):
    # the fill kernel's constant is a double: values past 2^53 are written from the host instead
    assert torch.full((5,), value, dtype=torch.long, device="tpu").cpu().tolist() == [value] * 5
    assert torch.zeros(3, 2, dtype=torch.long, device="tpu").fill_(value).cpu().eq(value).all()
