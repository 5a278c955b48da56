"""Diffusers on device "tpu": one denoising step of a tiny UNet (built from a config, random
weights) with a DDIM scheduler, eager (defer_and_fuse) and compiled, against the CPU, and a
pipeline split over two chips; all with the CPU fallback off (the default)."""
import json

import pytest
import torch

import vtpu

diffusers = pytest.importorskip("diffusers")


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
    assert stats["cpu_fallbacks"] == {}


def test_a_pipeline_split_over_two_chips_by_device_map_balanced_matches_cpu(run_isolated, tmp_path):
    """Diffusers' multi-accelerator split: a latent diffusion pipeline saved with random weights and
    loaded with device_map="balanced" and max_memory=vtpu.max_memory() puts the UNet on tpu:0 and
    the VQ-VAE on tpu:1 (VTPU_CHIPS=2); two DDIM steps and the decode match the CPU, no op on the
    CPU, the latents crossing between the chips."""
    done = run_isolated(f"""
        import json, torch, diffusers, vtpu
        torch.manual_seed(0)
        unet = diffusers.UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                                     block_out_channels=(32, 64), down_block_types=("DownBlock2D", "DownBlock2D"),
                                     up_block_types=("UpBlock2D", "UpBlock2D"), norm_num_groups=8)
        vqvae = diffusers.VQModel(in_channels=3, out_channels=3, latent_channels=3, block_out_channels=(32,),
                                  layers_per_block=1, norm_num_groups=8, num_vq_embeddings=64)
        pipe = diffusers.LDMPipeline(vqvae=vqvae, unet=unet, scheduler=diffusers.DDIMScheduler(num_train_timesteps=1000))
        pipe.set_progress_bar_config(disable=True)
        pipe.save_pretrained({str(tmp_path)!r})
        expected = pipe(batch_size=1, num_inference_steps=2, generator=torch.Generator().manual_seed(0), output_type="np").images
        split = diffusers.LDMPipeline.from_pretrained({str(tmp_path)!r}, device_map="balanced", max_memory=vtpu.max_memory())
        split.set_progress_bar_config(disable=True)
        vtpu.reset_stats()
        got = split(batch_size=1, num_inference_steps=2, generator=torch.Generator().manual_seed(0), output_type="np").images
        s = vtpu.stats()
        print(json.dumps({{"unet": str(split.unet.device), "vqvae": str(split.vqvae.device),
                          "error": float(abs(got - expected).max()), "moved": s["chip_to_chip_bytes"],
                          "fallbacks": s["cpu_fallbacks"]}}))
    """, VTPU_CHIPS=2, VTPU_CPU_FALLBACK=0)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert (result["unet"], result["vqvae"]) == ("tpu:0", "tpu:1")
    assert result["error"] < 1e-5
    assert result["moved"] >= 3 * 16 * 16 * 4  # the latents, tpu:0 to tpu:1
    assert result["fallbacks"] == {}
