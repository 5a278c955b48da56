"""Differential testing against PyTorch's OpInfo database: each op's sample inputs run on "tpu"
and on the CPU, and the results are compared. Used by scripts/opinfo_report.py (the full sweep,
written to docs/opinfo.md) and by test_opinfo.py (a fixed sample in CI).

Three passes: float32 forward, float32 backward (the gradients of a fixed weighted sum of the
outputs with respect to every floating input, for ops that support autograd) and bfloat16
forward (compared with bf16 tolerances). Samples are made on the CPU and moved to the chip as
OpInfo would make them there: views keep their storage, strides and offset, and tensors OpInfo
keeps on the CPU for other devices stay there.

Each (op, sample) is classified:
  native      ran on the chip (no CPU fallback) and matched the CPU
  fallback    needed VTPU_CPU_FALLBACK for some aten op, and then matched
  mismatch    ran (natively or with fallback) but differed from the CPU
  unsupported raised NotImplementedError even with fallback (e.g. int64 math on the chip)
  error       raised something else (on the CPU too: skipped, not counted)
"""
from __future__ import annotations

import dataclasses
import warnings

import torch
from torch.testing._internal.opinfo.core import SampleInput
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

import vtpu

STATUSES = ("native", "fallback", "mismatch", "unsupported", "error", "crash")


@dataclasses.dataclass
class OpResult:
    name: str
    counts: dict
    first_problem: str = ""
    # An item's status is its worst sample's: these from worst on, else BEST, else "skipped".
    WORST_FIRST = ("crash", "error", "unsupported", "mismatch", "fallback")
    BEST = "native"

    @property
    def status(self) -> str:
        for s in self.WORST_FIRST:
            if self.counts.get(s):
                return s
        return self.BEST if self.counts.get(self.BEST) else "skipped"


def op_name(op) -> str:
    """An OpInfo entry's name as the reports list it: name.variant."""
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def _move(x: torch.Tensor, device: str) -> torch.Tensor:
    """x on `device` as the sample holds it: a view into a larger storage (non-contiguous samples,
    as_strided's partial views) keeps its whole storage, offset and strides there, as a sample made
    on that device would."""
    itemsize = x.element_size()
    if device != "cpu" and x.layout == torch.strided and x.untyped_storage().nbytes() > x.numel() * itemsize:
        storage = torch.empty(0, dtype=x.dtype).set_(x.untyped_storage(), 0, (x.untyped_storage().nbytes() // itemsize,))
        return storage.to(device).as_strided(x.size(), x.stride(), x.storage_offset())
    return x.to(device)


def stays_on_cpu(op, dtype, backward: bool, count: int) -> list:
    """Per sample, which of its flattened leaves OpInfo keeps on the CPU when it makes samples for
    another device (tensor_split's indices must be there): the same samples made on "meta" show
    it. None for a sample when they cannot be made."""
    try:
        metas = list(op.sample_inputs("meta", dtype, requires_grad=backward))[:count]
    except Exception:
        metas = []
    flags = [[isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu"
              for leaf in tree_flatten((m.input, m.args, m.kwargs))[0]] for m in metas]
    return flags + [None] * (count - len(flags))


def _placed(sample, device: str, stays=None, prepare=lambda x: x):
    """The sample's (input, args, kwargs) with its tensors (each through `prepare`) on `device`,
    but for those `stays` keeps on the CPU."""
    leaves, spec = tree_flatten((sample.input, sample.args, sample.kwargs))
    if stays is None or len(stays) != len(leaves):
        stays = [False] * len(leaves)
    return tree_unflatten([_move(prepare(leaf), "cpu" if keep else device) if isinstance(leaf, torch.Tensor) else leaf
                           for leaf, keep in zip(leaves, stays)], spec)


# Comparison tolerances by dtype: float32 as before; bfloat16 and float16 about two of their ulps
# (8 and 11 significant bits).
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 1.6e-2, torch.float16: 2e-3}
LOW_PRECISION = (torch.bfloat16, torch.float16)

# torch's own tests that compare another device (or compiled code) with the CPU; an op's tolerance
# overrides for them are what torch itself allows a device that is not the CPU.
DEVICE_VS_CPU_TESTS = ("test_compare_cpu", "test_output_match", "test_comprehensive")


def tolerance(op, dtype) -> tuple[float, float]:
    """(atol, rtol): TOLERANCE, or the larger tolerance torch's device-vs-CPU tests grant this op."""
    from torch.testing._internal.common_device_type import toleranceOverride

    atol = rtol = TOLERANCE.get(dtype, 1e-4)
    for info in op.decorators:
        if getattr(info, "test_name", None) not in DEVICE_VS_CPU_TESTS:
            continue
        for decorator in getattr(info, "decorators", ()):
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                atol, rtol = max(atol, decorator.d[dtype].atol), max(rtol, decorator.d[dtype].rtol)
    return atol, rtol


# Ops whose index results may differ from the CPU's where values tie (bfloat16 and integer samples tie often):
# their values are compared, and their indices must select values equal to the CPU's.
TIES = ("sort", "argsort", "topk", "msort", "kthvalue")


def _compare(got, want, tol=(1e-4, 1e-4)) -> str:
    got = tree_map(lambda x: x.cpu() if isinstance(x, torch.Tensor) else x, got)
    try:
        torch.testing.assert_close(got, want, atol=tol[0], rtol=tol[1], equal_nan=True, check_device=False)
        return ""
    except AssertionError as e:
        return str(e).splitlines()[0][:160]
    except Exception as e:  # structures that differ
        return f"{type(e).__name__}: {str(e)[:120]}"


# Ops whose results are uninitialised memory by definition: only their running is checked.
UNINITIALISED = ("empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "empty_permuted")

# Ops whose results are drawn from a generator. OpInfo seeds every device with 42 and compares,
# but the chip's numbers come from Philox kernels, not the CPU's mt19937 stream (no two torch
# backends share one), so only their shapes and dtypes are compared here; tests/python/
# test_device.py checks the distributions. Attention ops are random only with dropout.
RANDOM = ("nn.functional.alpha_dropout", "nn.functional.dropout", "nn.functional.dropout2d", "nn.functional.dropout3d",
          "nn.functional.feature_alpha_dropout", "nn.functional.fractional_max_pool2d",
          "nn.functional.fractional_max_pool3d", "nn.functional.rrelu", "normal", "uniform", "rand_like", "randn_like",
          "randint_like", "bernoulli", "multinomial", "cauchy", "exponential", "geometric", "log_normal")


def _is_random(op, sample) -> bool:
    if op.name in RANDOM:
        return True
    return "attention" in op.name and (sample.kwargs.get("dropout_p", 0) > 0 or bool(sample.kwargs.get("training")))


# Low-rank factorisations from a random projection: the singular vectors are unique only up to a
# sign (real) or a phase (complex) each, which the projection's random numbers pick, and the
# chip's numbers are not the CPU's. Compared: the singular values and U diag(S) V^H.
RANDOM_PROJECTION = ("svd_lowrank", "pca_lowrank")


def _compare_factorisation(got, want, tol) -> str:
    def product(usv):
        u, s, v = (x.cpu() for x in usv)
        return (u * s.unsqueeze(-2).to(u.dtype)) @ v.mH

    return _compare((got[1], product(got)), (want[1], product(want)), tol)


# Symmetric eigendecompositions: each eigenvector is unique only up to its sign, which LAPACK's
# algorithm and the chip's Jacobi rotations pick differently (a phase, for complex ones). Compared:
# the eigenvalues, V diag(w) V^H and V^H V = I; the backward pass takes OpInfo's own gauge-free output (eigenvalues, |V|:
# the sample's output_process_fn_grad).
SIGN_FREE = ("linalg.eigh",)


def _compare_eigh(got, want, tol) -> str:
    (w, v), (want_w, want_v) = [(x.cpu() for x in pair) for pair in (got, want)]
    identity = torch.eye(v.shape[-1], dtype=v.dtype).expand_as(v)
    return _compare((w, (v * w.unsqueeze(-2)) @ v.mH, v.mH @ v),
                    (want_w, (want_v * want_w.unsqueeze(-2)) @ want_v.mH, identity), tol)


def _compare_shapes(got, want) -> str:
    got_leaves, want_leaves = [], []
    tree_map(lambda x: got_leaves.append((tuple(x.shape), x.dtype)) if isinstance(x, torch.Tensor) else None, got)
    tree_map(lambda x: want_leaves.append((tuple(x.shape), x.dtype)) if isinstance(x, torch.Tensor) else None, want)
    return "" if got_leaves == want_leaves else f"random op: shapes/dtypes {got_leaves} != {want_leaves}"[:160]


def _compare_ties(op, sample, got, want, tol) -> str:
    """Sorting ops where values tie: values as usual, indices through the values they select."""
    dim = sample.kwargs.get("dim", sample.args[1] if op.name in ("topk", "kthvalue") and len(sample.args) > 1 else
                            sample.args[0] if op.name in ("sort", "argsort") and sample.args and
                            isinstance(sample.args[0], int) else -1)
    x = sample.input
    if x.dim() == 0:
        return _compare(got, want, tol)
    if op.name == "kthvalue" and not sample.kwargs.get("keepdim", len(sample.args) > 2 and sample.args[2]):
        dim = dim % x.dim()  # its indices lost the dim: gathered with it put back

        def pick(indices):
            return x.gather(dim, indices.cpu().unsqueeze(dim)).squeeze(dim)
        return _compare((got[0], pick(got[1])), (want[0], pick(want[1])), tol)
    if op.name == "argsort":
        return _compare(x.gather(dim, got.cpu()), x.gather(dim, want), tol)
    if op.name == "msort":
        return _compare(got, want, tol)
    values, indices = got
    return _compare((values, x.gather(dim, indices.cpu())), (want[0], x.gather(dim, want[1])), tol)


def _compare_f32_reference(op, sample, got, tol, dtype) -> str:
    """bfloat16 or float16 against the CPU's float32 result rounded to that dtype: what a chip
    computing in f32 and rounding once gives, where the CPU's low-precision kernels round every
    intermediate (cross's products, addr's outer product) and differ from it by more than the
    tolerance."""
    def widen(x):
        return x.float() if isinstance(x, torch.Tensor) and x.dtype == dtype else x

    def narrow(x):
        return x.to(dtype) if isinstance(x, torch.Tensor) and x.dtype == torch.float32 else x

    try:
        args = tree_map(widen, (sample.input, sample.args, sample.kwargs))
        reference = tree_map(narrow, op(args[0], *args[1], **args[2]))
    except Exception as e:
        return f"float32 reference: {type(e).__name__}"
    return _compare(got, reference, tol)


# The note a float32 result carries when it matched float64 and the CPU's float32 did not.
CLOSER_TO_FLOAT64 = "matches float64, which the CPU's float32 result misses"


def _in_float64(op, sample, backward: bool):
    """The sample's result (or gradients) computed on the CPU in float64, rounded to float32: the
    correctly rounded answer both devices' float32 kernels approximate."""
    def widen(x):
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.complex64):
            return x.detach().to(torch.float64 if x.dtype == torch.float32 else torch.complex128).requires_grad_(
                x.requires_grad)
        return x

    def narrow(x):
        if isinstance(x, torch.Tensor) and x.dtype in (torch.float64, torch.complex128):
            return x.to(torch.float32 if x.dtype == torch.float64 else torch.complex64)
        return x

    wide = tree_map(widen, (sample.input, sample.args, sample.kwargs))
    wide = SampleInput(wide[0], args=wide[1], kwargs=wide[2], output_process_fn_grad=sample.output_process_fn_grad)
    return tree_map(narrow, _gradients(op, wide, "cpu") if backward else op(wide.input, *wide.args, **wide.kwargs))


def _judged_by_float64(op, sample, got, want, tol, backward: bool) -> bool:
    """Whether the chip's float32 result is within tolerance of float64's where the CPU's is not
    (rounding amplified by the CPU's order of operations: matrix_exp's squarings, logcumsumexp's
    gradient at large inputs). Both are judged by one yardstick, so this never passes a result
    further from the true answer than the CPU's own."""
    try:
        reference = _in_float64(op, sample, backward)
    except Exception:
        return False
    return not _compare(got, reference, tol) and bool(_compare(want, reference, tol))


def _weights_like(outputs):
    """A fixed weight per output element (so the backward pass sees every element differently);
    the same numbers for a float64 output as for its float32 twin (_in_float64)."""
    gen = torch.Generator().manual_seed(1234)
    drawn = {torch.float64: torch.float32, torch.complex128: torch.complex64}
    return [torch.randn(o.shape, generator=gen, dtype=drawn.get(o.dtype, o.dtype)).to(o.dtype) for o in outputs]


def _differentiable(value) -> list:
    leaves = []
    tree_map(lambda x: leaves.append(x) if isinstance(x, torch.Tensor) and x.requires_grad else None, value)
    return leaves


def _gradients(op, sample, device, stays=None):
    """The gradients of sum(weights * outputs) with respect to the sample's differentiable inputs,
    with the sample moved to `device` (leaves made there)."""
    args = _placed(sample, device, stays, prepare=lambda x: x.detach())
    wanted = tree_flatten((sample.input, sample.args, sample.kwargs))[0]
    leaves, spec = tree_flatten(args)
    args = tree_unflatten([leaf.requires_grad_(w.requires_grad) if isinstance(leaf, torch.Tensor) else leaf
                           for leaf, w in zip(leaves, wanted)], spec)
    inputs = _differentiable(args)
    result = op(args[0], *args[1], **args[2])
    if op.name in SIGN_FREE:
        result = sample.output_process_fn_grad(result)
    outputs = [o for o in _differentiable(result) if o.is_floating_point()]
    if not inputs or not outputs:
        return None
    total = sum((o * w.to(o.device)).sum() for o, w in zip(outputs, _weights_like(outputs)))
    grads = torch.autograd.grad(total, inputs, allow_unused=True)
    return [g if g is not None else torch.zeros_like(i) for g, i in zip(grads, inputs)]


def run_sample(op, sample, dtype=torch.float32, backward=False, stays=None) -> tuple[str, str]:
    """`stays`: which of the sample's leaves stay on the CPU (stays_on_cpu)."""
    try:
        want = _gradients(op, sample, "cpu") if backward else op(sample.input, *sample.args, **sample.kwargs)
        if backward and want is None:
            return "skip", ""
    except Exception:
        return "skip", ""
    moved = _placed(sample, "tpu", stays)
    notes = []

    def on_chip() -> str:
        got = _gradients(op, sample, "tpu", stays) if backward else op(moved[0], *moved[1], **moved[2])
        if op.name in UNINITIALISED:
            return ""
        if _is_random(op, sample):
            return _compare_shapes(got, want)
        if op.name in RANDOM_PROJECTION and not backward:
            return _compare_factorisation(got, want, tolerance(op, dtype))
        if op.name in SIGN_FREE and not backward:
            return _compare_eigh(got, want, tolerance(op, dtype))
        if op.name in TIES and not backward:
            return _compare_ties(op, sample, got, want, tolerance(op, dtype))
        problem = _compare(got, want, tolerance(op, dtype))
        if problem and dtype in LOW_PRECISION and not backward:
            problem = _compare_f32_reference(op, sample, got, tolerance(op, dtype), dtype) and problem
        if problem and dtype == torch.float32 and _judged_by_float64(op, sample, got, want, tolerance(op, dtype),
                                                                     backward):
            notes.append(CLOSER_TO_FLOAT64)
            return ""
        return problem

    status, problem = classify(on_chip)
    if notes and status in ("native", "fallback"):
        problem = "; ".join(filter(None, (problem, notes[-1])))
    return status, problem


def classify(on_chip) -> tuple[str, str]:
    """The status of a differential check: `on_chip()` runs the work on tpu and returns "" when
    it matched the CPU, else the problem. It runs with the CPU fallback off, and again with it on
    when an op was not lowered; the fallback's ops are named."""
    for allow_fallback in (False, True):
        vtpu.set_cpu_fallback(allow_fallback)
        before = vtpu.stats()["cpu_fallbacks"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                problem = on_chip()
            vtpu.synchronize()
        except NotImplementedError as e:
            if allow_fallback:
                return "unsupported", str(e).splitlines()[0][:160]
            continue
        except Exception as e:
            return "error", f"{type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}"
        finally:
            vtpu.set_cpu_fallback(False)
        if problem:
            return "mismatch", problem
        after = vtpu.stats()["cpu_fallbacks"]
        fell_back = sorted(name for name, count in after.items() if count > before.get(name, 0))
        if allow_fallback and fell_back:
            return "fallback", "on the CPU: " + ", ".join(fell_back)
        return "native", ""
    return "unsupported", "no result"


def with_special_values(value):
    """A copy of a dense floating tensor with NaN, +inf and -inf at its first, middle and last
    elements (tensors of fewer than 3 elements, and all others, as they are)."""
    if not (isinstance(value, torch.Tensor) and value.layout == torch.strided and value.is_floating_point()
            and value.numel() >= 3 and value.is_contiguous()):
        return value
    value = value.detach().clone()
    flat = value.view(-1)
    flat[0], flat[value.numel() // 2], flat[-1] = float("nan"), float("inf"), float("-inf")
    return value


# Ops whose CPU kernel kills the process on NaN input (MKL's eigenvalue routine: "Parameter 3 was
# incorrect on entry to SGEBAL", then a segmentation fault), so there is no reference to compare with.
CPU_CRASHES_ON_SPECIALS = {"linalg.eigvals"}


def run_op(op, dtype=torch.float32, max_samples=3, backward=False, specials=False) -> OpResult:
    """`specials`: every floating input carries NaN and infinities (with_special_values)."""
    result = OpResult(op_name(op), {})
    if specials and op.name in CPU_CRASHES_ON_SPECIALS:
        return result  # skipped
    try:
        samples = list(op.sample_inputs("cpu", dtype, requires_grad=backward))[:max_samples]
        if specials:
            samples = [SampleInput(tree_map(with_special_values, s.input), args=tree_map(with_special_values, s.args),
                                   kwargs=s.kwargs) for s in samples]
    except Exception as e:
        result.counts["error"] = 1
        result.first_problem = f"sample_inputs: {type(e).__name__}"
        return result
    problems = {}
    for sample, stays in zip(samples, stays_on_cpu(op, dtype, backward, len(samples))):
        status, problem = run_sample(op, sample, dtype, backward, stays)
        if status == "skip":
            continue
        result.counts[status] = result.counts.get(status, 0) + 1
        if problem:
            problems.setdefault(status, problem)
    result.first_problem = problems.get(result.status, "")  # the first problem of the status reported
    return result
