"""The side probes of softmax (labs/probe_softmax_*.py) compile: every candidate kernel each one
builds from an edited copy of the shipped source, for sm_90, without spilling. No GPU: NVRTC
only. Apart from test_bench_probe.py so that pytest-xdist spreads the compiles over workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_loader import load_probe


def test_probe_softmax_slices_compiles_every_candidate_without_spills(tmp_path: Path) -> None:
    """labs/probe_softmax_slices.py instantiates rung 16 for each candidate slice after the
    last of softmax.cu's: every candidate's kernel is in the compiled copy, covers its row
    exactly, and compiles for sm_90 without spilling (a spilled candidate would time the
    spills, not the slice); the probe stops if its anchor line is gone."""
    import torch

    from minikernel.cuda import compile_file
    from minikernel.kernels.softmax.cuda_kernels import CU_FILE

    probe = load_probe("probe_softmax_slices")
    src = CU_FILE.read_text()
    path = tmp_path / "softmax_slices.cu"
    path.write_text(probe.with_candidates(src))
    usage = compile_file(path, "sm_90").usage
    for (m, n, dtype_name), launches in probe.CANDIDATES.items():
        for t, k, c, _ in launches:
            plan = probe.candidate_plan(m, n, dtype_name, t, k, c)
            assert plan.per_block * c * (16 // getattr(torch, dtype_name).itemsize) == n
            use = usage[plan.kernel]
            assert use.spill_stores == use.spill_loads == 0, (plan.kernel, use)
    with pytest.raises(SystemExit, match=r"softmax\.cu changed"):
        probe.with_candidates(src.replace(probe.ANCHOR, ""))


def test_probe_softmax_short_compiles_every_layout_and_block(tmp_path: Path) -> None:
    """labs/probe_softmax_short.py gives rung 15 a block-size parameter (default 128, rung 15's)
    and a kernel per layout and block size: each covers its row, launches whole lane groups, and
    compiles for sm_90 without spilling, next to the shipped kernels (the copy keeps them); the
    probe stops if a line it edits is gone."""
    import torch

    from minikernel.cuda import compile_file
    from minikernel.kernels.softmax.cuda_kernels import CU_FILE, KERNEL15_VPT_MAX

    probe = load_probe("probe_softmax_short")
    src = CU_FILE.read_text()
    path = tmp_path / "softmax_short.cu"
    path.write_text(probe.with_candidates(src))
    built = compile_file(path, "sm_90")
    for m, n, dtype_name in probe.SHAPES:
        dtype = getattr(torch, dtype_name)
        nvec = n // (16 // dtype.itemsize)
        found = probe.layouts(nvec, dtype_name)
        assert found and all(lanes * vpt >= nvec for lanes, vpt in found)
        assert all(vpt <= KERNEL15_VPT_MAX[dtype] for _, vpt in found)
        for lanes, vpt in found:
            for t in probe.THREADS:
                plan = probe.candidate_plan(m, n, dtype_name, lanes, vpt, t)
                assert plan.grid * (t // lanes) >= m and t % 32 == 0
                use = built.usage[plan.kernel]
                assert use.spill_stores == use.spill_loads == 0, (plan.kernel, use)
    assert "softmax_kernel15_l16_v5_bf16" in built.kernel_names  # the shipped ones stay
    for text in (probe.HEAD, probe.ROWS, probe.ANCHOR):
        with pytest.raises(SystemExit, match=r"softmax\.cu changed"):
            probe.with_candidates(src.replace(text, ""))


def test_probe_softmax_cpasync_compiles_both_forms_without_spills(tmp_path: Path) -> None:
    """labs/probe_softmax_cpasync.py stages rung 15's rows in shared memory: a kernel per form
    and block size for each shape's shipped layout, compiled for sm_90 without spilling, the
    form that reads shared memory in passes at fewer registers than the one that reloads the
    row into registers; the probe stops if its anchor in softmax.cu is gone."""
    from minikernel.cuda import compile_file
    from minikernel.kernels.softmax.cuda_kernels import CU_FILE

    probe = load_probe("probe_softmax_cpasync")
    src = CU_FILE.read_text()
    path = tmp_path / "softmax_cpasync.cu"
    path.write_text(probe.with_candidates(src))
    built = compile_file(path, "sm_90")
    for _, _, dtype_name, lanes, vpt in probe.SHAPES:
        for block in probe.BLOCKS:
            uses = [
                built.usage[probe.kernel_name(dtype_name, lanes, vpt, block, form)]
                for form in range(len(probe.FORMS))
            ]
            assert all(u.spill_stores == u.spill_loads == 0 for u in uses), uses
            assert uses[1].registers < uses[0].registers, uses
    assert "softmax_kernel15_l16_v5_bf16" in built.kernel_names  # the shipped ones stay
    with pytest.raises(SystemExit, match=r"softmax\.cu changed"):
        probe.with_candidates(src.replace(probe.ANCHOR, ""))
