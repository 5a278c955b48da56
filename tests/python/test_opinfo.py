"""A fixed sample of PyTorch's OpInfo database through the differential harness (the full sweep
is scripts/opinfo_report.py -> docs/opinfo.md): these ops are lowered, so every sample must match
the CPU, natively or (for int64 corner cases) through the counted fallback."""
import pytest
import torch

pytest.importorskip("expecttest")
from torch.testing._internal.common_methods_invocations import op_db  # noqa: E402

import vtpu  # noqa: E402,F401
from opinfo_harness import run_op  # noqa: E402

SAMPLE = ["add", "sub", "mul", "div.no_rounding_mode", "exp", "log", "tanh", "sigmoid", "rsqrt", "abs", "neg", "maximum", "minimum",
          "clamp", "where", "softmax", "log_softmax", "mm", "bmm", "addmm", "sum", "mean", "amax", "cat",
          "nn.functional.relu", "nn.functional.gelu", "nn.functional.silu", "nn.functional.layer_norm",
          "nn.functional.linear"]


# Their first samples use forms not lowered yet (0-dim inputs, tensor bounds): fallback only.
FALLBACK_ONLY = {"clamp", "sum", "mean", "amax"}


# Gradients and bfloat16 of ops training code leans on: entirely on the chip.
BACKWARD_AND_BF16 = ["add", "mul", "exp", "tanh", "softmax", "log_softmax", "mm", "sum", "mean", "nn.functional.gelu",
                     "nn.functional.layer_norm", "nn.functional.linear", "nn.functional.cross_entropy",
                     "nn.functional.conv2d", "nn.functional.max_pool2d", "nn.functional.embedding", "floor", "atan2",
                     "cummax", "cummin"]


@pytest.mark.parametrize("name", BACKWARD_AND_BF16)
def test_opinfo_backward_and_bfloat16_native(name):
    op = [op for op in op_db if op.name == name and not op.variant_test_name][0]
    for result in (run_op(op, backward=True), run_op(op, dtype=torch.bfloat16)):
        assert result.status == "native", (result.counts, result.first_problem)


@pytest.mark.parametrize("name", SAMPLE)
def test_opinfo_sample_matches_cpu(name):
    base, _, variant = name.partition(".") if name.startswith(("div",)) else (name, "", "")
    ops = [op for op in op_db if op.name == base and op.variant_test_name == variant]
    assert ops, f"{name} is not in op_db"
    result = run_op(ops[0])
    assert result.status in ("native", "fallback"), (result.status, result.first_problem)
    if name not in FALLBACK_ONLY:
        assert result.counts.get("native", 0) >= 1  # at least one sample ran entirely on the chip


# NaN, +inf and -inf in every floating input (the report's "float32 NaN/inf" pass): entirely on the
# chip and equal to the CPU, NaN for NaN. cumsum and hypot were fixed by this pass.
SPECIAL_VALUES = ["add", "mul", "exp", "log", "maximum", "minimum", "clamp", "where", "softmax", "log_softmax",
                  "sum", "amax", "cumsum", "hypot", "nn.functional.relu", "nn.functional.max_pool2d", "atan2", "sort",
                  "cummax"]


@pytest.mark.parametrize("name", SPECIAL_VALUES)
def test_opinfo_nan_and_infinities_native(name):
    op = [op for op in op_db if op.name == name and not op.variant_test_name][0]
    result = run_op(op, specials=True)
    assert result.status == "native", (result.counts, result.first_problem)


# complex64 (the report's "complex64" pass): the chip's rules over (re, im) planes, entirely on the
# chip and equal to the CPU.
COMPLEX64 = ["add", "sub", "mul", "div.no_rounding_mode", "neg", "exp", "log", "abs", "reciprocal", "sgn", "angle",
             "sum", "mean", "var", "cumsum", "mm", "bmm", "matmul", "cat", "where", "view_as_real", "real", "imag",
             "conj_physical", "index_select", "gather", "constant_pad_nd", "eq", "ne", "sin", "cos"]


@pytest.mark.parametrize("name", COMPLEX64)
def test_opinfo_complex64_native(name):
    base, _, variant = name.partition(".") if name.startswith(("div",)) else (name, "", "")
    op = [op for op in op_db if op.name == base and op.variant_test_name == variant][0]
    result = run_op(op, dtype=torch.complex64)
    assert result.status == "native", (result.counts, result.first_problem)


@pytest.mark.parametrize("name", ["tensor_split", "as_strided.partial_views"])
def test_samples_keep_their_views_and_cpu_arguments(name):
    """A sample moves to the chip as OpInfo would make it there: tensor_split's indices stay on the
    CPU (torch requires them there), and as_strided's partial views keep their whole storage and
    offset. Moved naively, both raised on the chip where they run on a real device."""
    base, _, variant = name.partition(".")
    op = [op for op in op_db if op.name == base and op.variant_test_name == variant][0]
    for result in (run_op(op), run_op(op, backward=True)):
        assert result.status == "native", (result.counts, result.first_problem)


# Where the CPU's own float32 rounding is amplified (matrix_exp's squarings at OpInfo's norms near
# 30, logcumsumexp's gradient at inputs of 1e4), the chip's result is judged against float64's.
@pytest.mark.parametrize("name,dtype,backward", [("matrix_exp", torch.float32, False), ("matrix_exp", torch.bfloat16, False),
                                                 ("matrix_exp", torch.float16, False), ("logcumsumexp", torch.float32, True)])
def test_amplified_rounding_matches_float64(name, dtype, backward):
    op = [op for op in op_db if op.name == name and not op.variant_test_name][0]
    result = run_op(op, dtype=dtype, backward=backward)
    assert result.status == "native", (result.counts, result.first_problem)


def test_float64_judges_only_where_the_cpu_misses_it():
    """The float64 yardstick passes a chip result only where it is within tolerance of float64 and
    the CPU's is not: a result as far off as the CPU's, or one the CPU matches float64 better than,
    stays a mismatch."""
    from opinfo_harness import _judged_by_float64

    op = [op for op in op_db if op.name == "matrix_exp" and not op.variant_test_name][0]
    sample = list(op.sample_inputs("cpu", torch.float32))[1]
    exact = torch.matrix_exp(sample.input.double()).float()
    off = exact * (1 + 1e-3)
    tol = (1e-4, 1e-4)
    assert _judged_by_float64(op, sample, exact, off, tol, backward=False)
    assert not _judged_by_float64(op, sample, off, off, tol, backward=False)
    assert not _judged_by_float64(op, sample, off, exact, tol, backward=False)


# int64 (the report's "int64" pass): the integers of indices, masks and counts, entirely on the chip
# and equal to the CPU; kthvalue's indices through the values they select where values tie.
INT64 = ["add", "mul", "sub", "abs", "argmax", "argmin", "kthvalue", "sort", "cumsum", "bitwise_and", "where", "cat",
         "gather", "index_select", "remainder", "floor_divide", "amax", "sum", "nonzero", "unique", "tril", "triu", "clamp",
         "searchsorted", "bincount", "repeat_interleave", "nn.functional.one_hot"]


@pytest.mark.parametrize("name", INT64)
def test_opinfo_int64_native(name):
    op = [op for op in op_db if op.name == name and not op.variant_test_name][0]
    result = run_op(op, dtype=torch.int64)
    assert result.status == "native", (result.counts, result.first_problem)


# int32 (the report's "int32" pass), which the chip computes in directly: its wrapping arithmetic,
# integer division, powers, shifts, matmuls and sums in the dtype asked for.
INT32 = ["mul", "floor_divide", "remainder", "fmod", "pow", "bitwise_left_shift", "bitwise_right_shift", "mm", "matmul",
         "tensordot", "fmax", "sum", "cumsum", "sort"]


@pytest.mark.parametrize("name", INT32)
def test_opinfo_int32_native(name):
    op = [op for op in op_db if op.name == name and not op.variant_test_name][0]
    result = run_op(op, dtype=torch.int32)
    assert result.status == "native", (result.counts, result.first_problem)
