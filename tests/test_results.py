"""The results contract: schema validation, atomic writes, provenance helpers, no-GPU labs."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minikernel.bench.env import commit_info, gpu_slug
from minikernel.bench.results import RESULTS_DIR, ResultsError, validate, write_atomic
from minikernel.kernels.vector_add import VARIANTS

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted(RESULTS_DIR.glob("*/*.json"))


def minimal_results() -> dict:
    """A schema-valid results document. Its numbers are placeholders for testing the format,
    not measurements, and nothing outside the tests reads them."""
    return {
        "schema": 1,
        "op": "vector_add",
        "env": {
            "gpu": "NVIDIA Test GPU",
            "cc": "9.0",
            "sms": 1,
            "driver": "0",
            "cuda": "0",
            "torch": "0",
            "triton": "0",
            "python": "3.11.0",
            "date": "2026-01-01T00:00:00Z",
            "commit": "0000000",
            "dirty": False,
        },
        "ceilings": {"copy_GBps": 1.0, "bf16_mm_TFLOPs": 1.0},
        "records": [
            {
                "impl": "cuda:1",
                "shape": [4],
                "dtype": "float32",
                "pass": "fwd",
                "median_us": 2.0,
                "p20_us": 1.0,
                "p80_us": 3.0,
                "bytes": 48,
                "flops": None,
                "GBps": 1.0,
                "TFLOPs": None,
                "frac_of_ceiling": 1.0,
                "source_hash": VARIANTS["cuda:1"].source_hash(),
                "max_rel_err": 0.0,
            }
        ],
    }


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_results_are_valid(path: Path) -> None:
    data = json.loads(path.read_text())
    validate(data, where=str(path))
    assert path.parent.name == gpu_slug(data["env"]["gpu"]), "file is in another GPU's folder"
    assert data["op"] == path.stem


NCU_REC = {
    "impl": "cuda:1",
    "shape": [1024],
    "dtype": "float32",
    "ncu_version": "0",
    "metrics": {},
    "excerpt": "(placeholder)",
}


def test_schema_takes_an_ncu_excerpt_of_either_pass() -> None:
    data = minimal_results()
    data["ncu"] = [NCU_REC, dict(NCU_REC, **{"pass": "bwd"})]
    validate(data)


def test_lab_records_the_profiled_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lab.profile(pass_="bwd") stores the pass with the excerpt, and config the pinned launch;
    without them the excerpt has neither key (a forward, as every older excerpt)."""
    from minikernel.bench import lab as lab_mod
    from minikernel.bench import ncu

    calls = []

    def fake_profile(op, impl, shape, dtype, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(kwargs)
        return dict(NCU_REC, impl=impl, shape=list(shape), dtype=dtype)

    monkeypatch.setattr(ncu, "profile", fake_profile)
    lab = lab_mod.Lab.__new__(lab_mod.Lab)
    lab.op, lab.ncu, lab.spent = "vector_add", [], dict.fromkeys(lab_mod.SPENT, 0.0)
    lab.profile("cuda:1", [8, 8], "float32", extra_args=["bwd"], pass_="bwd", config={"k": 1})
    lab.profile("cuda:1", [4, 4], "float32")
    assert calls[0]["extra_args"] == ["bwd"]
    assert lab.ncu[0]["pass"] == "bwd" and lab.ncu[0]["config"] == {"k": 1}
    assert "pass" not in lab.ncu[1] and "config" not in lab.ncu[1]
    assert lab.spent["ncu"] > 0 and lab.spent["timing"] == 0  # both calls counted as ncu time


def test_spent_line_says_where_a_labs_time_went() -> None:
    """The summary a lab prints at save(): each kind that took time, in SPENT's order, then
    the rest of the run; kinds with no time are left out, and bad input is refused."""
    from minikernel.bench.lab import spent_line

    line = spent_line("rmsnorm", {"idle": 60.0, "timing": 200.4, "loops": 0.0, "ncu": 150.0}, 500)
    assert line == (
        "[rmsnorm] 500 s in this lab: 60 s idle before cases, 200 s timing, "
        "150 s Nsight Compute, 90 s the rest (checks, compiles, setup)"
    )
    assert spent_line("x", {}, 3.0).endswith(": 3 s the rest (checks, compiles, setup)")
    with pytest.raises(ValueError, match="unknown kinds"):
        spent_line("x", {"nap": 1.0}, 3.0)
    with pytest.raises(ValueError, match="negative"):
        spent_line("x", {"ncu": -1.0}, 3.0)


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda d: d["env"].pop("commit"), "'commit' is a required property"),
        (lambda d: d["records"][0].update(dtype="int8"), "records/0/dtype"),
        (lambda d: d["records"][0].update(median_us=-1.0), "records/0/median_us"),
        (lambda d: d["records"][0].update(source_hash="abc"), "records/0/source_hash"),
        (lambda d: d.update(records=[]), "records"),
        (lambda d: d["records"][0].update({"pass": "sideways"}), "records/0/pass"),
        (lambda d: d.update(ncu=[dict(NCU_REC, **{"pass": "fwd+bwd"})]), "ncu/0/pass"),
    ],
    ids=[
        "no-commit",
        "bad-dtype",
        "negative-time",
        "bad-hash",
        "no-records",
        "bad-pass",
        "bad-ncu-pass",
    ],
)
def test_schema_rejects_bad_documents(mutate, message: str) -> None:  # type: ignore[no-untyped-def]
    data = minimal_results()
    mutate(data)
    with pytest.raises(ResultsError, match=message):
        validate(data)


def test_write_is_atomic(tmp_path: Path) -> None:
    path = tmp_path / "h200" / "vector_add.json"
    write_atomic(minimal_results(), path)
    before = path.read_bytes()
    broken = copy.deepcopy(minimal_results())
    broken["records"][0]["median_us"] = object()  # not JSON-serialisable: dies mid-write
    broken["env"]["commit"] = "1111111"
    with pytest.raises((TypeError, ResultsError)):
        write_atomic(broken, path)
    assert path.read_bytes() == before
    assert [p.name for p in path.parent.iterdir()] == ["vector_add.json"], "temp file left"


def test_invalid_document_is_never_written(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    data = minimal_results()
    data["records"] = []
    with pytest.raises(ResultsError):
        write_atomic(data, path)
    assert not path.exists()


@pytest.mark.parametrize(
    ("name", "slug"),
    [
        ("NVIDIA H200", "h200"),
        ("NVIDIA GeForce RTX 5090", "rtx-5090"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA H100 80GB HBM3", "h100-80gb-hbm3"),
    ],
)
def test_gpu_slug(name: str, slug: str) -> None:
    assert gpu_slug(name) == slug


def test_commit_info_from_environment_without_git(monkeypatch: pytest.MonkeyPatch) -> None:
    import minikernel.bench.env as env

    monkeypatch.setattr(env, "_git", lambda *a: None)
    monkeypatch.setenv("MINIKERNEL_COMMIT", "abcdef1234567890")
    monkeypatch.setenv("MINIKERNEL_DIRTY", "0")
    assert commit_info() == ("abcdef123456", False)
    monkeypatch.delenv("MINIKERNEL_COMMIT")
    assert commit_info() == ("unknown", True)


@pytest.mark.parametrize(
    "bad", ["19bf040e1", "abcdef123456xyz", "ABCDEF123456", "HEAD", " abcdef123456"]
)
def test_commit_from_environment_must_be_a_hash(monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    """A cut or mistyped MINIKERNEL_COMMIT is refused before anything is measured (the
    first: nine digits, typed by hand on a runner once, and written into a results file)."""
    import minikernel.bench.env as env

    monkeypatch.setattr(env, "_git", lambda *a: None)
    monkeypatch.setenv("MINIKERNEL_COMMIT", bad)
    with pytest.raises(ValueError, match="MINIKERNEL_COMMIT"):
        commit_info()


def test_commit_from_environment_wins_over_a_stale_git(monkeypatch: pytest.MonkeyPatch) -> None:
    """A runner's copied .git can name an older commit than the files it measures."""
    import minikernel.bench.env as env

    monkeypatch.setattr(env, "_git", lambda *a: "0123456789ab" if a[0] == "rev-parse" else " M x")
    monkeypatch.setenv("MINIKERNEL_COMMIT", "abcdef1234567890")
    monkeypatch.setenv("MINIKERNEL_DIRTY", "0")
    assert commit_info() == ("abcdef123456", False)
    monkeypatch.delenv("MINIKERNEL_COMMIT")
    assert commit_info() == ("0123456789ab", True)  # no override: git's answer


def test_labs_without_gpu_check_then_exit_2_and_leave_results(tmp_path: Path) -> None:
    """`nox -s labs` on a CPU machine: checks run, nothing is timed, results are untouched."""
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        # Decided before the run: on a GPU machine the lab would time for real (minutes).
        pytest.skip("this machine has a GPU")
    before = {p: p.read_bytes() for p in COMMITTED}
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), MINIKERNEL_RESULTS_DIR=str(tmp_path))
    env.pop("TRITON_INTERPRET", None)
    proc = subprocess.run(
        [sys.executable, "-m", "minikernel.bench.run_labs", "vector_add"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    if "No CUDA GPU" not in proc.stdout + proc.stderr:
        pytest.skip("this machine has a GPU")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "all correct" in proc.stdout
    assert "nothing was timed" in proc.stderr
    assert {p: p.read_bytes() for p in COMMITTED} == before
    assert not any(tmp_path.iterdir())


def test_labs_stop_before_measuring_without_what_saving_needs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lab validates its results file with jsonschema only at its end; `nox -s labs --no-venv`
    on a machine without it must stop at once, naming it, before any lab runs."""
    import importlib.util

    pytest.importorskip("torch")
    from minikernel.bench import run_labs

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "jsonschema" else real(name)
    )
    ran: list[object] = []
    monkeypatch.setattr(run_labs.subprocess, "run", lambda *a, **k: ran.append(a))
    assert run_labs.main(["vector_add"]) == 1
    err = capsys.readouterr().err
    assert "jsonschema not installed" in err and "pip install jsonschema" in err
    assert ran == []  # no lab started


def test_host_cost_of_a_call_is_an_optional_non_negative_field() -> None:
    data = minimal_results()
    validate(data)  # older results have no host_us
    data["records"][0]["host_us"] = 12.5
    validate(data)
    data["records"][0]["host_us"] = -1.0
    with pytest.raises(ResultsError):
        validate(data)


@pytest.mark.gpu
def test_time_gpu_times_the_gpu_whatever_the_host_costs() -> None:
    """time_gpu measures what issuing one call costs the host, then queues every timed call
    behind a GPU-side lead longer than that: a call whose host side sleeps 2 ms is still timed
    at its GPU time (and marked host-bound); a graph-replayed call carries no host cost."""
    import time

    import torch

    from minikernel.bench.timing import gpu_cycles_per_us, time_gpu
    from minikernel.site.data import is_host_bound

    assert 300 < gpu_cycles_per_us() < 5000  # a clock between 0.3 and 5 GHz
    x = torch.empty(64 << 20, device="cuda", dtype=torch.uint8)  # 64 MB: timed with events
    t = time_gpu(lambda: x.clone(), graph=False, rep_ms=20)
    assert t.method == "events+l2clean+lead" and t.host_us is not None and t.host_us > 0
    assert not is_host_bound({"median_us": t.median_us, "host_us": t.host_us})

    def host_heavy() -> torch.Tensor:
        time.sleep(0.002)  # 2 ms of host work per call, far more than the copy on the GPU
        return x.clone()

    slow = time_gpu(host_heavy, graph=False, rep_ms=20)
    assert slow.host_us is not None and slow.host_us >= 2000
    # Without the lead this was the host's 2 ms; with it, the copy's time (a few tens of us).
    assert slow.median_us < 2 * t.median_us + 20, (slow, t)
    assert is_host_bound({"median_us": slow.median_us, "host_us": slow.host_us})
    replay = time_gpu(lambda: x[:4096].clone(), graph=True, rep_ms=20)
    assert replay.method == "cudagraph" and replay.host_us is None


def _bare_lab(lab_mod):  # type: ignore[no-untyped-def]
    lab = lab_mod.Lab.__new__(lab_mod.Lab)
    lab.op, lab.ncu, lab.spent = "rmsnorm", [], dict.fromkeys(lab_mod.SPENT, 0.0)
    return lab


def test_lab_profile_many_keeps_the_order_and_what_each_case_records(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Lab.profile_many: one batch for the cases, in their order, each excerpt with its own
    pass and config; a lone case goes through profile() (no batch, no marker)."""
    from minikernel.bench import lab as lab_mod
    from minikernel.bench import ncu

    batches, alone = [], []

    def fake_many(op, cases):  # type: ignore[no-untyped-def]
        batches.append(cases)
        return [
            dict(NCU_REC, impl=c["impl"], shape=list(c["shape"]), dtype=c["dtype"]) for c in cases
        ]

    def fake_profile(op, impl, shape, dtype, **kwargs):  # type: ignore[no-untyped-def]
        alone.append(impl)
        return dict(NCU_REC, impl=impl, shape=list(shape), dtype=dtype)

    monkeypatch.setattr(ncu, "profile_many", fake_many)
    monkeypatch.setattr(ncu, "profile", fake_profile)
    lab = _bare_lab(lab_mod)
    recs = lab.profile_many(
        [
            {
                "impl": "cuda:3",
                "shape": [8, 8],
                "dtype": "float32",
                "extra_args": ["bwd"],
                "pass_": "bwd",
            },
            {"impl": "quack", "shape": [4, 4], "dtype": "bfloat16", "config": {"k": 2}},
        ]
    )
    assert [r["impl"] for r in recs] == ["cuda:3", "quack"] == [r["impl"] for r in lab.ncu]
    assert recs[0]["pass"] == "bwd" and "config" not in recs[0]
    assert recs[1]["config"] == {"k": 2} and "pass" not in recs[1]
    assert all("pass_" not in c and "config" not in c for c in batches[0])  # ncu never sees them
    assert batches[0][0]["extra_args"] == ["bwd"] and alone == []
    lab.profile_many([{"impl": "cuda:1", "shape": [2], "dtype": "float32"}])
    assert alone == ["cuda:1"] and len(batches) == 1
    with pytest.raises(ValueError, match="unknown keys"):
        lab.profile_many([{"impl": "cuda:1", "shape": [2], "dtype": "float32", "env": {}}] * 2)


def test_lab_profile_many_falls_back_to_one_case_at_a_time(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A batch that fails (a case crashed its process, or the rows could not be split) is
    profiled case by case: only the case that fails alone too is lost, and only with
    skip_failed; without it, its error is raised."""
    from minikernel.bench import lab as lab_mod
    from minikernel.bench import ncu

    def failing_many(op, cases):  # type: ignore[no-untyped-def]
        raise RuntimeError("ncu batch: 1 markers for 2 cases")

    def fake_profile(op, impl, shape, dtype, **kwargs):  # type: ignore[no-untyped-def]
        if impl == "bad":
            raise RuntimeError("ncu failed for bad")
        return dict(NCU_REC, impl=impl, shape=list(shape), dtype=dtype)

    monkeypatch.setattr(ncu, "profile_many", failing_many)
    monkeypatch.setattr(ncu, "profile", fake_profile)
    cases = [
        {"impl": "good", "shape": [2], "dtype": "float32"},
        {"impl": "bad", "shape": [2], "dtype": "float32"},
    ]
    lab = _bare_lab(lab_mod)
    recs = lab.profile_many(cases, skip_failed=True)
    assert recs[0]["impl"] == "good" and recs[1] is None
    assert [r["impl"] for r in lab.ncu] == ["good"]
    with pytest.raises(RuntimeError, match="ncu failed for bad"):
        _bare_lab(lab_mod).profile_many(cases)


def test_save_says_which_implementations_the_run_lost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A lab run that replaces a results file with records of an implementation it has none of
    (a peer not installed on the runner, say) still writes its file, and says which ones and how
    to put the previous file back; a run with every implementation says nothing of the kind,
    and a first run (no file yet) neither."""
    import time

    from minikernel.bench import lab as lab_mod
    from minikernel.bench.results import dropped_impls, results_path

    data = minimal_results()
    before = copy.deepcopy(data)
    before["records"].append(
        dict(data["records"][0], impl="quack", source_hash="pkg:quack-kernels==0.6.5")
    )
    path = results_path("vector_add", gpu_slug(data["env"]["gpu"]), tmp_path)
    assert dropped_impls(path, data["records"]) == []  # no file yet
    lab = lab_mod.Lab.__new__(lab_mod.Lab)
    lab.op, lab.root, lab.env, lab.ceilings = "vector_add", tmp_path, data["env"], data["ceilings"]
    lab.records, lab.ncu, lab.duels, lab.extra = data["records"], [], [], {}
    lab.spent, lab.started = dict.fromkeys(lab_mod.SPENT, 0.0), time.monotonic()
    lab.save()
    assert "note:" not in capsys.readouterr().out  # a first run
    write_atomic(before, path)
    assert dropped_impls(path, data["records"]) == ["quack"]
    lab.save()
    out = capsys.readouterr().out
    assert "had records of quack, and this run has none" in out and "git checkout" in out
    assert json.loads(path.read_text())["records"] == data["records"]  # written all the same
    lab.save()  # the file it replaces now is the last run's: nothing lost
    assert "note:" not in capsys.readouterr().out
    path.write_text("{not json")
    assert dropped_impls(path, data["records"]) == []
