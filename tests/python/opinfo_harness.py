"""Differential testing against PyTorch's OpInfo database: each op's sample inputs run on "tpu"
and on the CPU, and the results are compared. Used by scripts/opinfo_report.py (the full sweep,
written to docs/opinfo.md) and by test_opinfo.py (a fixed sample in CI).

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
from torch.utils._pytree import tree_map

import vtpu

STATUSES = ("native", "fallback", "mismatch", "unsupported", "error", "crash")


@dataclasses.dataclass
class OpResult:
    name: str
    counts: dict
    first_problem: str = ""

    @property
    def status(self) -> str:
        for s in ("crash", "error", "unsupported", "mismatch", "fallback"):
            if self.counts.get(s):
                return s
        return "native" if self.counts.get("native") else "skipped"


def _to(device):
    def move(x):
        return x.to(device) if isinstance(x, torch.Tensor) else x
    return move


def _compare(got, want) -> str:
    got = tree_map(_to("cpu"), got)
    try:
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4, equal_nan=True, check_device=False)
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


def _compare_shapes(got, want) -> str:
    got_leaves, want_leaves = [], []
    tree_map(lambda x: got_leaves.append((tuple(x.shape), x.dtype)) if isinstance(x, torch.Tensor) else None, got)
    tree_map(lambda x: want_leaves.append((tuple(x.shape), x.dtype)) if isinstance(x, torch.Tensor) else None, want)
    return "" if got_leaves == want_leaves else f"random op: shapes/dtypes {got_leaves} != {want_leaves}"[:160]


def run_sample(op, sample) -> tuple[str, str]:
    try:
        want = op(sample.input, *sample.args, **sample.kwargs)
    except Exception:
        return "skip", ""
    moved = tree_map(_to("tpu"), (sample.input, sample.args, sample.kwargs))
    for allow_fallback in (False, True):
        vtpu.set_cpu_fallback(allow_fallback)
        before = vtpu.stats()["cpu_fallbacks"]
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                got = op(moved[0], *moved[1], **moved[2])
                if op.name in UNINITIALISED:
                    problem = ""
                elif _is_random(op, sample):
                    problem = _compare_shapes(got, want)
                else:
                    problem = _compare(got, want)
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


def run_op(op, dtype=torch.float32, max_samples=3) -> OpResult:
    result = OpResult(op.name + (f".{op.variant_test_name}" if op.variant_test_name else ""), {})
    try:
        samples = list(op.sample_inputs("cpu", dtype))[:max_samples]
    except Exception as e:
        result.counts["error"] = 1
        result.first_problem = f"sample_inputs: {type(e).__name__}"
        return result
    problems = {}
    for sample in samples:
        status, problem = run_sample(op, sample)
        if status == "skip":
            continue
        result.counts[status] = result.counts.get(status, 0) + 1
        if problem:
            problems.setdefault(status, problem)
    result.first_problem = problems.get(result.status, "")  # the first problem of the status reported
    return result
