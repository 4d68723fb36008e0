"""Reading results for the site: load files, select records, and decide what is stale.

A record is stale when the source it measured has changed: its ``source_hash`` no longer
matches the hash of the variant's files now. A figure is also flagged when the file it comes
from was measured on another GPU than the one the page names.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from minikernel.bench.env import gpu_slug
from minikernel.bench.results import RESULTS_DIR, load


class MissingResult(LookupError):
    """A page asked for a results file or a record that is not there: the build must fail."""


def _added_mem(rec: dict[str, Any]) -> int | None:
    peak, base = rec.get("peak_mem_bytes"), rec.get("base_mem_bytes")
    return None if peak is None or base is None else peak - base


DERIVED = {"added_mem_bytes": _added_mem}
"""Fields a page may ask for that the results hold only as parts, computed here at build time:
``added_mem_bytes`` is the memory one call took above what was allocated before it (its
inputs), the peak less the base."""


@dataclass(frozen=True)
class ResultsFile:
    op: str
    slug: str
    path: Path
    data: dict[str, Any]

    def __post_init__(self) -> None:
        for rec in self.data.get("records", []):
            for name, derive in DERIVED.items():
                if name not in rec:
                    value = derive(rec)
                    if value is not None:
                        rec[name] = value

    @property
    def env(self) -> dict[str, Any]:
        return self.data["env"]

    @property
    def measured_on_other_gpu(self) -> bool:
        """The file sits in the folder of one GPU but says it was measured on another."""
        return gpu_slug(self.env["gpu"]) != self.slug


@cache
def _load_cached(path: str, mtime: float) -> dict[str, Any]:
    return load(Path(path))


def results_file(op: str, slug: str, root: Path = RESULTS_DIR) -> ResultsFile:
    path = root / slug / f"{op}.json"
    if not path.exists():
        have = sorted(p.relative_to(root).as_posix() for p in root.glob("*/*.json"))
        raise MissingResult(
            f"no results file {path.relative_to(root.parent.parent)}; run `nox -s labs -- {op}` "
            f"on a {slug} GPU (results present: {have})"
        )
    return ResultsFile(op, slug, path, _load_cached(str(path), path.stat().st_mtime))


ABSENT = "none"
"""A selector value that matches records without the field: ``where={"epilogue": "none"}``
picks the plain GEMM records, not the ones with a fused epilogue."""


def _matches(rec: dict[str, Any], sel: dict[str, Any]) -> bool:
    for key, want in sel.items():
        if want is None:
            continue
        if key not in rec and key != "pass":
            if want == ABSENT:
                continue
            return False
        have = rec.get(key, "fwd")
        if key == "shape":
            if list(have or []) != list(want):
                return False
        elif have != want:
            return False
    return True


def select(f: ResultsFile, **sel: Any) -> list[dict[str, Any]]:
    """Records of ``f`` matching every given field (``pass_`` for ``pass``)."""
    if "pass_" in sel:
        sel["pass"] = sel.pop("pass_")
    return [r for r in f.data["records"] if _matches(r, sel)]


def one(f: ResultsFile, **sel: Any) -> dict[str, Any]:
    found = select(f, **sel)
    if len(found) != 1:
        what = ", ".join(f"{k}={v!r}" for k, v in sel.items() if v is not None)
        raise MissingResult(
            f"{f.path.name}: expected exactly one record with {what}, found {len(found)}"
        )
    return found[0]


@cache
def current_hash(op: str, impl: str) -> str | None:
    """Hash of the variant's sources as they are now; None for baselines (peers)."""
    try:
        module = importlib.import_module(f"minikernel.kernels.{op}")
    except ImportError:
        return None
    variant = getattr(module, "VARIANTS", {}).get(impl)
    return variant.source_hash() if variant is not None else None


HOST_BOUND_FRAC = 0.8
"""A timed call is marked host-bound when issuing it took at least this fraction of its time."""


def is_host_bound(rec: dict[str, Any]) -> bool:
    """Whether ``rec``'s time may be the host's: the lab measured the wall-clock cost of issuing
    one call (``host_us``, events timing only) and it reaches HOST_BOUND_FRAC of the measured
    time, so the GPU may have waited for the next call. Records without ``host_us`` (graph
    replay, older runs) are not marked."""
    host = rec.get("host_us")
    return host is not None and host >= HOST_BOUND_FRAC * rec["median_us"]


def is_stale(op: str, rec: dict[str, Any]) -> bool:
    h = rec.get("source_hash", "")
    if not h.startswith("sha256:"):
        return False  # a peer: its identity is a package version, not our source
    now = current_hash(op, rec["impl"])
    return now is not None and now != h
