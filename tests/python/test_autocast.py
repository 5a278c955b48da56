"""Mixed precision on tpu as on CUDA: torch.autocast("tpu") with CUDA's policy (bf16 or fp16
matmuls, f32 reductions, softmax and losses), bf16 and fp16 training loops following the CPU's
autocast loops, GradScaler's unscale/skip/backoff/growth on the chip (fp16 gradients overflowing
as they do on CUDA), and Accelerate's and Trainer's bf16 and fp16 switches."""
import copy

import pytest
import torch
import torch.nn.functional as F

import vtpu


@pytest.fixture(autouse=True)
def native_only():
    vtpu.set_cpu_fallback(False)
    vtpu.reset_stats()
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


LOW = [torch.bfloat16, torch.float16]


@pytest.mark.parametrize("low", LOW, ids=str)
def test_policy_casts_like_cuda(low):
    a, b = torch.randn(4, 8, device="tpu"), torch.randn(8, 3, device="tpu")
    with torch.autocast("tpu", dtype=low):
        product = a @ b
        assert product.dtype == low  # lower_precision_fp
        assert F.linear(a, b.t()).dtype == low
        assert torch.softmax(product, -1).dtype == torch.float32  # fp32_set_opt_dtype
        assert torch.exp(product).dtype == torch.float32  # fp32
        assert F.layer_norm(product, (3,)).dtype == torch.float32
        assert F.cross_entropy(product, torch.tensor([0, 1, 2, 0], device="tpu")).dtype == torch.float32
        assert (product + 1).dtype == low  # unlisted ops keep their input's dtype
    assert (a @ b).dtype == torch.float32  # outside the region


def test_binary_cross_entropy_is_refused_under_autocast_as_on_cuda():
    p = torch.rand(4, device="tpu")
    with torch.autocast("tpu", dtype=torch.bfloat16), pytest.raises(RuntimeError, match="unsafe to autocast"):
        F.binary_cross_entropy(p, torch.ones(4, device="tpu"))


@pytest.mark.parametrize("low", LOW, ids=str)
def test_training_loop_follows_the_cpus_autocast(low):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32), torch.nn.Linear(32, 4))
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,))
    losses = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        losses[device] = []
        for _ in range(4):
            with torch.autocast(device, dtype=low):
                loss = F.cross_entropy(m(x.to(device)), y.to(device))
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses[device].append(loss.item())
    tolerance = 2e-2 if low == torch.bfloat16 else 2e-3
    torch.testing.assert_close(torch.tensor(losses["tpu"]), torch.tensor(losses["cpu"]), atol=tolerance, rtol=tolerance)


def scaled_steps(model, loss_of, steps, **scaler_options):
    """{device: (the scale after each step, the parameters after the last)} of `steps` SGD steps
    through torch.amp.GradScaler on copies of `model` on the CPU and on tpu; loss_of(m, step,
    device) gives each step's loss."""
    results = {}
    for device in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(device)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        scaler = torch.amp.GradScaler(device, **scaler_options)
        scales = []
        for step in range(steps):
            loss = loss_of(m, step, device)
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            scales.append(scaler.get_scale())
        results[device] = (scales, [p.detach().cpu() for p in m.parameters()])
    return results


def test_grad_scaler_skips_backs_off_and_grows_like_the_cpus():
    torch.manual_seed(1)

    def loss_of(m, step, device):
        loss = m(torch.randn(3, 4, generator=torch.Generator().manual_seed(step)).to(device)).square().mean()
        return loss * float("inf") if step == 2 else loss  # step 2 must be skipped and the scale backed off

    results = scaled_steps(torch.nn.Linear(4, 2), loss_of, 5, growth_interval=2)
    assert results["tpu"][0] == results["cpu"][0] == [65536.0, 131072.0, 65536.0, 65536.0, 131072.0]
    torch.testing.assert_close(results["tpu"][1], results["cpu"][1])


@pytest.mark.parametrize("low", LOW, ids=str)
def test_at_a_huge_scale_fp16_overflows_and_bf16_does_not_as_on_the_cpu(low):
    """At a scale of 2^40 the f16 backward overflows (f16 tops out at 65504) and every step is
    skipped, halving the scale; bf16 has f32's range, so nothing overflows and the scale grows."""
    torch.manual_seed(0)

    def loss_of(m, step, device):
        g = torch.Generator().manual_seed(step)
        x, y = torch.randn(8, 16, generator=g).to(device), torch.randn(8, 4, generator=g).to(device)
        with torch.autocast(device, dtype=low):
            out = m(x)
            assert out.dtype == low
            return F.mse_loss(out.float(), y)

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    results = scaled_steps(model, loss_of, 4, init_scale=2.0**40, growth_interval=1)
    want = [2.0**39, 2.0**38, 2.0**37, 2.0**36] if low == torch.float16 else [2.0**41, 2.0**42, 2.0**43, 2.0**44]
    assert results["tpu"][0] == results["cpu"][0] == want
    torch.testing.assert_close(results["tpu"][1], results["cpu"][1], atol=1e-3, rtol=1e-3)


def test_accelerate_refuses_fp16_on_tpu_by_the_device_name():
    """Accelerate turns fp16 down for any device named "tpu" (its reason: TorchTPU lacks
    _amp_foreach_non_finite_check_and_unscale_, which vtpu has: the scaler tests above run it on
    the chip). Its own check, before any tensor exists; bf16 is unaffected."""
    accelerate = pytest.importorskip("accelerate")
    state = accelerate.state.AcceleratorState
    state._reset_state(True)
    try:
        with pytest.raises(ValueError, match="fp16 mixed precision is not supported on 'tpu'"):
            accelerate.Accelerator(mixed_precision="fp16")
    finally:
        state._reset_state(True)


def test_accelerate_bf16_autocasts_the_prepared_model():
    accelerate = pytest.importorskip("accelerate")
    state = accelerate.state.AcceleratorState
    state._reset_state(True)
    try:
        acc = accelerate.Accelerator(mixed_precision="bf16")
        assert acc.device.type == "tpu"
        seen = []

        class Probe(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = torch.nn.Linear(4, 2)

            def forward(self, x):
                h = self.linear(x)
                seen.append(h.dtype)
                return h

        model, opt = acc.prepare(Probe(), torch.optim.SGD(Probe().parameters(), lr=0.1))
        out = model(torch.randn(3, 4).to(acc.device))
        acc.backward(out.float().square().mean())
        assert seen == [torch.bfloat16] and out.dtype == torch.float32  # Accelerate hands outputs back in f32
    finally:
        state._reset_state(True)


def test_trainer_bf16_trains_on_the_chip(tmp_path):
    transformers = pytest.importorskip("transformers")
    seen = []

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 2)

        def forward(self, x, labels=None):
            h = self.linear(x)
            seen.append(h.dtype)
            return {"loss": F.cross_entropy(h, labels), "logits": h}

    class Data(torch.utils.data.Dataset):
        def __len__(self):
            return 16

        def __getitem__(self, i):
            return {"x": torch.randn(8, generator=torch.Generator().manual_seed(i)), "labels": torch.tensor(i % 2)}

    model = Model()
    args = transformers.TrainingArguments(output_dir=str(tmp_path), bf16=True, per_device_train_batch_size=4,
                                          num_train_epochs=1, report_to=[], save_strategy="no",
                                          dataloader_pin_memory=False, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=Data())
    assert trainer.args.device.type == "tpu"
    trainer.train()
    assert set(seen) == {torch.bfloat16} and next(model.parameters()).device.type == "tpu"
