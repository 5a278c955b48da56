"""The PyTorch toolchain works: the Meson-built extension imports into torch 2.13.0 and calls back."""
import torch

import _vtpu_probe


def test_extension_was_built_against_the_running_torch():
    assert torch.__version__.startswith("2.13.0")
    assert torch.__version__.startswith(_vtpu_probe.compiled_torch_version())


def test_extension_passes_tensors_and_reaches_the_simulator_library():
    t = torch.arange(4, dtype=torch.float32)
    assert torch.equal(_vtpu_probe.add_one(t), t + 1)
    # v5e: 4 MXUs x 2 x 128^2 x 1.5 GHz
    assert abs(_vtpu_probe.preset_peak_flops("v5e") - 4 * 2 * 128 * 128 * 1.5e9) < 1
