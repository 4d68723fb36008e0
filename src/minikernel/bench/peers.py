"""Helpers for building the baselines a lab measures beside our kernels."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(fn)`` specialised to the shapes it first sees, as a fair baseline.

    A lab calls this once per shape. Left to its defaults, Dynamo turns a function it has seen
    with two sizes into a dynamic-shape kernel (which cannot assume 16-byte alignment or a size
    multiple of the vector width) and, after its recompile limit, falls back to eager: either
    way the number would measure Dynamo's cache, not the compiled kernel. So each baseline
    starts from a reset Dynamo and compiles with ``dynamic=False``.
    """
    import torch

    torch._dynamo.reset()
    return torch.compile(fn, dynamic=False)
