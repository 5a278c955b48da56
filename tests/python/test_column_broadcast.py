"""A column ([..., 1]) broadcast across leading dims as well as along the last one, such as a
per-row weight [H, 1] against [N, C, H, W] images (linear interpolation's row weights), has no
layout kernels stream: the graph copies it first (kernels/graph/graph.cc, streamable). The copy
expands only its leading dims, one value per row, and the product streams it as a column; it
used to expand to every element, which cost 13x the product's HBM time."""
import json
import pathlib

import pytest
import torch

import vtpu

V5E = json.loads((pathlib.Path(__file__).resolve().parents[2] / "sim" / "presets" / "v5e.json").read_text())


@pytest.mark.parametrize("column_shape", [(45, 1), (1, 1, 45, 1), (1, 64, 45, 1)])
def test_a_column_broadcast_over_leading_dims_costs_one_value_per_row(column_shape):
    torch.manual_seed(0)
    v, col = torch.randn(8, 64, 45, 45), torch.randn(column_shape)
    vt, colt = v.to("tpu"), col.to("tpu")
    vtpu.synchronize()
    vtpu.reset_stats()
    got = (vt * colt).cpu()
    s = vtpu.stats()
    torch.testing.assert_close(got, v * col, rtol=0, atol=0)
    rows_bytes = 8 * 64 * 45 * 4
    # v read, the column read as one value per row, the product written, the copy written.
    assert s["hbm_read_bytes"] <= v.numel() * 4 + rows_bytes + col.numel() * 4 + 4096, s
    assert s["hbm_write_bytes"] <= v.numel() * 4 + rows_bytes + 4096, s
    sustained = V5E["hbm_bandwidth_bytes_per_s"]["value"] * V5E["hbm_efficiency"]["value"]
    floor = 2 * v.numel() * 4 / sustained  # the product's own reads and writes
    assert floor <= s["simulated_seconds"] < 2 * floor, (s["simulated_seconds"], floor)
