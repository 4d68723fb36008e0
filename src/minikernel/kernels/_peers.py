"""Baselines from other packages (Liger-Kernel, QuACK), imported only when a lab asks for them.

A peer that is not installed, or that refuses a case (Liger's RMSNorm refuses rows of 65536
elements or more), raises :class:`PeerUnavailable`; the lab prints the reason and moves on.
"""

from __future__ import annotations

import importlib
from types import ModuleType


class PeerUnavailable(RuntimeError):
    """This baseline cannot run this case here (not installed, or it refuses the shape)."""


def import_peer(module: str, package: str) -> ModuleType:
    try:
        return importlib.import_module(module)
    except Exception as exc:  # ImportError, or a package that fails while importing
        raise PeerUnavailable(
            f"{package} is not usable here ({type(exc).__name__}: {exc})"
        ) from exc
