"""A comparison with a Python number converts the number to the operands' common dtype first, as
torch's CPU does: a bf16 tensor holding bf16(0.1) equals 0.1, and an int8 tensor compared with
254 is compared with int8(254) = -2. Before, the chip compared with the number itself."""
import operator

import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def chip(no_fallback):
    yield


CASES = [
    (torch.tensor([0.1, 0.2, 1 / 3, -0.7]), torch.bfloat16, [0.1, 1 / 3, -0.7, 0.2]),
    (torch.tensor([0.1, 1 / 3, 65519.0, 1e-5]), torch.float16, [0.1, 1 / 3, 65519.0, 1e-5]),
    (torch.tensor([-2, 5, 100, -128]), torch.int8, [254, 5, 300, 128]),
    (torch.tensor([-2, 5, 7, 0]), torch.uint8, [254, 261, -249, 1.5]),
    (torch.tensor([5, -3, 0, 9]), torch.int32, [2**32 + 5, -3, 2**31, 1.5]),
]


@pytest.mark.parametrize("values,dtype,numbers", CASES, ids=[str(c[1]) for c in CASES])
@pytest.mark.parametrize("compare", [operator.eq, operator.ne, operator.lt, operator.le, operator.gt, operator.ge])
def test_numbers_are_converted_to_the_tensor_dtype(values, dtype, numbers, compare):
    x = values.to(dtype)
    on_chip = x.to("tpu")
    for number in numbers:
        assert torch.equal(compare(on_chip, number).cpu(), compare(x, number)), number
        assert torch.equal(compare(number, on_chip).cpu(), compare(number, x)), number  # the number first
    assert vtpu.stats()["cpu_fallback_ops"] == 0
