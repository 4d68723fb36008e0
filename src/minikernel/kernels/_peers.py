"""Baselines from other packages (Liger-Kernel, QuACK), imported only when a lab asks for them.

A peer that is not installed, or that refuses a case (Liger's RMSNorm refuses rows of 65536
elements or more), raises :class:`PeerUnavailable`; the lab prints the reason and moves on.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any


class PeerUnavailable(RuntimeError):
    """This baseline cannot run this case here (not installed, or it refuses the shape)."""


def import_peer(module: str, package: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a package that fails while importing
        raise PeerUnavailable(
            f"{package} is not usable here ({type(exc).__name__}: {exc})"
        ) from exc


def compiled(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``torch.compile(fn)`` as a user gets it by default: specialised to the first shapes it
    sees, recompiled with dynamic sizes when they change. A lab sweeps many shapes and dtypes
    through one function, more than Dynamo's default of 8 recompilations allows (past it, Dynamo
    silently falls back to eager), so the limit is raised for the process. And a backward pass
    timed on its own replays one graph (``retain_graph=True``), which AOTAutograd's donated
    buffers forbid: they are turned off (they save memory in backward, not time)."""
    import torch
    import torch._dynamo.config as dynamo_config

    for name in ("recompile_limit", "cache_size_limit"):
        if getattr(dynamo_config, name, 64) < 64:
            setattr(dynamo_config, name, 64)
    try:
        import torch._functorch.config as functorch_config

        functorch_config.donated_buffer = False
    except (ImportError, AttributeError):  # older PyTorch: no donated buffers
        pass
    return torch.compile(fn)
