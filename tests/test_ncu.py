"""Parsing ncu's raw CSV into the fixed excerpt (no GPU needed: the CSV text is synthetic)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from minikernel.bench.ncu import format_excerpt, parse_raw_csv, summarize

# The shape of `ncu --csv --page raw --print-units base` output: a header row, a units row,
# then one row per kernel. Two kernels, as an eager op that launches two would give.
CSV = """==PROF== Connected to process 1
"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_selected_per_issue_active.ratio","smsp__average_warps_issue_stalled_wait_per_issue_active.ratio","l1tex__t_requests_pipe_lsu_mem_global_op_st.sum","l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"
"","","nsecond","byte","byte","%","","","","",""
"0","k1","3000","1,000","500","90","10","1","2","100","3200"
"1","k2","1000","200","100","50","2","1","4","100","400"
"""


def test_parse_and_summarize_two_kernels() -> None:
    rows = parse_raw_csv(CSV)
    assert [r["Kernel Name"] for r in rows] == ["k1", "k2"]
    m = summarize(rows)
    assert m["kernels"] == 2
    assert m["duration_ns"] == 4000
    assert (m["dram_bytes_read"], m["dram_bytes_write"]) == (1200, 600)
    assert m["dram_throughput_pct"] == (90 * 3000 + 50 * 1000) / 4000  # time-weighted
    assert m["top_stalls"][0]["reason"] == "long_scoreboard"
    assert all(s["reason"] != "selected" for s in m["top_stalls"])  # issuing is not a stall
    assert m["st_sectors_per_request"] == 18.0


def test_excerpt_compares_dram_bytes_with_the_model() -> None:
    text = format_excerpt(summarize(parse_raw_csv(CSV)), model_bytes=1800)
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in text.splitlines())
    assert rows["DRAM bytes / model"].strip() == "1.000"
    assert rows["global store sectors / request"].strip() == "18.00"


# The same two kernels with the work-per-byte metrics: instructions, issue slots, SM clock.
CSV_WORK = """"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum","smsp__inst_executed.sum","smsp__issue_active.avg.pct_of_peak_sustained_active","sm__cycles_elapsed.avg.per_second","l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum","l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"
"","","nsecond","byte","byte","inst","%","cycle/second","sector","sector"
"0","k1","3000","1,000","500","1,536","40","1,980,000,000","0","0"
"1","k2","1000","200","100","512","80","1,500,000,000","1,000","250"
"""


def test_excerpt_counts_instructions_per_byte() -> None:
    m = summarize(parse_raw_csv(CSV_WORK))
    assert m["warp_instructions"] == 2048  # summed over the kernels
    assert m["issue_active_pct"] == (40 * 3000 + 80 * 1000) / 4000  # time-weighted
    assert m["sm_clock_hz"] == (1.98e9 * 3000 + 1.5e9 * 1000) / 4000
    text = format_excerpt(m, model_bytes=2048)
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in text.splitlines())
    assert rows["warp instructions"].strip() == "2,048"
    assert rows["warp instructions / KB of model"].strip() == "1024.0"
    assert rows["issue slots busy"].strip() == "50.0 %"
    assert rows["SM clock"].strip() == "1860 MHz"
    # the second kernel spilled: its local sectors, summed, as bytes
    assert (m["local_ld_sectors"], m["local_st_sectors"]) == (1000, 250)
    assert rows["local (spill) bytes ld / st"].strip() == "32,000 / 8,000"


def test_excerpt_without_work_metrics_has_no_such_rows() -> None:
    """Excerpts from before these metrics existed (the CSV above lacks them) show no rows for
    them, rather than zeros."""
    text = format_excerpt(summarize(parse_raw_csv(CSV)), model_bytes=1800)
    assert "warp instructions" not in text and "SM clock" not in text
    assert "spill" not in text


def test_profile_passes_env_to_the_profiled_process(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """profile(env=...): the variables reach ncu's process (a pinned launch config), on top of
    the lab's own environment; without env the process inherits the lab's as it is."""
    import subprocess

    from minikernel.bench import ncu

    seen = []

    def fake_run(cmd, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(kwargs.get("env"))
        return subprocess.CompletedProcess(cmd, 1, "", "fake ncu")

    monkeypatch.setattr(ncu, "find_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu.subprocess, "run", fake_run)
    monkeypatch.setenv("MINIKERNEL_TEST_MARK", "lab")
    for env in ({"MINIKERNEL_PIN": '{"num_warps": 4}'}, None):
        with pytest.raises(RuntimeError, match="ncu failed"):
            ncu.profile("softmax", "triton:1", [4, 8], "float32", env=env)
    assert seen[0]["MINIKERNEL_PIN"] == '{"num_warps": 4}'
    assert seen[0]["MINIKERNEL_TEST_MARK"] == "lab"
    assert seen[1] is None


# --- Several cases in one ncu process (profile_many) -------------------------------------------


def _rows(*names: str) -> list[dict[str, str]]:
    return [{"Kernel Name": n} for n in names]


def test_marker_names_as_ncu_prints_them() -> None:
    from minikernel.bench.ncu import is_marker

    for name in ("spin_kernel", "spin_kernel(long)", "void at::cuda::spin_kernel(long)"):
        assert is_marker(name), name
    for name in ("spin_kernel_v2(long)", "my_spin_kernel(long)", "rmsnorm_kernel2", ""):
        assert not is_marker(name), name


def test_split_cases_cuts_the_rows_at_each_marker() -> None:
    """A batch's rows, as ncu lists them in launch order: each case's kernels follow its
    marker; an eager op's several kernels stay together, and the markers are dropped."""
    from minikernel.bench.ncu import split_cases

    rows = _rows("spin_kernel(long)", "k1", "spin_kernel(long)", "a", "b", "c")
    groups = split_cases(rows, 2)
    assert [[k["Kernel Name"] for k in g] for g in groups] == [["k1"], ["a", "b", "c"]]


@pytest.mark.parametrize(
    ("names", "n_cases", "message"),
    [
        (("spin_kernel(long)", "k1"), 2, "1 markers for 2 cases"),
        (("k0", "spin_kernel(long)", "k1"), 1, "came before the first case's marker"),
        (("spin_kernel(long)", "spin_kernel(long)", "k1"), 2, r"cases \[0\] profiled no kernel"),
    ],
)
def test_split_cases_refuses_rows_it_cannot_attribute(names, n_cases, message) -> None:  # type: ignore[no-untyped-def]
    """Rows that do not split into exactly one non-empty group per case are an error, never an
    excerpt with another case's kernels in it."""
    from minikernel.bench.ncu import split_cases

    with pytest.raises(RuntimeError, match=message):
        split_cases(_rows(*names), n_cases)


BATCH_CSV = """"ID","Kernel Name","gpu__time_duration.sum","dram__bytes_read.sum","dram__bytes_write.sum"
"","","nsecond","byte","byte"
"0","spin_kernel(long)","2000","0","0"
"1","k1","3000","1,000","500"
"2","spin_kernel(long)","2000","0","0"
"3","k2","1000","200","100"
"4","k3","1000","20","10"
"""


def test_profile_many_runs_one_process_and_returns_an_excerpt_per_case(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """One ncu run for the batch: the target gets --cases and a JSON file naming each case;
    each excerpt counts only its own case's kernels, against its own byte model."""
    import json
    import subprocess

    from minikernel.bench import ncu

    calls = []

    def fake_run(cmd, **kwargs):  # type: ignore[no-untyped-def]
        if cmd[-1] == "--version":
            return subprocess.CompletedProcess(cmd, 0, "NVIDIA (R) Nsight Compute 2025.1.0.0", "")
        calls.append(cmd)
        target = cmd[cmd.index("minikernel.bench.ncu_target") + 1 :]
        assert target[:2] == ["--cases", "rmsnorm"]
        spec = json.loads(Path(target[2]).read_text())
        assert spec == [["cuda:4", [8, 16], "bfloat16", ["fwd"]], ["quack", [4, 4], "float32", []]]
        log = cmd[cmd.index("--log-file") + 1]
        Path(log).write_text(BATCH_CSV)
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(ncu, "find_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu.subprocess, "run", fake_run)
    cases = [
        {
            "impl": "cuda:4",
            "shape": [8, 16],
            "dtype": "bfloat16",
            "model_bytes": 1500,
            "extra_args": ["fwd"],
        },
        {"impl": "quack", "shape": [4, 4], "dtype": "float32"},
    ]
    recs = ncu.profile_many("rmsnorm", cases)
    assert len(calls) == 1
    assert [r["impl"] for r in recs] == ["cuda:4", "quack"]
    assert recs[0]["metrics"]["kernel_names"] == ["k1"]
    assert recs[1]["metrics"]["kernel_names"] == ["k2", "k3"]
    assert recs[1]["metrics"]["dram_bytes_read"] == 220  # k2 + k3, no marker, not k1
    assert recs[0]["metrics"]["model_bytes"] == 1500 and "model_bytes" not in recs[1]["metrics"]
    assert re.search(r"DRAM bytes / model\s+1\.000", recs[0]["excerpt"])
    assert recs[0]["ncu_version"] == "2025.1.0.0"
    with pytest.raises(ValueError, match="lacks"):
        ncu.profile_many("rmsnorm", [{"impl": "cuda:4", "shape": [8, 16]}])


def test_ncu_target_marks_each_case_of_a_batch_and_no_single_call(monkeypatch, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """ncu_target --cases runs every case of the file in order, each with its marker; the
    one-case command line (the one the pages show) launches no marker."""
    import json

    from minikernel.bench import ncu_target

    seen = []
    monkeypatch.setattr(ncu_target, "run_case", lambda *a, marker: seen.append((*a, marker)))
    spec = tmp_path / "cases.json"
    spec.write_text(
        json.dumps([["cuda:4", [8, 16], "bfloat16", ["fwd"]], ["quack", [4], "float32", []]])
    )
    assert ncu_target.main(["--cases", "rmsnorm", str(spec)]) == 0
    assert ncu_target.main(["softmax", "triton:1", "32,64", "bfloat16"]) == 0
    assert seen == [
        ("rmsnorm", "cuda:4", [8, 16], "bfloat16", ["fwd"], True),
        ("rmsnorm", "quack", [4], "float32", [], True),
        ("softmax", "triton:1", [32, 64], "bfloat16", [], False),
    ]


def test_no_access_to_the_counters_is_ncu_unavailable(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A learner's driver that keeps the counters to administrators: ncu prints
    ERR_NVGPUCTRPERM and profiles nothing. That is NcuUnavailable with what to do (the lab says
    so and keeps its timings), not a crash; and a batch gets no one-by-one retry."""
    import subprocess

    from minikernel.bench import lab as lab_mod
    from minikernel.bench import ncu

    runs = []

    def fake_run(cmd, **kwargs):  # type: ignore[no-untyped-def]
        runs.append(cmd)
        log = cmd[cmd.index("--log-file") + 1]
        Path(log).write_text(
            "==PROF== Connected to process 7\n==ERROR== ERR_NVGPUCTRPERM - The user does not "
            "have permission to access NVIDIA GPU Performance Counters on the target device 0.\n"
        )
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(ncu, "find_ncu", lambda: "ncu")
    monkeypatch.setattr(ncu.subprocess, "run", fake_run)
    with pytest.raises(ncu.NcuUnavailable, match="NVreg_RestrictProfilingToAdminUsers=0"):
        ncu.profile("softmax", "triton:1", [4, 8], "float32")
    lab = lab_mod.Lab.__new__(lab_mod.Lab)
    lab.op, lab.ncu, lab.spent = "softmax", [], dict.fromkeys(lab_mod.SPENT, 0.0)
    runs.clear()
    cases = [{"impl": i, "shape": [4, 8], "dtype": "float32"} for i in ("cuda:1", "cuda:2")]
    assert lab.profile_many(cases) == [None, None]
    assert len(runs) == 1 and lab.ncu == []  # the batch only: no retry case by case
    assert lab.profile("cuda:1", [4, 8], "float32") is None
