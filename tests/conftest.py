"""Shared test setup.

On a machine without a CUDA GPU, Triton kernels run in its interpreter on CPU tensors. The
interpreter is chosen when Triton is first imported, so TRITON_INTERPRET is set here, before any
test module imports minikernel. Tests that need the GPU are marked ``gpu`` and skipped on CPU.
"""

from __future__ import annotations

import os

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
