"""Close calls: two implementations timed against each other in interleaved rounds.

A lab times each implementation of a case once, in one window of about 0.1 s. Where ours and
the fastest peer come out within a per cent of each other, that window cannot say which is
faster: the same two kernels swap places from one run to the next (lab 02's long bf16 rows did,
by up to 0.8 %, with no change to either). A *duel* decides such a case with more evidence:

- ``rounds`` rounds, each timing both implementations back to back, the one that goes first
  alternating, so that whatever favours a position (the clock the GPU was left at) falls on
  each alike; the lab's idle before a heavy case (``cooldown_seconds``) comes before each round;
- each round is one paired comparison: which of the two had the shorter median in it;
- the first test is a sign test on those rounds: if the two were equally fast, which one wins a
  round would be a coin toss, so one side winning ``k`` of ``n`` rounds is "ahead" only when so
  lopsided a count would come up by chance at most ``ALPHA`` of the time (both sides counted).
  With 8 rounds that takes all 8; 7 of 8 happens by chance 7 % of the time, and stays "level".

The rounds of a duel share one set of buffers and one stretch of time, and at the copy ceiling
that matters: in the H200 runs the same kernel at the same shape timed up to 1 % apart in the
sweep and in its duel (other inputs and outputs, a minute later), more than the two kernels
differed within the duel. So a sign test alone would call a winner on a difference that
rounds of one setting reproduce and another setting does not. The verdict needs both: the
sign test, and a difference larger than ``margin``, how far either kernel's own time moved
between its sweep window and its duel (:func:`drift`). Otherwise the two are level.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping
from math import comb
from typing import Any

DUEL_ROUNDS = 8
"""Rounds per duel: the fewest at which a sign test can call a winner at ALPHA (8 of 8)."""
DUEL_WITHIN = 0.01
"""A lab duels the fastest of ours and the fastest peer of a case when their medians in its
sweep are within this fraction of each other, either way."""
DUEL_REP_MS = 50.0
"""The timing window of each implementation in each round."""
ALPHA = 0.05
"""The two-sided significance a sign test needs to call one side ahead."""
STATES = ("ahead", "level", "behind")


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided p-value of ``wins`` against ``losses`` under a fair coin (rounds that tied
    exactly left out): the chance of a split at least this lopsided either way."""
    if wins < 0 or losses < 0:
        raise ValueError(f"sign_test_p: counts must be 0 or more, got {wins} and {losses}")
    n = wins + losses
    if n == 0:
        return 1.0
    k = min(wins, losses)
    tail = sum(comb(n, i) for i in range(k + 1)) / 2**n
    return min(1.0, 2 * tail)


def drift(rounds_us: list[float], sweep_us: float) -> float:
    """How far a kernel's time moved from its sweep window to its duel: the median of its
    rounds over its sweep median, less one, in absolute value."""
    if not rounds_us or sweep_us <= 0:
        raise ValueError("drift: needs the rounds and a positive sweep median")
    return abs(statistics.median(rounds_us) / sweep_us - 1)


def verdict(
    a_us: list[float], b_us: list[float], alpha: float = ALPHA, margin: float = 0.0
) -> dict[str, Any]:
    """The verdict of ``a`` against ``b`` over paired rounds (a_us[i] and b_us[i] timed in
    the same round): ``state`` "ahead" (a faster) or "behind" when the sign test calls it at
    ``alpha`` *and* the median over rounds of b's time over a's (``ratio``, above 1: a faster)
    is further from 1 than ``margin``; "level" otherwise. Also ``wins`` (rounds a was faster),
    ``losses``, ``p``, ``sign`` (the sign test's call alone) and ``margin``. Raises ValueError
    on unpaired or empty lists."""
    if len(a_us) != len(b_us) or not a_us:
        raise ValueError(
            f"verdict: needs the same number of rounds on both sides, got {len(a_us)} "
            f"and {len(b_us)}"
        )
    if any(t <= 0 for t in (*a_us, *b_us)):
        raise ValueError("verdict: every time must be positive")
    if margin < 0:
        raise ValueError(f"verdict: margin must be 0 or more, not {margin}")
    wins = sum(a < b for a, b in zip(a_us, b_us, strict=True))
    losses = sum(a > b for a, b in zip(a_us, b_us, strict=True))
    p = sign_test_p(wins, losses)
    ratio = statistics.median(b / a for a, b in zip(a_us, b_us, strict=True))
    sign = "level"
    if p <= alpha:
        sign = "ahead" if wins > losses else "behind"
    state = sign if abs(ratio - 1) > margin else "level"
    return {
        "state": state,
        "sign": sign,
        "wins": wins,
        "losses": losses,
        "p": p,
        "ratio": ratio,
        "margin": margin,
    }


def duel_verdict(duel: dict[str, Any], records: list[dict[str, Any]]) -> dict[str, Any]:
    """The verdict of a duel record (ours, ``impls[0]``, against the peer) with its margin from
    ``records``: the larger :func:`drift` of the two, each against its own sweep record of the
    same case (no margin for one that has none). ``a`` and ``b`` name the two."""
    a, b = duel["impls"]
    margin = 0.0
    for impl in (a, b):
        for r in records:
            if (
                r["impl"] == impl
                and list(r["shape"]) == list(duel["shape"])
                and r["dtype"] == duel["dtype"]
                and r.get("pass", "fwd") == duel["pass"]
            ):
                margin = max(margin, drift(duel["median_us"][impl], r["median_us"]))
    v = verdict(duel["median_us"][a], duel["median_us"][b], margin=margin)
    return {"a": a, "b": b, "n": duel["rounds"], **v}


def run_rounds(
    runs: Mapping[str, Callable[[], Any]],
    rounds: int,
    timer: Callable[[Callable[[], Any]], float],
    before_round: Callable[[], None] = lambda: None,
) -> dict[str, Any]:
    """Time the two ``runs`` (name -> call) in ``rounds`` rounds with ``timer`` (one call's
    median in µs), alternating which goes first, ``before_round`` (the idle) before each.
    Returns ``us`` (name -> the per-round times, in round order) and ``first`` (who went first
    in each round)."""
    names = list(runs)
    if len(names) != 2:
        raise ValueError(f"a duel takes two implementations, got {names}")
    if rounds < 1:
        raise ValueError(f"a duel needs at least one round, not {rounds}")
    us: dict[str, list[float]] = {n: [] for n in names}
    first = []
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        first.append(order[0])
        before_round()
        for name in order:
            us[name].append(timer(runs[name]))
    return {"us": us, "first": first}


def close_call(
    records: list[dict[str, Any]],
    ours: Callable[[str], bool],
    peers: Callable[[str], bool],
    within: float = DUEL_WITHIN,
    **sel: Any,
) -> tuple[str, str] | None:
    """The fastest of ours and the fastest peer among the ``records`` that match ``sel``
    (shape, dtype, pass...), if their medians are within ``within`` of each other either way;
    None when they are further apart or one side has no record."""
    rows = [r for r in records if all(r.get(k) == v for k, v in sel.items())]
    mine = [r for r in rows if ours(r["impl"])]
    theirs = [r for r in rows if peers(r["impl"])]
    if not mine or not theirs:
        return None
    a = min(mine, key=lambda r: r["median_us"])
    b = min(theirs, key=lambda r: r["median_us"])
    lo, hi = sorted((a["median_us"], b["median_us"]))
    if hi > lo * (1 + within):
        return None
    return a["impl"], b["impl"]
