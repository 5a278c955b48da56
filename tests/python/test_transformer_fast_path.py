"""nn.TransformerEncoder and nn.TransformerEncoderLayer in eval mode (torch's inference fast
paths) on tpu: the nested-tensor path is declined, the per-layer fused op runs as lowered ops,
and the outputs match the CPU at every position that is not padding."""
import copy

import pytest
import torch

import vtpu


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_eval_matches_the_cpu_with_padding_and_causal_masks(norm_first, activation):
    vtpu.set_cpu_fallback(False)  # every op below runs on the chip, or the test fails
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=norm_first, activation=activation)
    encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=not norm_first).eval()
    chip = copy.deepcopy(encoder).to("tpu")
    x = torch.randn(2, 5, 16)
    padding = torch.tensor([[False] * 5, [False, False, False, True, True]])
    causal = torch.nn.Transformer.generate_square_subsequent_mask(5)
    with torch.no_grad():
        want = encoder(x, src_key_padding_mask=padding)
        got = chip(x.to("tpu"), src_key_padding_mask=padding.to("tpu")).cpu()
        torch.testing.assert_close(got[~padding], want[~padding], atol=2e-6, rtol=1e-5)
        assert torch.isfinite(got).all()
        torch.testing.assert_close(chip(x.to("tpu"), mask=causal.to("tpu")).cpu(), encoder(x, mask=causal),
                                   atol=2e-6, rtol=1e-5)
        torch.testing.assert_close(chip.layers[0](x.to("tpu")).cpu(), encoder.layers[0](x), atol=2e-6, rtol=1e-5)
