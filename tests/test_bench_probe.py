"""The probe helpers (minikernel.bench.probe) the side-probe scripts of labs/ share: the best of
interleaved rounds, a peer that refuses, the printed table. No GPU: the timer is a stand-in."""

from __future__ import annotations

import itertools

import pytest

from minikernel.bench.probe import add_peer, race, report


def test_race_keeps_each_candidates_best_over_interleaved_rounds() -> None:
    order: list[str] = []
    times = {"a": itertools.cycle([5.0, 3.0, 4.0]), "b": itertools.cycle([2.0, 6.0, 7.0])}
    cands = {name: (lambda name=name: name) for name in times}

    def timer(fn):  # type: ignore[no-untyped-def]
        name = fn()
        order.append(name)
        return next(times[name])

    assert race(cands, 3, timer) == {"a": 3.0, "b": 2.0}
    assert order == ["a", "b"] * 3  # every candidate once per round, in the same order
    with pytest.raises(ValueError, match="at least 1"):
        race(cands, 0, timer)


def test_add_peer_calls_once_and_skips_a_refusal(capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[int] = []
    cands: dict = {}
    add_peer(cands, "ok", lambda: lambda: calls.append(1))
    assert list(cands) == ["ok"] and calls == [1]

    def refuses() -> None:
        raise ValueError("rows over 65536")

    add_peer(cands, "liger", lambda: refuses)
    assert list(cands) == ["ok"]
    assert "liger: ValueError: rows over 65536" in capsys.readouterr().out


def test_report_sorts_fastest_first_with_the_fraction(capsys: pytest.CaptureFixture[str]) -> None:
    report("32768 x 1024 bfloat16", 50.0, {"slow": 100.0, "fast": 62.5})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "32768 x 1024 bfloat16: the model at the ceiling 50.0 us"
    assert lines[1].split() == ["fast", "62.5", "us", "0.800", "of", "the", "ceiling"]
    assert lines[2].split()[0] == "slow" and lines[2].split()[3] == "0.500"
