"""Mixed precision on tpu: torch.autocast("tpu") is registered by the extension (aten/autocast.cc,
CUDA's policy, bf16 by default); this module makes torch.amp.GradScaler("tpu") run on the chip.

GradScaler.unscale_ takes the scale's reciprocal in float64 ("FP32 division can be imprecise for
certain compile options"), except on MPS, which has no float64 and takes it in float32. The virtual
chip has no float64 either, so tpu takes MPS's branch: for GradScaler's power-of-two scales (its
defaults: 65536, growth 2, backoff 0.5) the f32 reciprocal is exact and equal to the f64 one."""
from __future__ import annotations

import torch
from torch.amp.grad_scaler import GradScaler, OptState

_unscale = GradScaler.unscale_


def _unscale_on_chips_without_f64(self, optimizer) -> None:
    if not self._enabled or self._scale is None or self._scale.device.type != "tpu":
        return _unscale(self, optimizer)
    self._check_scale_growth_tracker("unscale_")
    optimizer_state = self._per_optimizer_states[id(optimizer)]
    if optimizer_state["stage"] is OptState.UNSCALED:
        raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
    if optimizer_state["stage"] is OptState.STEPPED:
        raise RuntimeError("unscale_() is being called after step().")
    inv_scale = self._scale.reciprocal()
    found_inf = torch.full((), 0.0, dtype=torch.float32, device=self._scale.device)
    optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
    optimizer_state["stage"] = OptState.UNSCALED


GradScaler.unscale_ = _unscale_on_chips_without_f64
