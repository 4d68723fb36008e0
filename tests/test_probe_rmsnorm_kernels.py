"""The side probes of rmsnorm (labs/probe_rmsnorm_*.py) compile: every candidate kernel each one
builds from an edited copy of the shipped source, for sm_90, without spilling. No GPU: NVRTC
only. Apart from test_bench_probe.py so that pytest-xdist spreads the compiles over workers."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_loader import load_probe


def test_probe_rmsnorm_forward_slices_compiles_every_candidate_without_spills(
    tmp_path: Path,
) -> None:
    """labs/probe_rmsnorm_forward_slices.py instantiates rung 5 for every block that makes each
    of its rows with four vectors a thread: the shipped block of each row is among them, every
    candidate's kernel is in the compiled copy and compiles for sm_90 without spilling (a
    spilled candidate would time the spills, not the slice); the probe stops if the entry list
    it replaces is gone."""
    import torch

    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file
    from minikernel.cuda.sass import SassUnavailable, opcodes, sass

    probe = load_probe("probe_rmsnorm_forward_slices")
    src = rn.CU_FILE.read_text()
    path = tmp_path / "rmsnorm_slices.cu"
    path.write_text(probe.with_candidates(src))
    module = compile_file(path, "sm_90")
    usage = module.usage
    for m, n, dtype_name in probe.SHAPES:
        dtype = getattr(torch, dtype_name)
        cands = probe.candidates(n, dtype_name)
        assert len(cands) >= 2, (n, dtype_name)  # something to race the shipped block against
        shipped = rn.plan5(m, n, dtype, (9, 0), True) or rn.plan4(m, n, dtype, (9, 0))
        assert (shipped.threads, shipped.cluster) in cands
        for t, c in cands:
            assert t * rn.KERNEL4_VECS * c * (16 // dtype.itemsize) == n
            use = usage[probe.kernel_name(t, c, dtype_name)]
            assert use.spill_stores == use.spill_loads == 0, (t, c, dtype_name, use)
    # rung 5's store of y as shipped, read in the SASS (the stores probe's shipped copy is this
    # one: its test compiles only the other stores)
    stores = load_probe("probe_rmsnorm_forward_stores")
    try:
        code = sass(module, "rmsnorm_kernel5_t512_c2_bf16")
    except SassUnavailable:
        code = None
    if code is not None:
        wide = {op for op in opcodes(code, "STG") if ".128" in op}
        assert wide == {stores.SASS_STORE[stores.SHIPPED]}, wide
    # the cluster of one: a 64 KB bf16 row in one block of 1024 threads, rung 5's guard lifted
    # in its copy only (rung 4 keeps its own)
    assert (1024, 1) in probe.candidates(32768, "bfloat16")
    assert path.read_text().count("static_assert(CLUSTER > 1") == 1
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
        probe.with_candidates(
            src.replace("RMSNORM5_ENTRY(SUFFIX, T, W", "RMSNORM5_ONE(SUFFIX, T, W")
        )
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
        probe.with_candidates(
            src.replace("static_assert(CLUSTER > 1", "static_assert(CLUSTER >= 1")
        )


def test_probe_rmsnorm_forward_long_compiles_every_candidate_without_spills(
    tmp_path: Path,
) -> None:
    """labs/probe_rmsnorm_forward_long.py gives rung 5 the vectors a thread holds as a template
    parameter (the shipped kernels keep KERNEL5_VECS) and a kernel per candidate: each makes its
    row exactly and compiles for sm_90 without spilling within its register budget, and the
    shipped kernels compile as before; the probe stops if a line it edits is gone."""
    import torch

    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file

    probe = load_probe("probe_rmsnorm_forward_long")
    src = rn.CU_FILE.read_text()
    path = tmp_path / "rmsnorm_long.cu"
    path.write_text(probe.with_candidates(src))
    usage = compile_file(path, "sm_90").usage
    assert (
        usage["rmsnorm_kernel5_t512_c8_f32"]
        == compile_file(rn.CU_FILE, "sm_90").usage["rmsnorm_kernel5_t512_c8_f32"]
    )
    for (_, n, dtype_name), launches in probe.CANDIDATES.items():
        vn = 16 // getattr(torch, dtype_name).itemsize
        for t, k, c, minb in launches:
            assert probe.per_block(n, dtype_name, t, k, c) * c * vn == n
            use = usage[probe.kernel_name(dtype_name, t, k, c)]
            assert use.spill_stores == use.spill_loads == 0, (t, k, c, dtype_name, use)
            assert use.registers * t * minb <= 65536, (t, k, c, use)  # its blocks fit
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
        probe.with_candidates(src.replace(probe.K_LINE, ""))


def test_probe_rmsnorm_forward_bulk_compiles_every_candidate_and_fits(tmp_path: Path) -> None:
    """labs/probe_rmsnorm_forward_bulk.py moves each block's slice with the copy engine's bulk
    copies: every candidate's slices make its row, each kernel compiles for sm_90 without
    spilling, and its registers and shared memory let the blocks per SM it asks for fit (65536
    registers and 228 KB an SM, 1 KB of it reserved per block); the probe stops if its anchor in
    rmsnorm.cu is gone."""
    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file

    probe = load_probe("probe_rmsnorm_forward_bulk")
    src = rn.CU_FILE.read_text()
    path = tmp_path / "rmsnorm_bulk.cu"
    path.write_text(probe.with_candidates(src))
    usage = compile_file(path, "sm_90").usage
    for (_, n), launches in probe.CANDIDATES.items():
        for t, kb, c, minb, v in launches:
            probe.check_shape(n, t, kb, c)
            use = usage[probe.kernel_name(n, t, kb, c, minb, v)]
            assert use.spill_stores == use.spill_loads == 0, (n, t, kb, c, v, use)
            assert use.registers * t * minb <= 65536, (n, t, c, v, use)
            assert (kb * 1024 + use.shared_bytes + 1024) * minb <= 228 * 1024, (n, t, kb, v)
    with pytest.raises(SystemExit, match=r"is not 32768"):
        probe.check_shape(32768, 256, 32, 4)
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
        probe.with_candidates(src.replace(probe.ANCHOR, ""))
