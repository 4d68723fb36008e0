"""What the side-probe scripts of labs/ (``labs/probe_*.py``) share: timing a handful of
candidate launches against each other, a peer that may refuse, and the table they print.

A probe answers a design question on one GPU (which launch shape, which variant of a kernel)
and prints; it writes no results file, and its figures never reach a page: the course's numbers
come from ``nox -s labs``. Candidates are timed in interleaved rounds (every candidate once per
round, the best median kept), so that a drift of the GPU's clock during the probe touches them
all alike instead of whichever ran last.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .timing import time_gpu


def probe_parser(
    doc: str, lengths: Iterable[int] | None = None, rounds: int = 5
) -> argparse.ArgumentParser:
    """The command line every probe shares: the first line of its docstring ``doc`` as the
    description, ``--rounds`` (interleaved rounds per shape, ``rounds`` by default) and, given
    the row ``lengths`` it times, ``--n`` to time only some of them. A probe adds its own
    options to the parser it gets back."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds per shape")
    if lengths is not None:
        parser.add_argument(
            "--n", type=int, nargs="*", choices=sorted(set(lengths)), help="row lengths"
        )
    return parser


def gpu_ceiling(script: str) -> float:
    """The copy ceiling in GB/s, measured now and printed, that a probe's fractions are of; a
    probe run without a CUDA GPU stops here, naming ``script``."""
    import torch

    from .ceilings import copy_GBps

    if not torch.cuda.is_available():
        raise SystemExit(f"{script}: needs a CUDA GPU")
    gbps = copy_GBps()
    print(f"copy ceiling {gbps:.0f} GB/s", flush=True)
    return gbps


def write_variants(texts: dict[str, str], folder: Path, stem: str) -> dict[str, Path]:
    """Each edited copy of a kernel file (name -> text) written to ``folder`` as
    ``{stem}_{name}.cu``, by name: the files a probe's candidates launch from (launch_from).
    Headers come from CUDA_DIR, so the copies compile from any folder."""
    files = {}
    for name, text in texts.items():
        files[name] = folder / f"{stem}_{name}.cu"
        files[name].write_text(text)
    return files


@contextmanager
def kernel_source(module: Any, text: str, name: str) -> Iterator[Path]:
    """Within the block, ``module.CU_FILE`` (where the module's launchers load kernels from)
    is a temporary file ``name`` holding ``text``, an edited copy of its kernel source; the
    real path comes back afterwards, whatever happens. Headers come from CUDA_DIR, so the copy
    compiles from any folder."""
    real = module.CU_FILE
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_text(text)
        module.CU_FILE = path
        try:
            yield path
        finally:
            module.CU_FILE = real


def launch_from(module: Any, path: Path, launch: Callable[[], Any]) -> Callable[[], Any]:
    """A callable that runs ``launch`` with ``module.CU_FILE`` (where the module's launchers load
    kernels from) set to ``path``, an edited copy of its kernel source, and back afterwards.
    The module caches kernel handles by name (``module._kernel``, a functools cache), so the
    cache is cleared on each switch: a copy's kernel and the shipped one share their names.
    Candidates built on different copies can then be raced against each other."""

    def run() -> Any:
        real = module.CU_FILE
        module.CU_FILE = path
        module._kernel.cache_clear()
        try:
            return launch()
        finally:
            module.CU_FILE = real
            module._kernel.cache_clear()

    return run


def race(
    cands: dict[str, Callable[[], Any]],
    rounds: int,
    timer: Callable[[Callable[[], Any]], float] | None = None,
) -> dict[str, float]:
    """The best median time in µs of each candidate over ``rounds`` interleaved rounds.
    ``timer`` (one call's median in µs) defaults to :func:`time_gpu` with events."""
    if rounds < 1:
        raise ValueError(f"race: rounds must be at least 1, not {rounds}")
    if timer is None:

        def timer(fn: Callable[[], Any]) -> float:
            return time_gpu(fn, graph=False).median_us

    best = {name: float("inf") for name in cands}
    for _ in range(rounds):
        for name, fn in cands.items():
            best[name] = min(best[name], timer(fn))
    return best


def add_peer(cands: dict[str, Callable[[], Any]], name: str, make: Callable[[], Any]) -> None:
    """Add the peer ``make()`` builds to ``cands`` after one call, or say why it cannot run
    (not installed, or it refuses the shape: a probe goes on without it)."""
    try:
        fn = make()
        fn()
    except Exception as exc:  # a probe: say why and go on
        print(f"  {name}: {type(exc).__name__}: {exc}")
        return
    cands[name] = fn


def admit(
    cands: dict[str, Callable[[], Any]],
    label: str,
    run: Callable[[], Any],
    ref: Any,
    tol: float,
    note: str = "",
    check: Callable[[], Any] | None = None,
) -> None:
    """Add candidate ``run`` to ``cands`` as ``label`` if one call's output is within ``tol`` of
    ``ref`` everywhere (the largest absolute difference; NaN fails); print the difference and ok
    or WRONG after ``note`` (its registers, say), or why the launch failed: a probe goes on with
    the candidates that work and never times a wrong one. ``check`` is the call to check when
    it is not ``run`` itself: the same launch into an output filled with NaN, so that elements
    a wrong kernel leaves unwritten cannot pass on what an earlier candidate wrote there."""
    try:
        got = (check or run)()
    except Exception as exc:  # a probe: say why a launch failed and go on
        print(f"  {label}: {type(exc).__name__}: {exc}")
        return
    err = float((got.float() - ref.float()).abs().max())
    ok = err <= tol  # False for NaN
    print(f"  {label}: {note}{', ' if note else ''}max diff {err:.3g} {'ok' if ok else 'WRONG'}")
    if ok:
        cands[label] = run


def report(title: str, ideal_us: float, best: dict[str, float], width: int = 28) -> None:
    """Print the candidates fastest first, each with its time and the fraction of the ceiling
    (``ideal_us``: the byte model's time at the copy ceiling)."""
    print(f"{title}: the model at the ceiling {ideal_us:.1f} us")
    for name, us in sorted(best.items(), key=lambda kv: kv[1]):
        print(f"  {name:{width}s} {us:9.1f} us  {ideal_us / us:.3f} of the ceiling", flush=True)


# Load hints a probe can swap into a kernel's 16-byte loads of x (the kernels load with
# load_vec_plain, common.cuh: ld.global.v4 with the default caching, which allocates in L1).
# Each is the asm body of the load: %0-%3 the four 32-bit words loaded, %4 the address.
_REGS = "{%0, %1, %2, %3}, [%4]"
LOAD_HINTS = {
    "cg": f"ld.global.cg.v4.u32 {_REGS};",  # cached in L2 only, not L1
    "na": f"ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {_REGS};",  # no L1 line, 256 B to L2
    "lu": f"ld.global.lu.v4.u32 {_REGS};",  # last use: the line is not wanted again
    # An L2 policy that evicts these lines first (each x is read once), made per load.
    "ef": "{ .reg .b64 pol; createpolicy.fractional.L2::evict_first.b64 pol, 1.0; "
    f"ld.global.L2::cache_hint.v4.u32 {_REGS}, pol; }}",
}
INCLUDE = '#include "common.cuh"\n'


def with_load_hint(src: str, hint: str, lines: list[str]) -> str:
    """``src`` (a .cu file's text) with ``load_vec_probe``, a 16-byte load carrying LOAD_HINTS
    [hint], defined after its include of common.cuh, and each of ``lines`` (each found exactly
    once) calling it in place of ``load_vec_plain``. Raises ValueError naming what is missing."""
    if src.count(INCLUDE) != 1:
        raise ValueError(f"with_load_hint: no single {INCLUDE.strip()} to put the load after")
    helper = (
        "template <typename T> __device__ __forceinline__ Vec<T> load_vec_probe(const T* p) {\n"
        "    uint4 r;  // probe: a load with a cache hint\n"
        f'    asm volatile("{LOAD_HINTS[hint]}"\n'
        '                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));\n'
        "    return *reinterpret_cast<Vec<T>*>(&r);\n"
        "}\n"
    )
    out = src.replace(INCLUDE, INCLUDE + helper)
    for line in lines:
        if out.count(line) != 1 or "load_vec_plain(" not in line:
            raise ValueError(f"with_load_hint: not one line with load_vec_plain:\n{line}")
        out = out.replace(line, line.replace("load_vec_plain(", "load_vec_probe("))
    return out
