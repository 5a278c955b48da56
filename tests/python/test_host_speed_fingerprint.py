"""Host-speed work must not move numerics or cycles: a fresh run of scripts/host_speed_fingerprint.py
(the demo's model, bench/eager_modes.py's step in both modes, causal attention forward and
backward, matmuls of the roofline's kinds; on v5e and v6e) equals the record that the code
before that work wrote (tests/python/data/host_speed_fingerprint.json): every output's bytes,
the simulated seconds and the kernel count."""
import importlib.util
import json

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("host_speed_fingerprint", ROOT / "scripts" / "host_speed_fingerprint.py")
fingerprint = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fingerprint)


def test_outputs_and_cycles_equal_the_record():
    record = json.loads(fingerprint.RECORD.read_text())
    assert set(record) == set(fingerprint.CHIPS)
    for chip in fingerprint.CHIPS:
        now = fingerprint.fingerprint_on(chip)
        assert set(now) == set(record[chip])
        for workload, expected in record[chip].items():
            assert now[workload] == expected, f"{chip} {workload}"
