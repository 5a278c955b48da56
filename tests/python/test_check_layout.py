"""scripts/check_layout: the repository passes it, and it fails on what it exists to catch (an
include cycle between units, a file over 600 lines) while only listing files over 400."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
CHECK = ROOT / "scripts" / "check_layout"


def run(tree):
    return subprocess.run([sys.executable, str(CHECK), str(tree)], capture_output=True, text=True)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_the_repository_passes():
    result = run(ROOT)
    assert result.returncode == 0, result.stdout
    assert "0 failure(s)" in result.stdout


def test_a_header_and_its_source_needing_another_unit_both_ways_is_a_cycle(tmp_path):
    # a.h -> b.h and b.cc -> a.h: no file includes itself, but units a and b need each other.
    write(tmp_path / "room/a.h", '#pragma once\n#include "room/b.h"\n')
    write(tmp_path / "room/b.h", "#pragma once\n")
    write(tmp_path / "room/b.cc", '#include "room/b.h"\n#include "room/a.h"\n')
    result = run(tmp_path)
    assert result.returncode == 1
    assert "include cycle between units: room/a <-> room/b" in result.stdout


def test_an_include_chain_without_a_cycle_passes(tmp_path):
    write(tmp_path / "room/a.h", '#pragma once\n#include "room/b.h"\n')
    write(tmp_path / "room/a.cc", '#include "room/a.h"\n#include "room/b.h"\n')
    write(tmp_path / "room/b.h", "#pragma once\n")
    write(tmp_path / "room/b.cc", '#include "room/b.h"\n')
    assert run(tmp_path).returncode == 0


def test_a_file_over_600_lines_fails_and_one_over_400_is_listed(tmp_path):
    write(tmp_path / "room/big.cc", "int x;\n" * 601)
    write(tmp_path / "room/long.cc", "int y;\n" * 401)
    write(tmp_path / "room/fine.cc", "int z;\n" * 400)
    result = run(tmp_path)
    assert result.returncode == 1
    assert "room/big.cc: 601 lines (the limit is 600)" in result.stdout
    assert "room/long.cc: 401 lines (over the 400" in result.stdout
    assert "fine.cc" not in result.stdout
    write(tmp_path / "room/big.cc", "int x;\n" * 600)
    assert run(tmp_path).returncode == 0


def test_build_folders_are_not_read(tmp_path):
    write(tmp_path / "build/generated.cc", "int x;\n" * 700)
    write(tmp_path / "room/a.cc", "int a;\n")
    assert run(tmp_path).returncode == 0
