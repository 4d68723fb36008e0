"""labs/<name>.py as a module, for the tests of the side probes' text edits (labs/ is not a
package): imported by the test files that check a probe's kernels compile."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType


def load_probe(name: str) -> ModuleType:
    """labs/<name>.py as a module."""
    path = Path(__file__).resolve().parent.parent / "labs" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    probe = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(probe)
    return probe
