"""Bad shapes get the exception the CPU gives, with torch's own message, in both eager modes, even
for ops whose kernels decline such inputs (torch's checks run on meta tensors before vtpu says an
op "cannot run on the chip"); dtypes the chip does not hold are named (docs/faults.md)."""
import pytest
import torch
import torch.nn.functional as F

import vtpu

# Each builds its operands on `device` and runs one op with inputs torch rejects.
BAD_SHAPES = {
    "mm inner dims": lambda d: torch.ones(3, 4, device=d) @ torch.ones(5, 6, device=d),
    "bmm batch": lambda d: torch.bmm(torch.ones(2, 3, 4, device=d), torch.ones(3, 4, 5, device=d)),
    "cat ranks": lambda d: torch.cat([torch.ones(3, device=d), torch.ones(3, 2, device=d)]),
    "cat sizes": lambda d: torch.cat([torch.ones(3, 4, device=d), torch.ones(3, 5, device=d)]),
    "broadcast": lambda d: torch.ones(3, device=d) + torch.ones(4, device=d),
    "conv channels": lambda d: F.conv2d(torch.ones(1, 3, 8, 8, device=d), torch.ones(4, 2, 3, 3, device=d)),
    "linear features": lambda d: F.linear(torch.ones(2, 5, device=d), torch.ones(3, 4, device=d)),
    "view": lambda d: torch.ones(6, device=d).view(4),
    "dim out of range": lambda d: torch.ones(2, 3, device=d).sum(5),
    "index out of bounds": lambda d: torch.ones(4, device=d)[10],
    "layer_norm shape": lambda d: F.layer_norm(torch.ones(2, 5, device=d), (4,)),
    "gather rank": lambda d: torch.gather(torch.ones(3, 4, device=d), 1, torch.zeros(3, dtype=torch.long, device=d)),
}


def run(build, device):
    result = build(device)
    return result.cpu() if isinstance(result, torch.Tensor) and device != "meta" else result


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("case", sorted(BAD_SHAPES))
def test_bad_shapes_raise_the_cpus_error(no_fallback, mode, case):
    vtpu.set_mode(mode)
    with pytest.raises(Exception) as on_cpu:
        run(BAD_SHAPES[case], "cpu")
    with pytest.raises(type(on_cpu.value)) as on_tpu:
        run(BAD_SHAPES[case], "tpu")
    # torch's own message: the CPU kernel's, or its meta kernel's where vtpu asked that one (they
    # word some checks differently: cat's ranks)
    torch_messages = {str(on_cpu.value).splitlines()[0]}
    try:
        run(BAD_SHAPES[case], "meta")
    except Exception as on_meta:  # noqa: BLE001
        torch_messages.add(str(on_meta).splitlines()[0])
    assert str(on_tpu.value).splitlines()[0] in torch_messages
    assert vtpu.stats()["cpu_fallback_ops"] == 0


def test_an_op_with_no_lowering_gets_torchs_error_for_bad_input_and_is_named_otherwise(no_fallback):
    # linalg.eig has no kernels on the chip: the boxed fallback asks torch's meta kernel first
    with pytest.raises(RuntimeError, match="linalg.eig: A must be batches of square matrices, but they are 3 by 4"):
        torch.linalg.eig(torch.ones(3, 4, device="tpu"))
    with pytest.raises(NotImplementedError, match="linalg_eig is not lowered to the chip yet"):
        torch.linalg.eig(torch.eye(3, device="tpu"))
    # and a Python composition (eigh) gets torch's checks too
    with pytest.raises(RuntimeError, match="linalg.eigh: A must be batches of square matrices, but they are 3 by 4"):
        torch.linalg.eigh(torch.ones(3, 4, device="tpu"))


@pytest.mark.parametrize("dtype,name", [(torch.float64, "Double"), (torch.int16, "Short"), (torch.uint16, "UInt16")])
def test_dtypes_the_chip_does_not_hold_are_named(no_fallback, dtype, name):
    x = torch.ones(3, dtype=dtype).to("tpu")  # storage works for any dtype; ops name it
    with pytest.raises(NotImplementedError, match=f"aten::add cannot run on the chip: {name} tensors"):
        (x + 1).cpu()
    assert torch.equal(x.cpu(), torch.ones(3, dtype=dtype))
