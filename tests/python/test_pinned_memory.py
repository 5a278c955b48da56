"""Pinned host memory for device "tpu" (torch_bridge/csrc/runtime/pinned_host_allocator.*): CUDA's
contract kept, though pinning changes no simulated time: pin_memory() gives a tensor is_pinned()
reports (slices too), plain CPU tensors are not pinned, DataLoader(pin_memory=True) hands out
pinned batches, and pinned tensors copy to the chip and back unchanged."""
import torch

import vtpu


def test_pin_memory_is_reported_and_keeps_values():
    t = torch.randn(4, 6)
    assert not t.is_pinned()
    p = t.pin_memory()
    assert p.device.type == "cpu" and p.is_pinned()
    assert torch.equal(p, t)
    assert p[1:, 2:].is_pinned()  # a view into pinned storage
    assert torch.empty(3, pin_memory=True).is_pinned()
    assert not p.clone().is_pinned()  # a copy lands in ordinary memory


def test_dataloader_pins_batches_and_they_copy_to_the_chip(no_fallback):
    data = torch.randn(8, 3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data), batch_size=4, pin_memory=True)
    batches = [b for (b,) in loader]
    assert all(b.is_pinned() for b in batches)
    on_chip = [b.to("tpu", non_blocking=True) for b in batches]
    vtpu.synchronize()
    assert torch.equal(torch.cat([b.cpu() for b in on_chip]), data)
