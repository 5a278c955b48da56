"""Makes the Meson build's extensions and the vtpu package importable (VTPU_BUILD_DIR, default ./build)."""
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
