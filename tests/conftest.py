"""Shared test setup.

On a machine without a CUDA GPU, Triton kernels run in its interpreter on CPU tensors. The
interpreter is chosen when Triton is first imported, so TRITON_INTERPRET is set here, before any
test module imports minikernel. Tests that need the GPU are marked ``gpu`` and skipped on CPU.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

try:
    import torch

    HAS_GPU = torch.cuda.is_available()
except ImportError:  # pragma: no cover - torch is a hard dependency
    HAS_GPU = False

if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEVICE = "cpu" if INTERPRET else "cuda"


@functools.cache
def compiled(path: Path, arch: str) -> Any:
    """``minikernel.cuda.compile_file(path, arch)``, once per test session: a kernel file of the
    course takes NVRTC tens of seconds, and several tests read the same cubin's kernel names
    or ptxas report. The file must not change during the session (none of the course's do)."""
    from minikernel.cuda import compile_file

    return compile_file(path, arch)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (none visible to PyTorch)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def device() -> str:
    """Where Triton kernels run in this session: 'cuda', or 'cpu' under the interpreter."""
    return DEVICE


ROOT = Path(__file__).resolve().parents[1]


def run_lab_on_cpu(script: str, results_dir: Path) -> subprocess.CompletedProcess:
    """Run ``labs/<script>`` in Triton's interpreter with its results directed to
    ``results_dir``; the caller asserts what a CPU run must do (check, then exit 2)."""
    env = dict(os.environ, TRITON_INTERPRET="1", MINIKERNEL_RESULTS_DIR=str(results_dir))
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, str(ROOT / "labs" / script)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
