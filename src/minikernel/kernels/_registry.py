"""What every op package exposes: a ladder of variants, each knowing the sources it is made of.

``VARIANTS`` maps ``"cuda:N"`` / ``"triton:N"`` (N = the rung, ``<op>_kernelN`` in the source)
to a :class:`Variant`. The benchmark records the hash of a variant's sources next to each
number, and the site marks a number stale when that hash no longer matches the files.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from minikernel._checks import FLOAT_DTYPES


@dataclass(frozen=True)
class Variant:
    op: str
    key: str
    fn: Callable[..., torch.Tensor]
    sources: tuple[Path, ...]
    summary: str
    dtypes: tuple[torch.dtype, ...] = FLOAT_DTYPES

    @property
    def language(self) -> str:
        return self.key.split(":", 1)[0]

    @property
    def rung(self) -> int:
        return int(self.key.split(":", 1)[1])

    @property
    def section(self) -> str:
        """The snippet section (``--8<-- [start:kernelN]``) that shows this rung's kernel."""
        return f"kernel{self.rung}"

    def source_hash(self) -> str:
        return files_hash(self.sources)


def files_hash(paths: Iterable[Path]) -> str:
    """``sha256:<hex>`` over the named files, in order: what "the measured source" means."""
    h = hashlib.sha256()
    for p in paths:
        h.update(Path(p).name.encode())
        h.update(b"\0")
        h.update(Path(p).read_bytes())
    return "sha256:" + h.hexdigest()


def with_inputs(run: Callable[[], object], *inputs: torch.Tensor) -> Callable[[], object]:
    """``run`` with ``run.inputs = inputs``: a lab's runner carries the tensors it was built on,
    so that the lab can check what the runner returns against a reference of them."""
    run.inputs = inputs  # type: ignore[attr-defined]
    return run
