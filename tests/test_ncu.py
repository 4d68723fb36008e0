"""Parsing ncu's raw CSV into the fixed excerpt (no GPU needed: the CSV text is synthetic)."""

from __future__ import annotations

import re

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
