"""Lesson 2 (a clean install, a sanity check, three kinds of bottleneck): solutions.

Exercise 1: report the software stack a Triton kernel will run on.
Exercise 2: from first principles, say whether a piece of work is compute-, memory- or
launch-bound.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch


# --8<-- [start:ex1]
def environment_report() -> dict[str, Any]:
    """The versions and the device a Triton kernel would run on here."""
    import triton

    report: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "torch_cuda": torch.version.cuda,  # None on a CPU-only build of PyTorch
        "gpu_visible": torch.cuda.is_available(),
        "interpreter": os.environ.get("TRITON_INTERPRET") == "1",
    }
    if report["gpu_visible"]:
        major, minor = torch.cuda.get_device_capability()
        report["gpu"] = torch.cuda.get_device_name()
        report["compute_capability"] = f"{major}.{minor}"
    return report


# --8<-- [end:ex1]


# --8<-- [start:ex2]
def classify_bottleneck(
    flops: float,
    nbytes: float,
    *,
    peak_tflops: float,
    peak_GBps: float,
    launch_us: float = 5.0,
) -> str:
    """``"launch-bound"``, ``"memory-bound"`` or ``"compute-bound"``.

    The work needs at least ``flops / peak`` seconds of arithmetic and ``nbytes / bandwidth``
    of memory traffic; the larger one is the bound, unless both are shorter than the few
    microseconds it costs to launch a kernel at all.
    """
    t_compute = flops / (peak_tflops * 1e12)
    t_memory = nbytes / (peak_GBps * 1e9)
    if max(t_compute, t_memory) < launch_us * 1e-6:
        return "launch-bound"
    return "compute-bound" if t_compute > t_memory else "memory-bound"


# --8<-- [end:ex2]
