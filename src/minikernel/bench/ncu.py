"""Nsight Compute excerpts: a fixed set of metrics for one call of one implementation.

The profiled program is :mod:`minikernel.bench.ncu_target`: it warms the implementation up
(compilation, autotuning) and then runs it once between ``cudaProfilerStart`` and
``cudaProfilerStop``; ncu runs with ``--profile-from-start off``, so only that call is profiled,
every kernel it launches included (an eager PyTorch op that takes three kernels shows three
rows, and their DRAM bytes add up).

:func:`profile_many` profiles several calls in one ncu process (``ncu_target --cases``): it
saves the start of a Python, PyTorch and CUDA context per excerpt, a few seconds each. Before
each case's call the target launches a marker kernel (:data:`MARKER`, PyTorch's
``torch.cuda._sleep``) inside the profiled window, and the rows are split where the markers are.

ncu runs with ``--clock-control none``: it must not lock or change the GPU's clocks.
"""

from __future__ import annotations

import csv
import glob
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

# The fixed metric set, in the order the excerpt prints them: (ncu metric, our name).
METRICS: list[tuple[str, str]] = [
    ("gpu__time_duration.sum", "duration_ns"),
    ("dram__throughput.avg.pct_of_peak_sustained_elapsed", "dram_throughput_pct"),
    ("dram__bytes_read.sum", "dram_bytes_read"),
    ("dram__bytes_write.sum", "dram_bytes_write"),
    ("lts__t_sector_hit_rate.pct", "l2_hit_rate_pct"),
    ("sm__warps_active.avg.pct_of_peak_sustained_active", "achieved_occupancy_pct"),
    ("sm__maximum_warps_per_active_cycle_pct", "theoretical_occupancy_pct"),
    ("launch__registers_per_thread", "registers_per_thread"),
    # Coalescing: 32-byte sectors fetched per warp-level request. A fully coalesced 4-byte
    # access by 32 threads needs 4 sectors; a strided one needs up to 32.
    ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum", "ld_requests"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "ld_sectors"),
    ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum", "st_requests"),
    ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum", "st_sectors"),
    # Local memory: what a thread keeps there is mostly registers the compiler spilled. 32-byte
    # sectors its loads and stores moved through L1 (zero when nothing spilled).
    ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "local_ld_sectors"),
    ("l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum", "local_st_sectors"),
    ("launch__grid_size", "grid_size"),
    ("launch__block_size", "block_size"),
    # Work per byte: warp-level instructions issued, the share of the schedulers' issue slots
    # in use, and the SM clock the kernel ran at (it drops at the power cap, see clocks.py).
    ("smsp__inst_executed.sum", "warp_instructions"),
    ("smsp__issue_active.avg.pct_of_peak_sustained_active", "issue_active_pct"),
    ("sm__cycles_elapsed.avg.per_second", "sm_clock_hz"),
]
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
STALL_REGEX = r"regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio"


class NcuUnavailable(RuntimeError):
    """No excerpt can be taken on this machine (no ncu, or no access to the GPU's counters);
    a lab says so and carries on, since its timings do not depend on it."""


# What ncu prints when the driver keeps the performance counters to administrators.
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"


def find_ncu() -> str:
    """Path of the ``ncu`` executable: $NCU, the PATH, or a standard install folder."""
    candidates = [os.environ.get("NCU"), shutil.which("ncu")]
    candidates += sorted(glob.glob("/opt/nvidia/nsight-compute/*/ncu"), reverse=True)
    candidates += sorted(glob.glob("/usr/local/cuda*/bin/ncu"), reverse=True)
    for c in candidates:
        if c and Path(c).exists():
            return c
    raise NcuUnavailable("ncu (Nsight Compute) was not found; set NCU=/path/to/ncu")


def ncu_version(ncu: str) -> str:
    out = subprocess.run([ncu, "--version"], capture_output=True, text=True, check=True).stdout
    for token in out.split():
        if token[:1].isdigit() and token.count(".") >= 2:
            return token.split("(")[0]
    return out.strip().splitlines()[-1]


def _number(text: str) -> float | None:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A"):
        return None
    try:
        return float(text)
    except ValueError:
        return None


def parse_raw_csv(text: str) -> list[dict[str, Any]]:
    """Rows of ``ncu --csv --page raw --print-units base``: one dict per profiled kernel."""
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if len(lines) < 2:
        return []
    reader = list(csv.reader(io.StringIO("\n".join(lines))))
    header, rows = reader[0], reader[1:]
    # The second row holds units (e.g. "byte", "%") rather than a kernel.
    if rows and (not rows[0] or rows[0][0] in ("", "ID") or not rows[0][0].strip().isdigit()):
        rows = rows[1:]
    kernels = []
    for row in rows:
        rec = dict(zip(header, row, strict=False))
        kernels.append(rec)
    return kernels


def _sum_or_none(per_kernel: list[dict[str, Any]], key: str) -> int | None:
    vals = [m[key] for m in per_kernel if m[key] is not None]
    return int(sum(vals)) if vals else None


def summarize(kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """Our metric names from ncu's rows: sums over kernels for time and bytes, the
    time-weighted mean for percentages, and the three largest stall reasons."""
    if not kernels:
        raise RuntimeError("ncu profiled no kernel")
    per_kernel = []
    for k in kernels:
        m = {ours: _number(k.get(metric, "")) for metric, ours in METRICS}
        stalls = {
            name[len(STALL_PREFIX) : -len(STALL_SUFFIX)]: _number(v)
            for name, v in k.items()
            if name.startswith(STALL_PREFIX) and name.endswith(STALL_SUFFIX)
        }
        m["stalls"] = {s: v for s, v in stalls.items() if v is not None}
        m["kernel"] = k.get("Kernel Name", "?")
        per_kernel.append(m)
    total_ns = sum(m["duration_ns"] or 0 for m in per_kernel) or 1.0

    def weighted(key: str) -> float | None:
        vals = [(m[key], m["duration_ns"] or 0) for m in per_kernel if m[key] is not None]
        return sum(v * w for v, w in vals) / total_ns if vals else None

    stall_totals: dict[str, float] = {}
    for m in per_kernel:
        for s, v in m["stalls"].items():
            stall_totals[s] = stall_totals.get(s, 0.0) + v * (m["duration_ns"] or 0) / total_ns
    # "selected" is a warp issuing, not a stall
    top = sorted(
        ((s, v) for s, v in stall_totals.items() if s != "selected"), key=lambda kv: -kv[1]
    )[:3]

    def per_request(sectors: str, requests: str) -> float | None:
        sec = sum(m[sectors] or 0 for m in per_kernel)
        req = sum(m[requests] or 0 for m in per_kernel)
        return round(sec / req, 2) if req else None

    return {
        "kernels": len(per_kernel),
        "ld_sectors_per_request": per_request("ld_sectors", "ld_requests"),
        "st_sectors_per_request": per_request("st_sectors", "st_requests"),
        "kernel_names": [m["kernel"] for m in per_kernel],
        "duration_ns": sum(m["duration_ns"] or 0 for m in per_kernel),
        "dram_bytes_read": int(sum(m["dram_bytes_read"] or 0 for m in per_kernel)),
        "dram_bytes_write": int(sum(m["dram_bytes_write"] or 0 for m in per_kernel)),
        "dram_throughput_pct": weighted("dram_throughput_pct"),
        "l2_hit_rate_pct": weighted("l2_hit_rate_pct"),
        "achieved_occupancy_pct": weighted("achieved_occupancy_pct"),
        "theoretical_occupancy_pct": weighted("theoretical_occupancy_pct"),
        "registers_per_thread": per_kernel[0]["registers_per_thread"],
        "grid_size": per_kernel[0]["grid_size"],
        "block_size": per_kernel[0]["block_size"],
        "local_ld_sectors": _sum_or_none(per_kernel, "local_ld_sectors"),
        "local_st_sectors": _sum_or_none(per_kernel, "local_st_sectors"),
        "warp_instructions": _sum_or_none(per_kernel, "warp_instructions"),
        "issue_active_pct": weighted("issue_active_pct"),
        "sm_clock_hz": weighted("sm_clock_hz"),
        "top_stalls": [{"reason": s, "cycles_per_issue": round(v, 3)} for s, v in top],
    }


def format_excerpt(metrics: dict[str, Any], model_bytes: int | None) -> str:
    """The plain-text excerpt a page shows: fixed rows, DRAM bytes against the byte model."""

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.1f} %"

    rows = [
        ("kernels profiled", str(metrics["kernels"])),
        ("duration", f"{metrics['duration_ns'] / 1e3:.1f} us"),
        ("DRAM throughput", pct(metrics["dram_throughput_pct"])),
        ("DRAM bytes read", f"{metrics['dram_bytes_read']:,}"),
        ("DRAM bytes written", f"{metrics['dram_bytes_write']:,}"),
    ]
    if model_bytes:
        moved = metrics["dram_bytes_read"] + metrics["dram_bytes_write"]
        rows.append(("byte model", f"{model_bytes:,}"))
        rows.append(("DRAM bytes / model", f"{moved / model_bytes:.3f}"))
    rows += [
        ("L2 hit rate", pct(metrics["l2_hit_rate_pct"])),
        ("achieved occupancy", pct(metrics["achieved_occupancy_pct"])),
        ("theoretical occupancy", pct(metrics["theoretical_occupancy_pct"])),
        ("registers / thread", f"{metrics['registers_per_thread'] or 0:.0f}"),
    ]
    for key, label in (
        ("ld_sectors_per_request", "global load sectors / request"),
        ("st_sectors_per_request", "global store sectors / request"),
    ):
        if metrics.get(key) is not None:
            rows.append((label, f"{metrics[key]:.2f}"))
    # Excerpts taken before these metrics were collected do not have them.
    if metrics.get("local_ld_sectors") is not None or metrics.get("local_st_sectors") is not None:
        ld, st = metrics.get("local_ld_sectors") or 0, metrics.get("local_st_sectors") or 0
        rows.append(("local (spill) bytes ld / st", f"{32 * ld:,} / {32 * st:,}"))
    if metrics.get("warp_instructions") is not None:
        rows.append(("warp instructions", f"{metrics['warp_instructions']:,}"))
        if model_bytes:
            per_kb = metrics["warp_instructions"] * 1024 / model_bytes
            rows.append(("warp instructions / KB of model", f"{per_kb:.1f}"))
    if metrics.get("issue_active_pct") is not None:
        rows.append(("issue slots busy", pct(metrics["issue_active_pct"])))
    if metrics.get("sm_clock_hz") is not None:
        rows.append(("SM clock", f"{metrics['sm_clock_hz'] / 1e6:.0f} MHz"))
    for i, s in enumerate(metrics["top_stalls"], 1):
        rows.append((f"stall #{i}", f"{s['reason']} ({s['cycles_per_issue']:.2f} cycles/issue)"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


# The kernel ncu_target launches before each case of a batch: ATen's spin_kernel, from
# torch.cuda._sleep(1). No op here launches it, so its rows mark where one case's kernels start.
MARKER = "spin_kernel"


def is_marker(kernel_name: str) -> bool:
    """Whether ncu's name for a kernel (plain, or with its namespaces, return type and
    parameters: "spin_kernel(long)", "void at::cuda::spin_kernel(long)") is the marker's."""
    return re.search(rf"(^|[\s:]){MARKER}(\(|$)", kernel_name.strip()) is not None


def split_cases(kernels: list[dict[str, Any]], n_cases: int) -> list[list[dict[str, Any]]]:
    """Rows of a batch (``ncu_target --cases``) cut into one list per case, the marker rows
    dropped. Raises RuntimeError unless there are exactly ``n_cases`` markers, the first row is
    one, and every case profiled at least one kernel of its own."""
    groups: list[list[dict[str, Any]]] = []
    for k in kernels:
        name = k.get("Kernel Name", "")
        if is_marker(name):
            groups.append([])
        elif not groups:
            raise RuntimeError(f"ncu batch: kernel {name!r} came before the first case's marker")
        else:
            groups[-1].append(k)
    if len(groups) != n_cases:
        raise RuntimeError(f"ncu batch: {len(groups)} markers for {n_cases} cases")
    empty = [i for i, g in enumerate(groups) if not g]
    if empty:
        raise RuntimeError(f"ncu batch: cases {empty} profiled no kernel")
    return groups


def _ncu_command(ncu: str, log: Path, target: list[str]) -> list[str]:
    return [
        ncu,
        "--clock-control",
        "none",
        "--profile-from-start",
        "off",
        "--target-processes",
        "all",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--log-file",
        str(log),
        "--metrics",
        ",".join(m for m, _ in METRICS) + "," + STALL_REGEX,
        sys.executable,
        "-m",
        "minikernel.bench.ncu_target",
        *target,
    ]


def _record(
    impl: str,
    shape: list[int],
    dtype: str,
    version: str,
    metrics: dict[str, Any],
    model_bytes: int | None,
) -> dict[str, Any]:
    if model_bytes:
        metrics["model_bytes"] = model_bytes
    return {
        "impl": impl,
        "shape": list(shape),
        "dtype": dtype,
        "ncu_version": version,
        "metrics": metrics,
        "excerpt": format_excerpt(metrics, model_bytes),
    }


def _run_ncu(
    cmd: list[str], log: Path, what: str, timeout: float, env: dict[str, str] | None
) -> str:
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **env} if env else None,
    )
    text = log.read_text() if log.exists() else ""
    if any(PERMISSION_ERROR in t for t in (text, proc.stdout, proc.stderr)):
        raise NcuUnavailable(
            f"ncu may not read this GPU's performance counters ({PERMISSION_ERROR}): run the "
            "labs as root, or let every user profile (the driver option "
            "NVreg_RestrictProfilingToAdminUsers=0, https://developer.nvidia.com/"
            f"{PERMISSION_ERROR}); the timings do not need it"
        )
    if proc.returncode != 0 or not text:
        raise RuntimeError(
            f"ncu failed for {what} (exit {proc.returncode}):\n"
            f"{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}\n{text[-2000:]}"
        )
    return text


def profile_many(
    op: str,
    cases: list[dict[str, Any]],
    *,
    env: dict[str, str] | None = None,
    timeout_per_case: float = 120.0,
) -> list[dict[str, Any]]:
    """:func:`profile` for several calls of ``op`` in one ncu process, in order. Each case is
    a dict with ``impl``, ``shape``, ``dtype`` and optionally ``model_bytes`` and
    ``extra_args``; ``env`` applies to all of them. Raises RuntimeError if the process fails or
    its rows cannot be told apart (the caller can profile the cases one by one instead)."""
    if not cases:
        return []
    for i, c in enumerate(cases):
        missing = {"impl", "shape", "dtype"} - set(c)
        if missing:
            raise ValueError(f"profile_many: case {i} lacks {sorted(missing)}")
    ncu = find_ncu()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        spec = Path(tmp) / "cases.json"
        spec.write_text(
            json.dumps(
                [
                    [
                        c["impl"],
                        [int(s) for s in c["shape"]],
                        c["dtype"],
                        list(c.get("extra_args") or []),
                    ]
                    for c in cases
                ]
            )
        )
        what = f"{op}: {len(cases)} cases ({', '.join(c['impl'] for c in cases)})"
        cmd = _ncu_command(ncu, log, ["--cases", op, str(spec)])
        text = _run_ncu(cmd, log, what, 60.0 + timeout_per_case * len(cases), env)
    groups = split_cases(parse_raw_csv(text), len(cases))
    version = ncu_version(ncu)
    return [
        _record(c["impl"], c["shape"], c["dtype"], version, summarize(g), c.get("model_bytes"))
        for c, g in zip(cases, groups, strict=True)
    ]


def profile(
    op: str,
    impl: str,
    shape: list[int],
    dtype: str,
    *,
    model_bytes: int | None = None,
    extra_args: list[str] | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 300.0,
) -> dict[str, Any]:
    """Run ncu on one call of ``impl`` and return the excerpt record for the results file.
    ``env``: variables added to the profiled process's environment (a pinned launch config)."""
    ncu = find_ncu()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "ncu.csv"
        target = [op, impl, ",".join(str(s) for s in shape), dtype, *(extra_args or [])]
        cmd = _ncu_command(ncu, log, target)
        text = _run_ncu(cmd, log, f"{op} {impl} {shape} {dtype}", timeout, env)
    metrics = summarize(parse_raw_csv(text))
    return _record(impl, shape, dtype, ncu_version(ncu), metrics, model_bytes)
