"""Two-TensorCore chips from PyTorch (docs/tensorcores.md): one `tpu` device per chip whose
kernels use both cores, so results match the CPU as on any chip, device counts follow
VTPU_CHIPS, and a trace shows both cores working."""

import json


def test_a_two_core_chip_is_one_device_whose_kernels_use_both_cores(run_isolated, tmp_path):
    trace = tmp_path / "v5p.json"
    done = run_isolated(f"""
        import json, torch, vtpu
        assert torch.tpu.device_count() == 2, torch.tpu.device_count()  # VTPU_CHIPS=2: one device per chip
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
        x, y = torch.randn(512, 64), torch.randint(0, 10, (512,))
        reference = torch.nn.functional.cross_entropy(m(x), y)
        reference.backward()
        want = m[0].weight.grad.clone()
        m.zero_grad()
        m.to("tpu")
        with vtpu.trace({str(trace)!r}):
            loss = torch.nn.functional.cross_entropy(m(x.to("tpu")), y.to("tpu"))
            loss.backward()
            vtpu.synchronize()
        got = m[0].weight.grad.cpu()
        print(json.dumps({{"loss": [loss.item(), reference.item()],
                           "grad_err": (got - want).abs().max().item(), "grad_scale": want.abs().max().item()}}))
    """, VTPU_CHIP="v5p", VTPU_CHIPS=2)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert abs(result["loss"][0] - result["loss"][1]) < 1e-2 * abs(result["loss"][1])
    assert result["grad_err"] < 1e-2 * result["grad_scale"]
    events = json.loads(trace.read_text())
    events = events["traceEvents"] if isinstance(events, dict) else events
    processes = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    busy = {name: 0 for name in processes.values()}
    for e in events:
        if e.get("ph") == "X" and e.get("pid") in processes:
            busy[processes[e["pid"]]] += e.get("dur", 0)
    assert busy.get("tpu:0 v5p core0", 0) > 0 and busy.get("tpu:0 v5p core1", 0) > 0, busy
