"""Parsing ncu's raw CSV into the fixed excerpt (no GPU needed: the CSV text is synthetic)."""

from __future__ import annotations

import re

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
