"""torch.nn.attention.flex_attention on tpu.

torch admits flex_attention inputs on CUDA, CPU, XPU, HPU and MPS only (`_validate_device`), and
refuses a backward on the CPU. Its eager implementation (a dense masked attention built from the
block mask's score and mask functions, and that attention's autograd) uses ordinary tensor ops,
which run on the chip: here tpu inputs pass the device check, so flex_attention (TorchTitan's
attention) runs forward and backward in lowered ops. A torch.compile'd flex_attention still goes
to Inductor, which has no code generator for tpu: run it eagerly (TORCHDYNAMO_DISABLE=1)."""
from __future__ import annotations

import torch.nn.attention.flex_attention as _flex

_validate_device_elsewhere = _flex._validate_device


def _validate_device(query, key, value):
    if query.device.type == "tpu":
        if key.device != query.device or value.device != query.device:
            raise ValueError(f"Expected query, key, and value to be on the same device, got {query.device}, "
                             f"{key.device} and {value.device}")
        return
    _validate_device_elsewhere(query, key, value)


_flex._validate_device = _validate_device
