"""The interconnect as PyTorch users meet it: the slice a process group is timed on
(vtpu.distributed.interconnect: collective kernels run on a simulated slice, beside the closed
forms of sim/interconnect.h that tests/sim/test_interconnect.cc checks), and copies between the
chips of one process (VTPU_CHIPS=N), which move both chips' clocks by the time of a send kernel
run on the process's slice."""

import json

import pytest
import vtpu
from vtpu.distributed import interconnect


def test_a_group_is_timed_on_the_slice_or_on_a_line_of_its_ranks():
    whole = interconnect.for_group(8, 8, topology="2x4", chip="v5e")
    assert whole.axes == [2, 4] and whole.wraps == [False, False]
    closed = whole.closed_form
    assert closed.all_reduce(1 << 20) == pytest.approx(2 * closed.reduce_scatter(1 << 20))
    # a mesh dimension of 2 of those 8 ranks: a line of 2, whatever the slice
    sub = interconnect.for_group(8, 2, topology="2x4", chip="v5e")
    assert sub.axes == [2]
    pod_side = interconnect.for_group(16, 16, topology="16", chip="v6e")
    assert pod_side.wraps == [True]


def test_collectives_are_timed_by_running_their_kernels_on_a_simulated_slice():
    whole = interconnect.for_group(8, 8, topology="2x4", chip="v5e")
    big = 16 << 20  # bandwidth-bound: the kernels keep the links busy, as the closed forms assume
    for kind in ("all_gather", "reduce_scatter", "all_reduce"):
        assert getattr(whole, kind)(big) == pytest.approx(getattr(whole.closed_form, kind)(big), rel=0.05), kind
    # all-to-all sends each chunk straight along its route: less traffic than the closed form's
    # exchange axis by axis on a 2-D slice
    assert whole.all_to_all(big) < whole.closed_form.all_to_all(big)
    # latency-bound: a reduction's adds (a round trip through VMEM per step) come on top
    assert whole.all_reduce(4096) > 1.2 * whole.closed_form.all_reduce(4096)
    assert whole.all_gather(4096) == pytest.approx(whole.closed_form.all_gather(4096), rel=0.05)
    # past the largest size timed by running (16 MiB), time grows linearly, as bandwidth-bound
    t16, t32, t64 = (whole.all_gather(n << 20) for n in (16, 32, 64))
    assert t64 - t32 == pytest.approx(2 * (t32 - t16), rel=1e-9)
    assert t64 == pytest.approx(whole.closed_form.all_gather(64 << 20), rel=0.05)
    with pytest.raises(ValueError, match="no collective kernel named 'gossip'"):
        vtpu._C.simulated_collective_seconds("gossip", [2], "v5e", 1024.0)


def test_sends_scatters_and_gathers_are_kernels_too():
    whole = interconnect.for_group(8, 8, topology="2x4", chip="v5e")
    closed = whole.closed_form
    big, link = 16 << 20, 50e9  # v5e: 50 GB/s one way per link, 1 us per hop
    # a send: one DMA along the route, the closed form's hops plus the data over one link
    for src, dst in ((0, 7), (5, 2), (1, 0)):
        assert closed.point_to_point(src, dst, big) <= whole.point_to_point(src, dst, big)
        assert whole.point_to_point(src, dst, big) == pytest.approx(closed.point_to_point(src, dst, big), rel=0.01)
    assert whole.point_to_point(3, 3, big) == 0
    # a scatter from corner (0, 0) routes axis 0 first: its link to (1, 0) carries the chunks of
    # (1, 0..3), four of eight; its link to (0, 1) the other three
    chunk = big / 8
    four = 4 * chunk / link
    assert four <= whole.scatter(big, 0) <= 1.05 * four + 3e-6
    # a gather to the same corner arrives along axis 1 last: six chunks come in over (0, 1)
    six = 6 * chunk / link
    assert six <= whole.gather(big, 0) <= 1.05 * six + 3e-6
    with pytest.raises(ValueError, match="chip 8 is not in a slice of 8 chips"):
        whole.scatter(big, 8)


def test_topologies_are_checked():
    assert interconnect.parse_topology("2x4") == (2, 4)
    for bad in ("", "2x", "0x4", "2x2x2x2", "four"):
        with pytest.raises(ValueError, match="is not a slice such as"):
            interconnect.parse_topology(bad)
    with pytest.raises(ValueError, match="has 8 chips, but the process group has 4 ranks"):
        interconnect.for_group(4, 4, topology="2x4", chip="v5e")


def test_copies_between_chips_of_one_process_take_the_interconnects_time(run_isolated):
    done = run_isolated("""
        import json, torch, vtpu
        x = torch.randn(1 << 20).to("tpu:0")  # 4 MiB
        y = (x * 2).to("tpu:3")
        vtpu.synchronize()
        s = vtpu.stats()
        clocks = [vtpu._C.simulated_clock(d) for d in range(4)]
        expected = vtpu._C.Slice([2, 2]).point_to_point(0, 3, 4 << 20)
        kernel = vtpu._C.simulated_collective_seconds("send", [2, 2], "v5e", 4 << 20, 0, 3)
        print(json.dumps({"clocks": clocks, "expected": expected, "kernel": kernel, "bytes": s["chip_to_chip_bytes"],
                          "seconds": s["chip_to_chip_seconds"], "kernel_seconds": s["simulated_seconds"],
                          "ok": torch.equal(y.cpu(), x.cpu() * 2)}))
    """, VTPU_CHIP="v5e", VTPU_CHIPS=4, VTPU_TOPOLOGY="2x2")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout.strip().splitlines()[-1])
    assert r["ok"]
    assert r["bytes"] == 4 << 20
    # (0,0) to (1,1) on a 2x2 v5e slice: two hops of 1 us, then 4 MiB at 50 GB/s
    assert r["expected"] == pytest.approx(2e-6 + (4 << 20) / 50e9)
    # the send kernel's time, which the link model makes the closed form's (plus issuing the DMA)
    assert r["seconds"] == r["kernel"]
    assert r["expected"] <= r["seconds"] <= 1.01 * r["expected"]
    # chip 0 ran the multiply, then both chips waited for the copy; chips 1 and 2 did nothing
    assert r["clocks"][0] == pytest.approx(r["kernel_seconds"] + r["kernel"])
    assert r["clocks"][3] == pytest.approx(r["clocks"][0])
    assert r["clocks"][1] == 0 and r["clocks"][2] == 0


def test_a_topology_that_does_not_match_the_chips_is_a_value_error_at_import(run_isolated):
    done = run_isolated("import torch, vtpu", VTPU_CHIPS=2, VTPU_TOPOLOGY="2x2")
    assert done.returncode != 0
    assert "VTPU_TOPOLOGY=2x2: a slice of 4 chips, but VTPU_CHIPS=2" in done.stderr
