"""The torch.distributed backend "tpu_dist" (vtpu.distributed): every collective on tpu tensors
gives what the same call gives on CPU tensors through Gloo, for each dtype and reduce op, with
no op on the CPU fallback; and each collective moves the ranks' simulated clocks to the same
time, the latest rank's start plus the interconnect model's time (a collective kernel run on a
simulated slice, or a closed form)."""

import json

import pytest

import vtpu

# Each rank builds the same inputs (seeded by rank), runs every collective once on tpu copies and
# once on CPU tensors (which vtpu.distributed hands to Gloo as they are), and reports where the
# two differ. Reductions of bool and uint8 use the ops that keep them in range.
COLLECTIVES = r"""
ReduceOp = dist.ReduceOp
mismatches, checked = [], 0

def inputs(dtype, shape, salt):
    g = torch.Generator().manual_seed(100 * rank + salt)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype in (torch.int64, torch.uint8):
        return torch.randint(0, 4, shape, generator=g).to(dtype)
    return torch.randn(shape, generator=g).to(dtype)

def both(name, fn, *tensors):
    # fn(*tensors) on CPU tensors and on tpu copies; every tensor (inputs and outputs) compared
    global checked
    cpu = [t.clone() for t in tensors]
    tpu = [t.to("tpu") for t in tensors]
    fn(*cpu)
    fn(*tpu)
    for i, (c, d) in enumerate(zip(cpu, tpu)):
        checked += 1
        if not torch.equal(c, d.cpu()):
            mismatches.append(f"{name} tensor {i}: {c.tolist()} vs {d.cpu().tolist()}")

ops_for = {torch.float32: [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT],
           torch.bfloat16: [ReduceOp.SUM, ReduceOp.AVG, ReduceOp.MAX, ReduceOp.MIN],
           torch.int64: [ReduceOp.SUM, ReduceOp.MAX, ReduceOp.MIN, ReduceOp.PRODUCT],
           torch.uint8: [ReduceOp.MAX, ReduceOp.MIN],
           torch.bool: [ReduceOp.MAX, ReduceOp.MIN]}
for dtype, ops in ops_for.items():
    tag = str(dtype)
    for op in ops:
        both(f"all_reduce {tag} {op}", lambda t: dist.all_reduce(t, op=op), inputs(dtype, (5, 3), 1))
        both(f"reduce {tag} {op}", lambda t: dist.reduce(t, dst=1, op=op), inputs(dtype, (4,), 2))
        both(f"reduce_scatter_tensor {tag} {op}",
             lambda out, inp: dist.reduce_scatter_tensor(out, inp, op=op),
             torch.zeros(3, dtype=dtype), inputs(dtype, (3 * world,), 3))
    both(f"broadcast {tag}", lambda t: dist.broadcast(t, src=world - 1), inputs(dtype, (2, 3), 4))
    both(f"all_gather_into_tensor {tag}", lambda out, inp: dist.all_gather_into_tensor(out, inp),
         torch.zeros(2 * world, 3, dtype=dtype), inputs(dtype, (2, 3), 5))
    both(f"all_gather {tag}", lambda inp, *outs: dist.all_gather(list(outs), inp),
         inputs(dtype, (4,), 6), *[torch.zeros(4, dtype=dtype) for _ in range(world)])
    # uneven all-to-all: rank r sends r + 1 + j elements to rank j
    send = [rank + 1 + j for j in range(world)]
    receive = [r + 1 + rank for r in range(world)]
    both(f"all_to_all_single uneven {tag}",
         lambda out, inp: dist.all_to_all_single(out, inp, output_split_sizes=receive, input_split_sizes=send),
         torch.zeros(sum(receive), dtype=dtype), inputs(dtype, (sum(send),), 7))
    both(f"all_to_all {tag}", lambda *ts: dist.all_to_all(list(ts[:world]), list(ts[world:])),
         *[torch.zeros(2, dtype=dtype) for _ in range(world)], *[inputs(dtype, (2,), 8 + j) for j in range(world)])
    both(f"gather {tag}", lambda inp, *outs: dist.gather(inp, list(outs) if rank == 0 else None, dst=0),
         inputs(dtype, (3,), 20), *[torch.zeros(3, dtype=dtype) for _ in range(world)])
    both(f"scatter {tag}", lambda out, *ins: dist.scatter(out, list(ins) if rank == 1 else None, src=1),
         torch.zeros(3, dtype=dtype), *[inputs(dtype, (3,), 21 + j) for j in range(world)])

    def ring(out, inp):
        ops = [dist.P2POp(dist.isend, inp, (rank + 1) % world), dist.P2POp(dist.irecv, out, (rank - 1) % world)]
        for work in dist.batch_isend_irecv(ops):
            work.wait()

    both(f"isend/irecv ring {tag}", ring, torch.zeros(5, dtype=dtype), inputs(dtype, (5,), 30))

# A non-contiguous input (a transposed view; integer values, so the sum is exact in any order: Gloo
# sums a strided CPU tensor's elements in another order than a dense copy's) and PREMUL_SUM
# (FSDP2's gradient divide factor).
x = inputs(torch.int64, (4, 6), 40).float()
both("all_reduce of a transposed view", lambda t: dist.all_reduce(t.t()), x)
both("all_reduce PREMUL_SUM(0.25)", lambda t: dist.all_reduce(t, op=ReduceOp.PREMUL_SUM(0.25)),
     torch.full((3,), 2.0 ** rank))
expected_premul = sum(0.25 * 2.0 ** r for r in range(world))
t = torch.full((3,), 2.0 ** rank, device="tpu")
dist.all_reduce(t, op=ReduceOp.PREMUL_SUM(0.25))
if t.cpu().tolist() != [expected_premul] * 3:
    mismatches.append(f"PREMUL_SUM: {t.cpu().tolist()} vs {expected_premul}")
print(json.dumps({"checked": checked, "mismatches": mismatches[:20],
                  "fallbacks": vtpu.stats()["cpu_fallbacks"]}))
"""


@pytest.mark.parametrize("world_size", [2, 4])
def test_every_collective_on_tpu_matches_gloo_on_cpu(run_ranks, world_size):
    for rank, result in enumerate(run_ranks(COLLECTIVES, world_size)):
        assert result["mismatches"] == [], f"rank {rank}"
        assert result["checked"] > 150
        assert result["fallbacks"] == {}


def test_collectives_agree_on_the_simulated_clock(run_ranks):
    # Rank 0 computes longer first; the all-reduce starts when it arrives, on both ranks, and
    # takes the interconnect model's time for its bytes; a synchronous collective makes each chip
    # wait for its end, so the ranks' clocks then agree.
    results = run_ranks("""
        from vtpu.distributed import interconnect
        a = torch.randn(512 if rank == 0 else 64, 512, device="tpu")
        (a @ a.t()).sum().item()
        g = torch.ones(1 << 20, device="tpu")  # 4 MiB of gradients
        vtpu.synchronize()
        before = vtpu._C.simulated_clock(0)
        starts = [torch.zeros(1, dtype=torch.float64) for _ in range(world)]
        dist.all_gather(starts, torch.tensor([before], dtype=torch.float64))  # CPU tensors: untimed
        dist.all_reduce(g)
        after = vtpu._C.simulated_clock(0)
        model = interconnect.for_group(world, world)
        s = vtpu.stats()
        print(json.dumps({"before": before, "latest_start": max(s.item() for s in starts), "after": after,
                          "modelled": model.all_reduce(4 << 20), "sum": g[0].item(),
                          "stats": s["interconnect"]["all_reduce"], "waited": s["interconnect_wait_seconds"]}))
    """, VTPU_TOPOLOGY="2")
    assert results[0]["before"] > results[1]["before"]  # rank 0 did more work
    for r in results:
        assert r["sum"] == 2.0
        assert r["after"] == pytest.approx(r["latest_start"] + r["modelled"], rel=1e-9)
        assert r["stats"]["calls"] == 1 and r["stats"]["bytes"] == 4 << 20
        assert r["stats"]["modelled_seconds"] == pytest.approx(r["modelled"])
        assert r["waited"] == pytest.approx(r["after"] - r["before"])  # all of it stalled this chip
    assert results[0]["after"] == pytest.approx(results[1]["after"], rel=1e-12)


def test_an_asynchronous_collective_runs_beside_compute(run_ranks):
    # Issued with async_op=True, the all-reduce is in flight while the chip computes something
    # else; the chip waits only for what is left of it, at wait() or when a kernel reads it.
    results = run_ranks("""
        from vtpu.distributed import interconnect
        g = torch.ones(1 << 22, device="tpu")  # 16 MiB: about 0.67 ms on two v5e chips
        x = torch.randn(1024, 1024, device="tpu")
        vtpu.synchronize()
        t0 = vtpu._C.simulated_clock(0)
        work = dist.all_reduce(g, async_op=True)
        issued = vtpu._C.simulated_clock(0)
        for _ in range(3):
            x = torch.tanh(x @ x)  # independent of g
        vtpu.synchronize()
        computed = vtpu._C.simulated_clock(0)
        work.wait()
        waited = vtpu._C.simulated_clock(0)
        total = (g * 2).sum().item()  # reads g: already here
        comm = interconnect.for_group(world, world).all_reduce(4 << 22)
        print(json.dumps({"t0": t0, "issued": issued, "computed": computed, "waited": waited, "comm": comm,
                          "total": total, "stall": vtpu.stats()["interconnect_wait_seconds"]}))
    """)
    for r in results:
        assert r["total"] == 2.0 * 2 * (1 << 22)
        assert r["issued"] == r["t0"]  # issuing costs the chip nothing
        assert r["computed"] > r["t0"]
        end = r["t0"] + r["comm"]  # both ranks were ready at the same time
        assert r["waited"] == pytest.approx(max(end, r["computed"]), rel=1e-9)
        # overlapped: the chip stalled only for the part of the collective the compute did not hide
        assert r["stall"] == pytest.approx(max(0.0, end - r["computed"]), abs=1e-12)
        assert r["waited"] < r["computed"] + r["comm"]


def test_a_topology_that_does_not_match_the_ranks_is_refused(run_ranks):
    with pytest.raises(AssertionError, match="VTPU_TOPOLOGY='2x2' has 4 chips, but the process group has 2 ranks"):
        run_ranks("print(json.dumps({}))", VTPU_TOPOLOGY="2x2")


def test_ranks_traces_merge_into_one_timeline_with_their_collectives(run_ranks, tmp_path):
    """Each rank traces its chip on the simulated clock (waits included) with an interconnect row
    and a row per link; merged, the all-reduce sits at the same time on both ranks, after the
    later rank's work, its links busy within it, and the kernel that reads its result starts after
    it ends."""
    results = run_ranks(f"""
        a = torch.randn(512 if rank == 1 else 64, 512, device="tpu")
        g = torch.ones(1 << 18, device="tpu")
        path = {str(tmp_path)!r} + f"/rank{{rank}}.json"
        with vtpu.trace(path):
            (a @ a.t()).sum().item()  # rank 1 works longer: rank 0 waits for it at the all-reduce
            dist.all_reduce(g)
            (g * 3).sum().item()
        print(json.dumps({{"path": path, "clock_hz": json.load(open(path))["otherData"]["clock_hz"]}}))
    """, VTPU_TOPOLOGY="2")
    merged = tmp_path / "merged.json"
    vtpu.merge_traces([r["path"] for r in results], str(merged))
    events = json.loads(merged.read_text())["traceEvents"]
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    slices = [dict(e, process=processes[e["pid"]]) for e in events if e.get("ph") == "X"]
    reduces = [s for s in slices if s["name"] == "all_reduce"]
    assert sorted(s["process"] for s in reduces) == ["rank0 tpu:0 v5e links", "rank1 tpu:0 v5e links"]
    assert reduces[0]["ts"] == pytest.approx(reduces[1]["ts"]) and reduces[0]["dur"] == pytest.approx(reduces[1]["dur"])
    assert reduces[0]["dur"] > 0
    start, end = reduces[0]["ts"], reduces[0]["ts"] + reduces[0]["dur"]
    for rank in (0, 1):
        kernels = sorted((s for s in slices if s["process"].startswith(f"rank{rank} tpu:0 v5e core")), key=lambda s: s["ts"])
        before = [s for s in kernels if s["ts"] < start]
        after = [s for s in kernels if s["ts"] >= start]
        assert before and after, (rank, start, [(s["name"], s["ts"]) for s in kernels])
        assert max(s["ts"] + s["dur"] for s in before) <= start + 1e-3  # the work before ended before it
        assert min(s["ts"] for s in after) >= end - 1e-3  # the reader waited for its result
    # the link leaving each chip carries its half of the reduce-scatter and of the all-gather:
    # 1 MiB at v5e's 50 GB/s, within the all-reduce
    for rank in (0, 1):
        link = [s for s in slices if s["name"] == "all_reduce (link)" and s["process"] == f"rank{rank} tpu:0 v5e links"]
        assert link and all(start - 1e-3 <= s["ts"] and s["ts"] + s["dur"] <= end + 1e-3 for s in link)
        assert sum(s["dur"] for s in link) == pytest.approx((1 << 20) / 50e9 * 1e6, rel=0.02)
    gap = lambda rank: start - max(s["ts"] + s["dur"] for s in slices  # noqa: E731
                                   if s["process"].startswith(f"rank{rank} tpu:0 v5e core") and s["ts"] < start)
    assert gap(0) > gap(1)  # rank 0 stalled for rank 1
