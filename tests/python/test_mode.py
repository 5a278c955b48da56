"""torch.mode on the chip (vtpu/mode.py): values and indices as the CPU's kernel gives them
(among equally frequent values the smallest, the index of its last occurrence in slices of up to
16 elements, where the CPU's sort is an insertion sort), any occurrence on longer slices; and the
int64 gather it needs from a tensor whose one-element last dim has a stride other than 1."""
import random

import pytest
import torch

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_mode_matches_the_cpus_values_and_indices(dtype):
    rng = random.Random(0)
    torch.manual_seed(0)
    for _ in range(20):
        shape = [rng.randint(1, 5) for _ in range(rng.randint(1, 3))]
        shape[rng.randrange(len(shape))] = rng.randint(1, 16)
        x = torch.randint(0, 4, shape).to(dtype)
        dim, keepdim = rng.randrange(-len(shape), len(shape)), rng.random() < 0.5
        want, got = torch.mode(x, dim, keepdim), torch.mode(x.to("tpu"), dim, keepdim)
        assert torch.equal(got.values.cpu(), want.values) and torch.equal(got.indices.cpu(), want.indices), (shape, dim)


def test_mode_of_long_slices_gives_the_cpus_value_and_an_index_of_it():
    x = torch.randint(0, 3, (4, 100)).float()
    want, got = torch.mode(x, 1), torch.mode(x.to("tpu"), 1)
    assert torch.equal(got.values.cpu(), want.values)
    assert torch.equal(x.gather(1, got.indices.cpu()[:, None])[:, 0], want.values)


def test_mode_gradient_reaches_the_selected_element():
    x = torch.tensor([[3.0, 1.0, 3.0, 2.0], [5.0, 5.0, 4.0, 4.0]])
    grads = {}
    for device in ("cpu", "tpu"):
        xd = x.detach().clone().to(device).requires_grad_()
        torch.mode(xd, 1).values.sum().backward()
        grads[device] = xd.grad.cpu()
    torch.testing.assert_close(grads["tpu"], grads["cpu"])


def test_int64_gather_from_a_one_column_tensor_with_a_wide_stride():
    # sort along dim 0 of a [6, 1] tensor gives indices with strides (1, 6): contiguous for torch,
    # but an int32 view of it was refused.
    values, order = torch.sort(torch.tensor([[3.0], [1.0], [2.0], [0.0], [5.0], [4.0]]).to("tpu"), dim=0, stable=True)
    assert order.stride(-1) != 1
    picked = order.gather(0, torch.tensor([[0], [5]], device="tpu"))
    assert picked.cpu().tolist() == [[3], [4]]
