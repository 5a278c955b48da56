"""Fractional max pooling on the chip (vtpu/fractional_max_pool.py): outputs, indices and input
gradients against the CPU's kernels for 2-D and 3-D, batched and not, with NaN and infinities
(the index names the first maximum or the last NaN), and window starts in f32 as the CPU's
(a sample where double arithmetic starts a window one element later)."""
import random

import pytest
import torch
import torch.nn.functional as F

pytestmark = pytest.mark.usefixtures("native_in_each_eager_mode")


def _on_both(dims, x, kernel_size, output_size, samples, grad):
    pool = F.fractional_max_pool2d if dims == 2 else F.fractional_max_pool3d
    results = {}
    for device in ("cpu", "tpu"):
        xd = x.detach().clone().to(device).requires_grad_()
        out, indices = pool(xd, kernel_size, output_size=output_size, return_indices=True, _random_samples=samples.to(device))
        out.backward(grad.to(device))
        results[device] = (out.detach().cpu(), indices.cpu(), xd.grad.cpu())
    return results


@pytest.mark.parametrize("dims", [2, 3])
def test_fractional_max_pool_matches_the_cpus_kernel(dims):
    rng = random.Random(dims)
    torch.manual_seed(dims)
    tested = 0
    while tested < 6:
        spatial = [rng.randint(4, 11) for _ in range(dims)]
        kernel = [rng.randint(1, 3) for _ in spatial]
        output = [rng.randint(1, s - k) for s, k in zip(spatial, kernel)]
        batch = [2] if tested % 2 == 0 else []
        x = torch.randn(*batch, 3, *spatial)
        flat = x.view(-1)
        flat[rng.randrange(flat.numel())], flat[rng.randrange(flat.numel())] = float("nan"), float("inf")
        samples = torch.rand(batch[0] if batch else 1, 3, dims)
        results = _on_both(dims, x, kernel, output, samples, torch.randn(*batch, 3, *output))
        torch.testing.assert_close(results["tpu"], results["cpu"], atol=1e-6, rtol=1e-6, equal_nan=True)
        tested += 1


def test_window_starts_are_computed_in_f32():
    # W = 57, pool 1, 51 outputs, u = 0.46428484: int((i + u) * alpha) lands on another integer for
    # some i in double arithmetic than in the CPU's f32.
    x = torch.randn(1, 1, 2, 57)
    samples = torch.tensor([[[0.46428484, 0.5]]])
    results = _on_both(2, x, [1, 1], [1, 51], samples, torch.randn(1, 1, 1, 51))
    torch.testing.assert_close(results["tpu"], results["cpu"], atol=0, rtol=0)
