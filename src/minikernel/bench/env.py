"""Provenance: what ran a measurement (GPU, driver, versions, commit), kept with each result."""

from __future__ import annotations

import datetime as _dt
import os
import platform
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[3]


def _git(*args: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-c", f"safe.directory={REPO}", *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def commit_info() -> tuple[str, bool]:
    """(short commit, dirty?) of the measured tree. MINIKERNEL_COMMIT (and MINIKERNEL_DIRTY),
    when set, win: a GPU runner gets a copy of the working tree whose .git, if it has one, can
    be older than the files (seen on the H200 runner: a stale HEAD, so every file "modified").
    Otherwise git says it; with neither: ("unknown", True)."""
    env_commit = os.environ.get("MINIKERNEL_COMMIT")
    if env_commit:
        # The results name this commit and the pages link to it: a typed or cut hash would be
        # a dead link, so only what `git rev-parse` gives (--short=12 or the full hash) passes.
        if not re.fullmatch(r"[0-9a-f]{12,40}", env_commit):
            raise ValueError(
                f"MINIKERNEL_COMMIT={env_commit!r} is not a commit hash of 12 to 40 lowercase "
                "hex digits; set it from `git rev-parse --short=12 HEAD`"
            )
        git_head = _git("rev-parse", "--short=12", "HEAD")
        if git_head and not env_commit.startswith(git_head[:7]):
            print(
                f"note: MINIKERNEL_COMMIT={env_commit[:12]} overrides this checkout's git HEAD "
                f"{git_head}",
                flush=True,
            )
        return env_commit[:12], os.environ.get("MINIKERNEL_DIRTY", "1") != "0"
    commit = _git("rev-parse", "--short=12", "HEAD")
    if commit:
        status = _git(
            "status", "--porcelain", "--untracked-files=no", "--", "src", "labs", ":!labs/results"
        )
        return commit, bool(status)
    return "unknown", True


def gpu_slug(name: str) -> str:
    """Folder name for a GPU's results: 'NVIDIA H200' -> 'h200', 'NVIDIA GeForce RTX 5090' ->
    'rtx-5090'."""
    s = name.lower()
    for word in ("nvidia", "geforce", "tesla"):
        s = s.replace(word, " ")
    return re.sub(r"[^a-z0-9]+", "-", s).strip("-") or "unknown-gpu"


def _smi_query(field: str) -> str | None:
    """One ``nvidia-smi --query-gpu`` field of the first GPU (no units), or None where
    nvidia-smi is missing, fails or has no value for it."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return None
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={field}", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        )
        value = out.stdout.strip().splitlines()[0].strip()
    except (OSError, subprocess.SubprocessError, IndexError):
        return None
    return None if not value or value.startswith("[") else value  # "[N/A]", "[Not Supported]"


def _driver_version() -> str:
    return _smi_query("driver_version") or "unknown"


def _power_limit_w() -> float | None:
    """The board's enforced power limit in watts, what a power-capped loop is held to."""
    value = _smi_query("power.limit")
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


def collect_env() -> dict[str, Any]:
    """The ``env`` block of a results file, for the current CUDA device."""
    import torch
    import triton

    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    commit, dirty = commit_info()
    env: dict[str, Any] = {
        "gpu": props.name,
        "cc": f"{props.major}.{props.minor}",
        "sms": props.multi_processor_count,
        "memory_GB": round(props.total_memory / 1e9, 1),
        "l2_MB": round(getattr(props, "L2_cache_size", 0) / 2**20, 1),
        "driver": _driver_version(),
        "cuda": torch.version.cuda or "unknown",
        "torch": torch.__version__.split("+")[0],
        "triton": triton.__version__,
        "python": platform.python_version(),
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "commit": commit,
        "dirty": dirty,
    }
    limit = _power_limit_w()
    if limit is not None:
        env["power_limit_w"] = limit
    return env
