"""torch.cat of more tensors than one concat kernel takes (a launch has at most 256 arguments, two
per input): the graph concatenates groups of inputs first (kernels/graph/graph_data.cc). It
failed at the flush, losing every pending result."""
import pytest
import torch

import vtpu


@pytest.fixture(autouse=True)
def stays_on_the_chip(no_fallback):
    yield
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.mark.parametrize("mode", ["strict_eager", "defer_and_fuse"])
@pytest.mark.parametrize("count", [120, 121, 150, 1000])
def test_cat_of_many_tensors_matches_the_cpu(mode, count):
    vtpu.set_mode(mode)
    g = torch.Generator().manual_seed(count)
    parts = [torch.randn(4, 1 + i % 3, generator=g) for i in range(count)]  # uneven widths
    got = torch.cat([p.to("tpu") for p in parts], dim=1)
    assert torch.equal(got.cpu(), torch.cat(parts, dim=1))
    rows = torch.cat([p.to("tpu")[:, :1].t() for p in parts], dim=0)
    assert torch.equal(rows.cpu(), torch.cat([p[:, :1].t() for p in parts], dim=0))
