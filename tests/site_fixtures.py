"""Fixtures shared by the site tests. Test modules load this with ``pytest_plugins`` (and do
not import it, so that pytest rewrites its asserts): the session-scoped build then runs once
however many modules use it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def mkdocs(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """Run ``python -m mkdocs`` with ``src/`` importable, as ``nox -s docs`` does."""
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.fixture(scope="session")
def run_mkdocs():  # type: ignore[no-untyped-def]
    """``mkdocs(*args, cwd=...)``: for tests that build a site of their own."""
    return mkdocs


@pytest.fixture(scope="session")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The whole site, both languages, built with --strict and no warning."""
    out = tmp_path_factory.mktemp("site")
    proc = mkdocs("build", "--strict", "--site-dir", str(out))
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-6000:]
    warnings = [ln for ln in log.splitlines() if ln.startswith("WARNING")]
    assert not warnings, "\n".join(warnings)
    return out
