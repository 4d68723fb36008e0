"""The results contract between labs and pages: build, validate, write atomically, read.

``labs/results/<gpu-slug>/<op>.json`` is written only by ``nox -s labs``, at the end of a lab
that finished; a lab that fails or is interrupted leaves the previous file untouched, because
the new one is written to a temporary file in the same folder and renamed over it (rename is
atomic on POSIX).
"""

from __future__ import annotations

import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

SCHEMA_PATH = Path(__file__).with_name("results.schema.json")
RESULTS_DIR = Path(__file__).resolve().parents[3] / "labs" / "results"
SCHEMA_VERSION = 1


class ResultsError(ValueError):
    """A results file that does not satisfy the schema, or a record that is not there."""


@cache
def schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())


def validate(data: dict[str, Any], *, where: str = "results") -> None:
    """Raise ResultsError naming the first field that breaks the schema."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        e = errors[0]
        path = "/".join(str(p) for p in e.absolute_path) or "(top level)"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise ResultsError(f"{where}: {path}: {e.message}{more}")
    if data["env"].get("dirty") is None:  # pragma: no cover - schema requires it
        raise ResultsError(f"{where}: env.dirty missing")


def write_atomic(data: dict[str, Any], path: Path) -> Path:
    """Validate ``data`` and write it to ``path`` atomically (temp file + rename)."""
    validate(data, where=str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(data, f, indent=1, sort_keys=False)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load(path: Path) -> dict[str, Any]:
    data = json.loads(Path(path).read_text())
    validate(data, where=str(path))
    return data


def results_path(op: str, gpu_slug: str, root: Path = RESULTS_DIR) -> Path:
    return root / gpu_slug / f"{op}.json"


def dropped_impls(path: Path, records: list[dict[str, Any]]) -> list[str]:
    """The implementations the results file at ``path`` has records of and ``records`` (a new
    run's) has none of, sorted: a peer that did not run this time (not installed, or refused),
    or a rung taken out. Empty when there is no file yet, or it cannot be read."""
    try:
        old = json.loads(path.read_text())["records"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    now = {r["impl"] for r in records}
    return sorted({r["impl"] for r in old if isinstance(r, dict) and "impl" in r} - now)
