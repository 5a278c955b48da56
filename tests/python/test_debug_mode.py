"""Debug mode (vtpu.set_mode("debug"), VTPU_LAUNCH_BLOCKING=1): each op runs at once and is
checked; every finding names the op and the Python line: NaN/Inf appearing in an op's output (in
forward and in backward, where the line is the forward's), errors of lowered ops, and in user
kernels a DMA race and a read of VMEM never written."""
import copy
import inspect
import math

import pytest
import torch

import vtpu

RACY = """
.name racy_copy
.arg a buffer
.arg c buffer
  sarg s1, a
  sarg s2, c
  sli s10, 0
  sli s13, 1
  sli s14, 0
  sli s8, 4096
  dma.h2v dq0, sem0, s10, s1, s13, s8, s14, s14
  vld v1, m0, s10, 0, 512     ; reads the DMA's destination before sem.wait
  sem.wait sem0, 1
  vst v1, m0, s10, 0, 512
  dma.v2h dq1, sem1, s10, s2, s13, s8, s14, s14
  sem.wait sem1, 1
  halt
"""

READS_GARBAGE = """
.name reads_garbage
.arg c buffer
  sarg s2, c
  sli s10, 0
  sli s11, 8192
  sli s13, 1
  sli s14, 0
  sli s8, 4096
  vld v1, m0, s11, 0, 512     ; VMEM at 8192 was never written
  vst v1, m0, s10, 0, 512
  dma.v2h dq1, sem1, s10, s2, s13, s8, s14, s14
  sem.wait sem1, 1
  halt
"""


@pytest.fixture
def debug():
    vtpu.set_mode("debug")
    yield
    vtpu.set_mode("defer_and_fuse")


def _here(offset):
    """'this file:line' for the line `offset` lines below the caller's."""
    frame = inspect.currentframe().f_back
    return f"{__file__}:{frame.f_lineno + offset}"


def test_nan_appearing_names_the_op_and_line(debug):
    x = torch.tensor([1.0, 0.0, 4.0], device="tpu")
    where = _here(2)
    with pytest.raises(FloatingPointError) as caught:
        torch.log(x - 1.0)  # log(0) = -inf, log(-1) = nan
    assert str(caught.value) == (f"vtpu debug mode: aten::log made 1 NaN and 1 Inf values from finite inputs, "
                                 f"at {where} in test_nan_appearing_names_the_op_and_line")


def test_values_already_non_finite_are_not_findings(debug):
    x = torch.tensor([math.nan, 1.0], device="tpu")
    torch.testing.assert_close((x + 1).cpu(), torch.tensor([math.nan, 2.0]), equal_nan=True)
    mask = torch.full((3, 3), -math.inf, device="tpu").triu(1)  # an attention mask: -inf is asked for
    assert torch.isinf(mask.cpu()).sum() == 3
    empty = torch.empty(1000, device="tpu")  # uninitialised by definition: not checked
    assert empty.shape == (1000,)


def test_a_nan_made_in_backward_names_the_forward_line(debug):
    x = torch.zeros(3, device="tpu", requires_grad=True)
    forward = _here(1)
    y = x.sqrt().sum()
    with pytest.raises(FloatingPointError, match="in the backward pass, in SqrtBackward0, whose forward ran at "
                                                 + forward.replace(".", r"\.")):
        y.backward()  # d sqrt(x)/dx = 1 / (2 sqrt(0)) = inf


def test_an_ops_error_names_the_op_and_line(debug):
    x = torch.arange(4.0, device="tpu")
    where = _here(2)
    with pytest.raises(IndexError, match="index out of range") as caught:
        x[torch.tensor([5], device="tpu")]
    assert f"(vtpu: in aten::index.Tensor, called at {where} in" in str(caught.value)


def test_a_planted_race_names_the_kernel_instruction_and_line(debug):
    a, c = torch.randn(1024, device="tpu"), torch.empty(1024, device="tpu")
    where = _here(2)
    with pytest.raises(RuntimeError) as caught:
        vtpu.run_assembly(RACY, a, c)
    message = str(caught.value)
    assert "kernel racy_copy failed on the chip: core 0 instruction 7 `vld v1, m0, s10, 0, 512`" in message
    assert "races the DMA issued by instruction 6" in message
    assert f"called at {where} in test_a_planted_race" in message


def test_an_uninitialised_read_is_caught_in_debug_mode_only():
    c = torch.empty(1024, device="tpu")
    assert vtpu.run_assembly(READS_GARBAGE, c)["cycles"] > 0  # other modes: the chip reads whatever is there
    vtpu.set_mode("debug")
    try:
        where = _here(2)
        with pytest.raises(RuntimeError) as caught:
            vtpu.run_assembly(READS_GARBAGE, c)
    finally:
        vtpu.set_mode("defer_and_fuse")
    message = str(caught.value)
    assert "kernel reads_garbage failed on the chip: core 0 instruction 6" in message
    assert "read of uninitialised VMEM at address 8192" in message and f"called at {where}" in message


def test_each_op_runs_at_once_and_numerics_are_unchanged(debug):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 3))
    x, target = torch.randn(4, 8), torch.tensor([0, 2, 1, 2])
    grads = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        torch.nn.functional.cross_entropy(m(x.to(device)), target.to(device)).backward()
        grads[device] = [p.grad.cpu() for p in m.parameters()]
    torch.testing.assert_close(grads["tpu"], grads["cpu"])
    before = vtpu.stats()["flushes"]
    y = torch.ones(4, device="tpu") * 2
    y = y + 1
    assert vtpu.stats()["flushes"] == before + 3  # ones, mul, add: nothing waits for a sync point


def test_leaving_debug_mode_ends_the_checks():
    vtpu.set_mode("debug")
    assert vtpu.get_mode() == "debug" and torch.is_anomaly_enabled()
    vtpu.set_mode("strict_eager")
    try:
        assert torch.log(torch.zeros(1, device="tpu")).item() == -math.inf
        assert not torch.is_anomaly_enabled()
    finally:
        vtpu.set_mode("defer_and_fuse")


def test_launch_blocking_turns_debug_mode_on(run_isolated):
    done = run_isolated("""
import torch, vtpu
assert vtpu.get_mode() == "debug"
try:
    torch.log(torch.zeros(1, device="tpu"))
except FloatingPointError as e:
    print("caught", "aten::log" in str(e))
""", VTPU_LAUNCH_BLOCKING="1")
    assert done.returncode == 0 and done.stdout.strip() == "caught True", done.stderr[-800:]
    bad = run_isolated("import vtpu", VTPU_LAUNCH_BLOCKING="yes")
    assert bad.returncode != 0 and "VTPU_LAUNCH_BLOCKING" in bad.stderr and "expected 0 (off) or 1" in bad.stderr
