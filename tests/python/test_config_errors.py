"""Bad VTPU_* configuration is a Python ValueError at import naming the variable, the value and
the valid choices; the interpreter never aborts (these aborted with "terminate called after
throwing an instance of 'vtpu::sim::ConfigError'" at the first tpu tensor)."""
import json
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

CASES = [
    ({"VTPU_CHIP": "v9"}, "VTPU_CHIP=v9: unknown chip 'v9' (presets: v4, v5e, v5p, v6e, v7)"),
    ({"VTPU_MODE": "fast"}, "VTPU_MODE=fast: unknown vtpu mode 'fast' (strict_eager, defer_and_fuse, debug)"),
    ({"VTPU_CHIPS": "0"}, "VTPU_CHIPS=0: expected a number of chips, a whole number in 1..64"),
    ({"VTPU_CHIPS": "abc"}, "VTPU_CHIPS=abc: expected a number of chips, a whole number in 1..64"),
    ({"VTPU_FUSION": "x"}, "VTPU_FUSION=x: unknown fusion strategy 'x' (none, greedy)"),
    ({"VTPU_CPU_FALLBACK": "maybe"}, "VTPU_CPU_FALLBACK=maybe: expected 0 (off) or 1 (on)"),
    ({"VTPU_HBM_BYTES": "12x"}, "VTPU_HBM_BYTES=12x: expected a byte count"),
    ({"VTPU_TIMING_ONLY": "yes"}, "VTPU_TIMING_ONLY=yes: expected 0 (off) or 1 (time kernels without computing values)"),
]


@pytest.mark.parametrize("env,message", CASES, ids=[next(iter(e)) + "=" + next(iter(e.values())) for e, _ in CASES])
def test_bad_configuration_is_a_value_error_not_an_abort(run_isolated, env, message):
    proc = run_isolated("""
        import torch
        torch.ones(2, device="tpu")
    """, **env)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-500:])  # a Python exception, not SIGABRT
    assert "terminate called" not in proc.stderr
    assert "ValueError: " + message in proc.stderr


def test_preset_file_with_an_unknown_field(run_isolated, tmp_path):
    preset = json.loads((ROOT / "sim" / "presets" / "v5e.json").read_text())
    preset["tensorcore_count_typo"] = 2
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(preset))
    proc = run_isolated("import vtpu", VTPU_CHIP=str(path), TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert proc.returncode == 1 and "terminate called" not in proc.stderr
    assert f"ValueError: VTPU_CHIP={path}: {path}: unknown field 'tensorcore_count_typo'" in proc.stderr


def test_set_mode_and_fusion_refuse_unknown_names():
    import vtpu

    with pytest.raises(ValueError, match="unknown vtpu mode 'fast'"):
        vtpu.set_mode("fast")
    with pytest.raises(ValueError, match=r"unknown fusion strategy 'x' \(none, greedy\)"):
        vtpu.set_fusion("x")
