"""docs/tutorial.md runs end to end: its python code blocks, in order, in one namespace (each
block's asserts check its results against the CPU)."""
import pathlib
import re

import pytest

TUTORIAL = pathlib.Path(__file__).parents[2] / "docs" / "tutorial.md"


def test_every_code_block_of_the_tutorial_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", TUTORIAL.read_text(), re.S)
    assert len(blocks) >= 8
    monkeypatch.chdir(tmp_path)  # the trace file lands here
    namespace: dict = {}
    for number, block in enumerate(blocks, 1):
        try:
            exec(compile(block, f"{TUTORIAL.name} block {number}", "exec"), namespace)
        except Exception as error:  # say which block, then fail with the original
            pytest.fail(f"docs/tutorial.md block {number} failed: {type(error).__name__}: {error}")
