"""What packaging promises (issue: install like a PyTorch extension): one version string, the
environment report of `python -m vtpu`, and the wheel's metadata agreeing with the editable
package's. Building and installing the wheel itself is scripts/wheel_test (run by .ci/run)."""
import importlib.metadata
import pathlib
import re
import subprocess
import sys
import tomllib

import vtpu

ROOT = pathlib.Path(__file__).resolve().parents[2]


def meson_version() -> str:
    return re.search(r"project\('vtpu'.*?version\s*:\s*'([^']+)'", (ROOT / "meson.build").read_text(), re.S).group(1)


def test_one_version_string():
    assert vtpu.__version__ == meson_version()
    assert importlib.metadata.version("vtpu") == vtpu.__version__  # the installed (here: editable) package


def test_the_wheel_and_the_editable_package_declare_the_same_entry_points():
    wheel = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    editable = tomllib.loads((ROOT / "torch_bridge/python/pyproject.toml").read_text())["project"]
    assert wheel["entry-points"] == editable["entry-points"]
    assert wheel["dynamic"] == ["version"]  # from meson.build, never written twice
    assert wheel["dependencies"] == ["torch==2.13.0"]


def test_environment_report(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "vtpu"], capture_output=True, text=True, cwd=tmp_path,
                          env={**__import__("os").environ, "VTPU_MODE": "strict_eager"}, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith(f"vtpu {vtpu.__version__}\n")
    import torch
    assert f"torch {torch.__version__} (the extension was built against 2.13.0)" in out
    assert f"extension: {vtpu._C.__file__}" in out
    assert re.search(r"build: \w+, sanitizers \S+, vector extensions ", out)
    assert "mode strict_eager," in out, out
    assert re.search(r"^environment: .*VTPU_MODE=strict_eager", out, re.M), out
    for chip in ("v4", "v5e", "v5p", "v6e", "v7"):
        assert re.search(rf"^  {chip} +\d", out, re.M), chip
    assert re.search(r"^  v6e +1 +4 x 256 +918 +32 +1640 +83% +128$", out, re.M)  # the preset's figures
