"""Lab 06 on a CPU: its checks run in Triton's interpreter and it exits with 2 ("no GPU")
before timing, leaving labs/results/ untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import HAS_GPU, run_lab_on_cpu


@pytest.mark.skipif(HAS_GPU, reason="on a GPU the lab measures; nox -s labs runs it there")
def test_lab_checks_then_exits_2_without_gpu(tmp_path: Path) -> None:
    proc = run_lab_on_cpu("06_triton_basics.py", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "sanity check passed" in proc.stdout
    assert "all correct" in proc.stdout
    assert not any(tmp_path.iterdir())
