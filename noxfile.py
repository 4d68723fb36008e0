"""Sessions: `nox -l` lists them. CPU sessions pin PyTorch's CPU build (constraints/cpu.txt);
`labs` uses whatever CUDA build of PyTorch the GPU machine already has."""

from __future__ import annotations

import os
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
PYPROJECT = nox.project.load_toml("pyproject.toml")
CPU_CONSTRAINTS = ("-c", "constraints/cpu.txt")

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_venv = "yes"


def _install_cpu(session: nox.Session, *groups: str) -> None:
    """The package and dependency groups, with the CPU build of torch (no CUDA download)."""
    deps = [d for g in groups for d in nox.project.dependency_groups(PYPROJECT, g)]
    # A new pip: the one a Python 3.11 venv starts with predates editable installs of
    # hatchling projects.
    session.install("pip>=25")
    session.install(*CPU_CONSTRAINTS, "torch")
    session.install(*CPU_CONSTRAINTS, "-e", ".", *deps)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite on the CPU (Triton interpreter, NVRTC compile checks, site build, and
    the browser tests, which need Chromium: `apt-get install chromium`; skipped without it
    outside CI)."""
    _install_cpu(session, "tests", "docs")
    session.run("pytest", *_workers(session.posargs), *session.posargs)


def _workers(posargs: list[str]) -> list[str]:
    """pytest-xdist options for the suite, unless the command line already chooses (`-n 0`
    runs it in one process). Most of its time is NVRTC compiling the course's .cu files, one
    core each: a worker per core, up to four (each compile holds its own memory), and every
    test file on one worker, so that a file's compiles are shared by its tests."""
    if any(a.startswith(("-n", "--numprocesses", "--dist")) for a in posargs):
        return []
    workers = min(os.cpu_count() or 1, 4)
    return ["-n", str(workers), "--dist", "loadfile"] if workers > 1 else []


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check and ruff format --check."""
    session.install(*nox.project.dependency_groups(PYPROJECT, "lint"))
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site in English and Spanish with --strict, from the committed results, then
    check every internal link and anchor of the built HTML (language switcher included)."""
    _install_cpu(session, "docs")
    args = list(session.posargs)
    site = "site"
    for flag in ("-d", "--site-dir"):
        if flag in args[:-1]:
            site = args[args.index(flag) + 1]
    session.run("mkdocs", "build", "--strict", *args, env={"NO_MKDOCS_2_WARNING": "1"})
    session.run("python", "-m", "minikernel.site.linkcheck", site)


@nox.session(default=False)
def serve(session: nox.Session) -> None:
    """Build and serve the site on http://127.0.0.1:8000 while you edit."""
    _install_cpu(session, "docs")
    session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", *session.posargs)


@nox.session(default=False, venv_params=["--system-site-packages"])
def labs(session: nox.Session) -> None:
    """Run the labs on a GPU and write labs/results/<gpu>/ (`nox -s labs -- vector_add`).

    Reuses the machine's PyTorch: the venv sees system site-packages, and with `--no-venv`
    nothing is installed at all (the package is imported from src/).
    """
    env = {}
    if isinstance(session.virtualenv, nox.virtualenv.PassthroughEnv):
        paths = [str(ROOT / "src"), os.environ.get("PYTHONPATH")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    else:
        session.install("-e", ".")
    session.run("python", "-m", "minikernel.bench.run_labs", *session.posargs, env=env)
