"""What the side-probe scripts of labs/ (``labs/probe_*.py``) share: timing a handful of
candidate launches against each other, a peer that may refuse, and the table they print.

A probe answers a design question on one GPU (which launch shape, which variant of a kernel)
and prints; it writes no results file, and its figures never reach a page: the course's numbers
come from ``nox -s labs``. Candidates are timed in interleaved rounds (every candidate once per
round, the best median kept), so that a drift of the GPU's clock during the probe touches them
all alike instead of whichever ran last.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .timing import time_gpu


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


def report(title: str, ideal_us: float, best: dict[str, float], width: int = 28) -> None:
    """Print the candidates fastest first, each with its time and the fraction of the ceiling
    (``ideal_us``: the byte model's time at the copy ceiling)."""
    print(f"{title}: the model at the ceiling {ideal_us:.1f} us")
    for name, us in sorted(best.items(), key=lambda kv: kv[1]):
        print(f"  {name:{width}s} {us:9.1f} us  {ideal_us / us:.3f} of the ceiling", flush=True)
