"""The interconnect's closed forms (vtpu.distributed.interconnect) against the textbook costs in
../shared/REFERENCES.md, written out here by hand: ring all-gather or reduce-scatter
(N-1)a + (N-1)/N * S/B, all-reduce twice that, a bidirectional ring with wraparound moving half
the data each way, torus collectives axis by axis."""

import pytest
import vtpu
from vtpu.distributed import interconnect

ALPHA = 1e-6


def chip(name):
    return next(c for c in vtpu._C.chip_presets() if c["name"] == name)


def test_a_line_of_chips_is_a_one_way_ring():
    v4 = chip("v4")
    model = interconnect.for_group(v4, 4, 4, topology="4")  # v4 wraps only on whole 4x4x4 cubes
    assert model.wraps == (False,)
    b, s = 45e9, 64 << 20
    assert model.all_gather(s) == pytest.approx(3 * ALPHA + 3 / 4 * s / b)
    assert model.reduce_scatter(s) == pytest.approx(3 * ALPHA + 3 / 4 * s / b)
    assert model.all_reduce(s) == pytest.approx(2 * (3 * ALPHA + 3 / 4 * s / b))
    assert model.broadcast(s) == pytest.approx(3 * ALPHA + s / b)


def test_an_axis_with_wraparound_is_a_bidirectional_ring():
    v5e = chip("v5e")
    model = interconnect.for_group(v5e, 16, 16, topology="16")  # a full pod side wraps
    assert model.wraps == (True,)
    b, s = 50e9, 64 << 20
    assert model.all_gather(s) == pytest.approx(8 * ALPHA + 15 / 16 * s / (2 * b))
    # roughly half the time of the same axis without wraparound
    line = interconnect.Interconnect("v5e", (16,), (False,), b)
    assert model.all_gather(s) / line.all_gather(s) == pytest.approx(0.5, abs=0.02)


def test_torus_collectives_go_axis_by_axis():
    v5e = chip("v5e")
    model = interconnect.for_group(v5e, 8, 8, topology="2x4")
    b, s = 50e9, 32 << 20
    # reduce-scatter: the axis of 2 on all of S, then the axis of 4 on the half left
    rs = (ALPHA + 1 / 2 * s / b) + (3 * ALPHA + 3 / 4 * (s / 2) / b)
    assert model.reduce_scatter(s) == pytest.approx(rs)
    # all-gather in reverse grows the data back: the same time
    assert model.all_gather(s) == pytest.approx(rs)
    assert model.all_reduce(s) == pytest.approx(2 * rs)


def test_point_to_point_costs_the_torus_distance():
    v5p = chip("v5p")
    cube = interconnect.for_group(v5p, 64, 64, topology="4x4x4")
    assert cube.wraps == (True, True, True)
    assert cube.coordinates(63) == (3, 3, 3)
    # from (0,0,0) to (3,3,3): one hop per axis the short way round
    assert cube.point_to_point(0, 63, 1 << 20) == pytest.approx(3 * ALPHA + (1 << 20) / 100e9)
    small = interconnect.for_group(v5p, 8, 8, topology="2x2x2")
    assert small.wraps == (False, False, False)
    assert small.point_to_point(0, 7, 0) == pytest.approx(3 * ALPHA)
    assert small.point_to_point(5, 5, 1 << 20) == 0.0


def test_topologies_are_checked():
    assert interconnect.parse_topology("2x4") == (2, 4)
    for bad in ("", "2x", "0x4", "2x2x2x2", "four"):
        with pytest.raises(ValueError, match="is not a slice"):
            interconnect.parse_topology(bad)
    with pytest.raises(ValueError, match="has 8 chips, but the process group has 4 ranks"):
        interconnect.for_group(chip("v5e"), 4, 4, topology="2x4")
    # a subgroup is a line of its ranks, whatever the slice
    assert interconnect.for_group(chip("v5e"), 8, 2, topology="2x4").axes == (2,)
