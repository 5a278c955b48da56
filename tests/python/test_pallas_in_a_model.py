"""A user kernel inside a Hugging Face model: Llama's RMSNorm replaced by a vtpu.pallas kernel,
the model's forward in strict_eager, defer_and_fuse and torch.compile(backend="tpu") against the
CPU's with the stock RMSNorm."""
import pytest
import torch

import vtpu
from vtpu import pallas as pl

transformers = pytest.importorskip("transformers")
from transformers.models.llama import modeling_llama  # noqa: E402

BLOCK_ROWS = 8


def rms_norm_kernel(eps):
    def rms_norm(x_ref, w_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = x * pl.rsqrt(pl.mean(x * x) + eps) * w_ref[...]
    return rms_norm


def rms_norm_call(rows: int, hidden: int, eps: float):
    return pl.pallas_call(rms_norm_kernel(eps), out_shape=pl.ShapeDtype((rows, hidden)), grid=(rows // BLOCK_ROWS,),
                          in_specs=[pl.BlockSpec((BLOCK_ROWS, hidden), lambda i: (i, 0)),
                                    pl.BlockSpec((1, hidden), lambda i: (0, 0))],
                          out_specs=pl.BlockSpec((BLOCK_ROWS, hidden), lambda i: (i, 0)), name="rms_norm")


def install_kernels(model, rows: int) -> None:
    """Gives each RMSNorm its kernel for activations of `rows` rows (a pallas_call is made for
    fixed shapes, as in JAX; made before torch.compile traces the model)."""
    for module in model.modules():
        if isinstance(module, modeling_llama.LlamaRMSNorm):
            module.pallas_rms_norm = rms_norm_call(rows, module.weight.shape[0], float(module.variance_epsilon))


def kernel_forward(self, hidden_states):
    rows = hidden_states.numel() // hidden_states.shape[-1]
    out = self.pallas_rms_norm(hidden_states.reshape(rows, -1), self.weight.view(1, -1))
    return out.view(hidden_states.shape)


def tiny_llama():
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=256,
                                      max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(config).eval()
    for name, p in model.named_parameters():  # norms away from 1, so the kernel's weight matters
        if "norm" in name:
            p.data.uniform_(0.5, 1.5)
    return model


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse", "compiled"])
def test_llama_with_a_pallas_rms_norm_matches_cpu(mode, monkeypatch):
    model = tiny_llama()
    ids = torch.randint(0, 256, (2, 8))
    with torch.no_grad():
        expected = model(ids).logits
    monkeypatch.setattr(modeling_llama.LlamaRMSNorm, "forward", kernel_forward)
    model = model.to("tpu")
    install_kernels(model, ids.numel())
    vtpu.set_mode("strict_eager" if mode == "strict_eager" else "defer_and_fuse")
    try:
        run = torch.compile(model, backend="tpu") if mode == "compiled" else model
        vtpu.synchronize()
        vtpu.reset_stats()
        with torch.no_grad():
            got = run(ids.to("tpu")).logits.cpu()
        stats = vtpu.stats()
    finally:
        vtpu.set_mode("defer_and_fuse")
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    # Five norms (two per layer and the final one), each one launch of the user's kernel.
    assert stats["per_kernel"]["rms_norm"]["launches"] == 5
    assert stats["cpu_fallbacks"] == {}
