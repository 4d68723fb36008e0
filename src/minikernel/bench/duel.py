"""Close calls: two implementations timed against each other in interleaved rounds.

A lab times each implementation of a case once, in one window of about 0.1 s. Where ours and
the fastest peer come out within a per cent of each other, that window cannot say which is
faster: the same two kernels swap places from one run to the next (lab 02's long bf16 rows did,
by up to 0.8 %, with no change to either). A *duel* decides such a case with more evidence:

- ``rounds`` rounds, each timing both implementations back to back, the one that goes first
  alternating, so that whatever favours a position (the clock the GPU was left at) falls on
  each alike; the lab's idle before a heavy case (``cooldown_seconds``) comes before each round;
- each round is one paired comparison: which of the two had the shorter median in it;
- the verdict is a sign test on those rounds: if the two were equally fast, which one wins a
  round would be a coin toss, so one side winning ``k`` of ``n`` rounds is "ahead" only when so
  lopsided a count would come up by chance at most ``ALPHA`` of the time (both sides counted).
  With 8 rounds that takes all 8; 7 of 8 happens by chance 7 % of the time, and stays "level".

The verdict never looks at how large the difference is, only at whether it holds round after
round; the median of the per-round ratios says how large it is.
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


def verdict(a_us: list[float], b_us: list[float], alpha: float = ALPHA) -> dict[str, Any]:
    """The sign test of ``a`` against ``b`` over paired rounds (a_us[i] and b_us[i] timed in
    the same round): ``state`` "ahead" (a faster), "behind" or "level"; ``wins`` (rounds a was
    faster), ``losses``, ``p``, and ``ratio``, the median over rounds of b's time over a's
    (above 1: a faster). Raises ValueError on unpaired or empty lists."""
    if len(a_us) != len(b_us) or not a_us:
        raise ValueError(
            f"verdict: needs the same number of rounds on both sides, got {len(a_us)} "
            f"and {len(b_us)}"
        )
    if any(t <= 0 for t in (*a_us, *b_us)):
        raise ValueError("verdict: every time must be positive")
    wins = sum(a < b for a, b in zip(a_us, b_us, strict=True))
    losses = sum(a > b for a, b in zip(a_us, b_us, strict=True))
    p = sign_test_p(wins, losses)
    state = "level"
    if p <= alpha:
        state = "ahead" if wins > losses else "behind"
    ratio = statistics.median(b / a for a, b in zip(a_us, b_us, strict=True))
    return {"state": state, "wins": wins, "losses": losses, "p": p, "ratio": ratio}


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
