"""Makes the Meson build's extensions and the vtpu package importable (VTPU_BUILD_DIR, default ./build)."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("VTPU_BUILD_DIR", ROOT / "build"))
PYTHON_PACKAGE = ROOT / "torch_bridge" / "python"
sys.path.insert(0, str(BUILD / "torch_bridge"))
sys.path.insert(0, str(PYTHON_PACKAGE))
os.environ.setdefault("VTPU_BUILD_DIR", str(BUILD))


@pytest.fixture
def run_isolated():
    """Runs a Python snippet in a fresh process (the simulated chips are configured once per
    process from VTPU_* variables); returns the completed process."""

    def run(code: str, **env):
        full_env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_PACKAGE), str(BUILD / "torch_bridge")]))
        full_env.update({k: str(v) for k, v in env.items()})
        return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                              env=full_env, timeout=600)

    return run


# What every rank of run_ranks runs first: its process group over a file store (no network but
# Gloo's own connections, which vtpu.distributed binds to the loopback interface).
_RANK_PROLOGUE = """
import datetime, json, os, torch, torch.distributed as dist, vtpu
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
dist.init_process_group("tpu_dist", init_method="file://" + os.environ["VTPU_TEST_STORE"], rank=rank, world_size=world,
                        timeout=datetime.timedelta(seconds=120))  # a rank that died fails the others soon
"""


@pytest.fixture
def run_ranks(tmp_path):
    """Runs a snippet as `world_size` ranks of a tpu_dist process group, one process (one chip)
    each, after _RANK_PROLOGUE (rank, world, dist and vtpu are defined); returns what each rank
    printed last, parsed as JSON, in rank order. A failing rank fails the test with its stderr."""

    def run(code: str, world_size: int = 2, **env):
        script = tmp_path / "rank.py"
        script.write_text(_RANK_PROLOGUE + textwrap.dedent(code) + "\ndist.destroy_process_group()\n")
        base = dict(os.environ, PYTHONPATH=os.pathsep.join([str(PYTHON_PACKAGE), str(BUILD / "torch_bridge")]),
                    VTPU_TEST_STORE=str(tmp_path / "store"), WORLD_SIZE=str(world_size), GLOO_SOCKET_IFNAME="lo")
        base.update({k: str(v) for k, v in env.items()})
        procs = [subprocess.Popen([sys.executable, str(script)], env=dict(base, RANK=str(r)), stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True) for r in range(world_size)]
        results = []
        for rank, proc in enumerate(procs):
            try:
                out, err = proc.communicate(timeout=600)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                raise
            assert proc.returncode == 0, f"rank {rank} failed:\n{err[-4000:]}"
            results.append(json.loads(out.strip().splitlines()[-1]))
        return results

    return run


@pytest.fixture
def cpu_fallback():
    """defer_and_fuse with the CPU fallback on, for whole-model flows whose int64 bookkeeping has
    no chip kernels (Hugging Face, Diffusers); its one-time warnings are silenced here and tested
    elsewhere."""
    import warnings

    import vtpu

    vtpu.set_cpu_fallback(True)
    vtpu.set_mode("defer_and_fuse")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield
    vtpu.set_cpu_fallback(False)


@pytest.fixture
def no_fallback():
    """The CPU fallback off and the counters reset, so a test sees every op it runs stay on the chip
    (or fail naming the op); defer_and_fuse is restored afterwards."""
    import vtpu

    vtpu.set_cpu_fallback(False)
    vtpu.synchronize()
    vtpu.reset_stats()
    yield
    vtpu.set_mode("defer_and_fuse")


@pytest.fixture(params=["defer_and_fuse", "strict_eager"])
def each_eager_mode(request):
    """The test once in each eager mode (pending work flushed before and after); defer_and_fuse is
    restored afterwards."""
    import vtpu

    vtpu.set_mode(request.param)
    yield request.param
    vtpu.synchronize()
    vtpu.set_mode("defer_and_fuse")


@pytest.fixture
def native_in_each_eager_mode(each_eager_mode, no_fallback):
    """each_eager_mode with the CPU fallback off: every op the test runs stays on the chip (or the
    test fails naming the op), and none was counted as a fallback."""
    import vtpu

    yield each_eager_mode
    assert vtpu.stats()["cpu_fallback_ops"] == 0


@pytest.fixture
def sgd_losses():
    """run(model, loss_of, lr, steps=5): the loss of each of `steps` plain SGD steps on `model`
    (loss_of(model) gives the loss tensor), for comparing a tpu model's curve with the CPU's."""
    import torch

    def run(model, loss_of, lr, steps=5):
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        curve = []
        for _ in range(steps):
            opt.zero_grad()
            loss = loss_of(model)
            loss.backward()
            opt.step()
            curve.append(loss.item())
        return curve

    return run
