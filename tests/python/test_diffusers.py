"""Diffusers on device "tpu": one denoising step of a tiny UNet (built from a config, random
weights) with a DDIM scheduler, eager (defer_and_fuse) and compiled, against the CPU. The
convolutions run on the chip; int64 timestep bookkeeping and upsampling go through the CPU
fallback."""
import pytest
import torch

import vtpu

diffusers = pytest.importorskip("diffusers")
pytestmark = pytest.mark.usefixtures("cpu_fallback")


def test_unet_denoising_step_eager_and_compiled_match_cpu():
    torch.manual_seed(0)
    unet = diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                                 block_out_channels=(32, 64), down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                                 up_block_types=("AttnUpBlock2D", "UpBlock2D"), norm_num_groups=8).eval()
    scheduler = diffusers.DDIMScheduler(num_train_timesteps=50)  # deterministic: no noise drawn per step
    scheduler.set_timesteps(10)
    sample, t = torch.randn(1, 3, 16, 16), scheduler.timesteps[2]
    with torch.no_grad():
        expected_noise = unet(sample, t).sample
        expected = scheduler.step(expected_noise, t, sample).prev_sample
        on_chip = unet.to("tpu")
        torch._dynamo.reset()
        vtpu.reset_stats()
        for runner in (on_chip, torch.compile(on_chip, backend="tpu")):
            noise = runner(sample.to("tpu"), t).sample
            torch.testing.assert_close(noise.cpu(), expected_noise, atol=1e-5, rtol=1e-5)
            step = scheduler.step(noise, t, sample.to("tpu")).prev_sample
            assert step.device.type == "tpu"
            torch.testing.assert_close(step.cpu(), expected, atol=1e-5, rtol=1e-5)
    stats = vtpu.stats()
    assert stats["compiled_graphs"] >= 1 and stats["kernels_launched"] > 0
    assert not any("convolution" in op for op in stats["cpu_fallbacks"]), stats["cpu_fallbacks"]
