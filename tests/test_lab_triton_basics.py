"""Lab 06 on a CPU: its checks run in Triton's interpreter and it exits with 2 ("no GPU")
before timing, leaving labs/results/ untouched."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import HAS_GPU

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.skipif(HAS_GPU, reason="on a GPU the lab measures; nox -s labs runs it there")
def test_lab_checks_then_exits_2_without_gpu(tmp_path: Path) -> None:
    env = dict(os.environ, TRITON_INTERPRET="1", MINIKERNEL_RESULTS_DIR=str(tmp_path))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        [sys.executable, str(ROOT / "labs" / "06_triton_basics.py")],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "sanity check passed" in proc.stdout
    assert "all correct" in proc.stdout
    assert not any(tmp_path.iterdir())
