"""Close calls (minikernel.bench.duel): the sign test, the interleaved rounds, which cases a lab
duels, the record it writes and how the site reads it. No GPU: the timers here are stand-ins
whose numbers are placeholders for the logic, not measurements."""

from __future__ import annotations

import copy
import itertools
import time
from pathlib import Path
from typing import Any

import pytest
from test_results import minimal_results

from minikernel.bench import duel
from minikernel.bench import lab as lab_mod
from minikernel.bench.results import validate
from minikernel.site import render
from minikernel.site.data import ResultsFile


@pytest.mark.parametrize(
    ("wins", "losses", "p"),
    [
        (8, 0, 2 / 256),  # all eight: 1 in 128 either way
        (0, 8, 2 / 256),
        (7, 1, 2 * 9 / 256),  # seven of eight: 7 %, not enough at 5 %
        (4, 4, 1.0),
        (0, 0, 1.0),  # every round tied: no evidence either way
        (9, 1, 2 * 11 / 1024),
    ],
)
def test_sign_test_p_is_the_two_sided_binomial_tail(wins: int, losses: int, p: float) -> None:
    assert duel.sign_test_p(wins, losses) == pytest.approx(p)


def test_sign_test_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match="0 or more"):
        duel.sign_test_p(-1, 3)


def test_eight_rounds_need_all_eight_to_call_a_winner() -> None:
    """The smallest count that is 'ahead' at ALPHA with DUEL_ROUNDS rounds is all of them: the
    docstring's claim, checked against the test itself rather than stated."""
    n = duel.DUEL_ROUNDS
    decisive = [k for k in range(n + 1) if duel.sign_test_p(k, n - k) <= duel.ALPHA]
    assert decisive == [0, n]


def test_verdict_states() -> None:
    a = [10.0] * 8
    faster = [10.5] * 8  # b slower in every round: a ahead
    v = duel.verdict(a, faster)
    assert (v["state"], v["wins"], v["losses"]) == ("ahead", 8, 0)
    assert v["ratio"] == pytest.approx(1.05)
    assert duel.verdict(faster, a)["state"] == "behind"
    seven = [10.5] * 7 + [9.5]  # a ahead in seven rounds of eight: level
    v = duel.verdict(a, seven)
    assert (v["state"], v["wins"], v["losses"]) == ("level", 7, 1)
    tied = duel.verdict(a, list(a))  # exact ties count for neither side
    assert (tied["state"], tied["wins"], tied["losses"], tied["p"]) == ("level", 0, 0, 1.0)


def test_verdict_ignores_the_size_of_a_lead_that_does_not_hold() -> None:
    """One round far ahead and the rest behind is not 'ahead': the test counts rounds."""
    a = [5.0] + [10.1] * 7
    b = [10.0] * 8
    v = duel.verdict(a, b)
    assert v["state"] == "level" and v["wins"] == 1 and v["ratio"] < 1


def test_a_lead_inside_the_margin_is_level() -> None:
    """Ahead in every round by 0.5 %, but one of the two kernels moved 1 % between its sweep
    window and the duel: the difference is smaller than what the setting alone does to a
    kernel, so the two are level; past the margin, the sign test's call stands."""
    a, b = [10.0] * 8, [10.05] * 8
    v = duel.verdict(a, b, margin=0.01)
    assert (v["sign"], v["state"]) == ("ahead", "level")
    assert duel.verdict(a, b, margin=0.001)["state"] == "ahead"
    assert duel.verdict(b, a, margin=0.001)["state"] == "behind"
    with pytest.raises(ValueError, match="margin"):
        duel.verdict(a, b, margin=-0.1)


def test_drift_and_the_margin_of_a_duel_record() -> None:
    assert duel.drift([10.1, 10.1, 10.3], 10.0) == pytest.approx(0.01)
    with pytest.raises(ValueError, match="sweep median"):
        duel.drift([10.0], 0.0)
    rec = {
        "impls": ["cuda:2", "quack"],
        "shape": [8, 1024],
        "dtype": "float32",
        "pass": "fwd",
        "rounds": 8,
        "median_us": {"cuda:2": [10.0] * 8, "quack": [10.05] * 8},
    }
    # quack's sweep window had it at 10.15: it moved 1 % by the duel, more than the 0.5 % lead
    sweep = [_rec("cuda:2", 10.0), _rec("quack", 10.15), _rec("quack", 9.0, n=4096)]
    v = duel.duel_verdict(rec, sweep)
    assert v["margin"] == pytest.approx(1 - 10.05 / 10.15)
    assert (v["a"], v["b"], v["sign"], v["state"]) == ("cuda:2", "quack", "ahead", "level")
    steady = [_rec("cuda:2", 10.0), _rec("quack", 10.05)]  # neither moved: the lead stands
    assert duel.duel_verdict(rec, steady)["state"] == "ahead"
    assert duel.duel_verdict(rec, [])["margin"] == 0.0  # no sweep record: no margin


@pytest.mark.parametrize(
    ("a", "b", "match"),
    [([1.0, 2.0], [1.0], "same number"), ([], [], "same number"), ([1.0], [0.0], "positive")],
)
def test_verdict_rejects_bad_rounds(a: list[float], b: list[float], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        duel.verdict(a, b)


def test_rounds_alternate_who_goes_first_and_rest_before_each() -> None:
    calls: list[str] = []
    rests: list[int] = []
    runs = {"ours": lambda: "ours", "peer": lambda: "peer"}

    def timer(fn: Any) -> float:
        calls.append(fn())
        return 1.0

    got = duel.run_rounds(runs, 4, timer, lambda: rests.append(len(calls)))
    assert calls == ["ours", "peer", "peer", "ours", "ours", "peer", "peer", "ours"]
    assert got["first"] == ["ours", "peer", "ours", "peer"]
    assert rests == [0, 2, 4, 6]  # the idle comes before each round, not between the two
    assert got["us"] == {"ours": [1.0] * 4, "peer": [1.0] * 4}


def _position_biased_timer() -> Any:
    """Two equally fast kernels on a GPU that favours whichever is timed first in a round: the
    second call of each pair comes out 1 % slower (the clock its predecessor left it)."""
    position = itertools.cycle([0, 1])

    def timer(fn: Any) -> float:
        return 10.0 * (1.01 if next(position) else 1.0)

    return timer


def test_alternating_order_keeps_a_position_bias_from_naming_a_winner() -> None:
    """The fixture that must be rejected: with one fixed order, the bias above hands the first
    kernel every round (a wrong 'ahead'); the duel's alternation splits the rounds 4 to 4."""
    runs = {"ours": lambda: None, "peer": lambda: None}
    fixed_timer = _position_biased_timer()
    fixed = [
        (fixed_timer(runs["ours"]), fixed_timer(runs["peer"])) for _ in range(duel.DUEL_ROUNDS)
    ]  # ours always first
    wrong = duel.verdict([r[0] for r in fixed], [r[1] for r in fixed])
    assert wrong["state"] == "ahead"  # what a fixed order would conclude
    got = duel.run_rounds(runs, duel.DUEL_ROUNDS, _position_biased_timer())
    v = duel.verdict(got["us"]["ours"], got["us"]["peer"])
    assert (v["state"], v["wins"], v["losses"]) == ("level", 4, 4)


def test_run_rounds_takes_two() -> None:
    with pytest.raises(ValueError, match="two implementations"):
        duel.run_rounds({"a": lambda: None}, 8, lambda fn: 1.0)
    with pytest.raises(ValueError, match="at least one round"):
        duel.run_rounds({"a": lambda: None, "b": lambda: None}, 0, lambda fn: 1.0)


def _rec(impl: str, us: float, n: int = 1024, pass_: str = "fwd", **kw: Any) -> dict[str, Any]:
    base = minimal_results()["records"][0]
    return dict(base, impl=impl, shape=[8, n], median_us=us, **{"pass": pass_}, **kw)


OURS = lambda i: i.startswith(("cuda:", "triton:"))
PEERS = lambda i: i in ("quack", "liger", "torch:eager")


def test_close_call_pairs_the_fastest_of_each_side_within_the_margin() -> None:
    recs = [_rec("cuda:1", 10.0), _rec("cuda:2", 9.95), _rec("quack", 10.0), _rec("liger", 12.0)]
    assert duel.close_call(recs, OURS, PEERS, shape=[8, 1024]) == ("cuda:2", "quack")
    far = [_rec("cuda:2", 9.0), _rec("quack", 10.0)]  # 11 % apart: the sweep's window decides
    assert duel.close_call(far, OURS, PEERS, shape=[8, 1024]) is None
    behind = [_rec("cuda:2", 10.05), _rec("quack", 10.0)]  # ours a little behind: duelled too
    assert duel.close_call(behind, OURS, PEERS, shape=[8, 1024]) == ("cuda:2", "quack")
    alone = [_rec("cuda:2", 10.0)]
    assert duel.close_call(alone, OURS, PEERS, shape=[8, 1024]) is None


def _bare_lab(records: list[dict[str, Any]]) -> Any:
    lab = lab_mod.Lab.__new__(lab_mod.Lab)
    data = minimal_results()
    lab.op, lab.env, lab.ceilings = "vector_add", data["env"], data["ceilings"]
    lab.records, lab.ncu, lab.duels, lab.extra, lab.variants = records, [], [], {}, {}
    lab.spent, lab.started = dict.fromkeys(lab_mod.SPENT, 0.0), time.monotonic()
    return lab


def test_lab_finds_its_close_calls_case_by_case() -> None:
    recs = [
        _rec("cuda:2", 10.0, timing="cudagraph"),
        _rec("quack", 10.02, timing="cudagraph"),
        _rec("cuda:2", 20.0, pass_="bwd", timing="events+l2clean+lead"),
        _rec("quack", 30.0, pass_="bwd"),  # far apart: no duel
        _rec("cuda:2", 40.0, n=4096, timing="events+l2clean+lead"),
        _rec("liger", 40.1, n=4096, timing="events+l2clean+lead"),
    ]
    calls = _bare_lab(recs).close_calls(OURS, PEERS)
    assert [(c["shape"], c["pass_"], a, b) for c, a, b in calls] == [
        ([8, 1024], "fwd", "cuda:2", "quack"),
        ([8, 4096], "fwd", "cuda:2", "liger"),
    ]
    assert calls[0][0]["graph"] is True and calls[1][0]["graph"] is False
    assert calls[0][0]["bytes"] == recs[0]["bytes"]


def test_lab_duel_writes_a_valid_record(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """Lab.duel with the GPU's timer replaced: ours 1 % faster in every round is 'ahead', the
    record validates against the schema, and the site reads the same verdict back."""
    from minikernel.bench.timing import Timing

    graphs: list[bool] = []

    def fake_time_gpu(fn: Any, *, graph: bool, rep_ms: float) -> Timing:
        graphs.append(graph)
        us = fn()
        return Timing(us, us, us, "cudagraph" if graph else "events+l2clean+lead")

    monkeypatch.setattr(lab_mod, "time_gpu", fake_time_gpu)
    lab = _bare_lab([_rec("cuda:2", 9.9), _rec("quack", 10.0)])  # as the sweep had them
    case = {"shape": [8, 1024], "dtype": "float32", "pass_": "fwd", "bytes": 48, "flops": None}
    rec = lab.duel({"cuda:2": lambda: 9.9, "quack": lambda: 10.0}, **case, graph=True)
    assert graphs == [True] * 2 * duel.DUEL_ROUNDS  # both by the case's method, every round
    assert rec["impls"] == ["cuda:2", "quack"] and rec["timing"] == "cudagraph"
    assert rec["median_us"]["cuda:2"] == [9.9] * duel.DUEL_ROUNDS
    assert "cuda:2 faster in 8 of 8 rounds" in capsys.readouterr().out
    data = dict(minimal_results(), duels=lab.duels)
    validate(data)
    f = ResultsFile("vector_add", "test-gpu", Path("/x/test-gpu/vector_add.json"), data)
    sel = {"shape": [8, 1024], "dtype": "float32", "pass": "fwd", "impl": "quack"}
    assert render.check_duel(f, sel, "ahead")["wins"] == duel.DUEL_ROUNDS
    with pytest.raises(render.ClaimFailed, match="rewrite the sentence"):
        render.check_duel(f, sel, "level")
    with pytest.raises(render.ClaimFailed, match="no duel"):
        render.check_duel(f, dict(sel, shape=[8, 4096]), None)
    table = render.duels_table(f, "es", "r.json")
    assert "8 de 8" in table and "por delante" in table and "1,010×" in table


def test_a_duel_record_that_breaks_the_schema_is_refused() -> None:
    from minikernel.bench.results import ResultsError

    good = {
        "impls": ["cuda:2", "quack"],
        "shape": [8, 1024],
        "dtype": "float32",
        "pass": "fwd",
        "rounds": 2,
        "median_us": {"cuda:2": [1.0, 1.0], "quack": [1.0, 1.0]},
        "first": ["cuda:2", "quack"],
        "timing": "cudagraph",
        "source_hash": {"cuda:2": "sha256:0", "quack": "pkg:quack-kernels==0"},
    }
    validate(dict(minimal_results(), duels=[good]))
    for broken in (
        dict(good, impls=["cuda:2"]),
        dict(good, median_us={"cuda:2": [1.0], "quack": [0.0]}),
        {k: v for k, v in good.items() if k != "first"},
    ):
        with pytest.raises(ResultsError, match="duels"):
            validate(dict(minimal_results(), duels=[copy.deepcopy(broken)]))
