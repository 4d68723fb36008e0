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

    probe = load_probe("probe_rmsnorm_forward_slices")
    src = rn.CU_FILE.read_text()
    path = tmp_path / "rmsnorm_slices.cu"
    path.write_text(probe.with_candidates(src))
    usage = compile_file(path, "sm_90").usage
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


def test_probe_rmsnorm_forward_stores_compiles_both_copies_without_spills(
    tmp_path: Path,
) -> None:
    """labs/probe_rmsnorm_forward_stores.py compiles rung 5 at every slice of its rows twice,
    once with streaming stores of y and once with plain ones: one copy is rung 5 as shipped
    (whichever store it ships), and the two differ in that one line only. Every candidate of
    each row is in both copies and compiles for sm_90 without spilling; the probe stops if
    rung 5's store is neither of the two, or both."""
    import torch

    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file
    from minikernel.cuda.sass import SassUnavailable, opcodes, sass

    probe = load_probe("probe_rmsnorm_forward_stores")
    src = rn.CU_FILE.read_text()
    texts = probe.variants(src)
    assert set(texts) == {"cs", "wb"} and probe.SHIPPED in texts
    assert texts[probe.SHIPPED] == probe.SLICES.with_candidates(src)
    cs, wb = texts["cs"].splitlines(), texts["wb"].splitlines()
    assert len(cs) == len(wb)
    diff = [(a, b) for a, b in zip(cs, wb, strict=True) if a != b]
    assert diff == [(probe.CS_STORE.rstrip("\n"), probe.WB_STORE.rstrip("\n"))]
    for name, text in texts.items():
        path = tmp_path / f"rmsnorm_{name}.cu"
        path.write_text(text)
        module = compile_file(path, "sm_90")
        for m, n, dtype_name in probe.SHAPES:
            dtype = getattr(torch, dtype_name)
            cands = probe.SLICES.candidates(n, dtype_name)
            shipped = rn.plan5(m, n, dtype, (9, 0), True)
            assert (shipped.threads, shipped.cluster) in cands, (n, dtype_name)
            for t, c in cands:
                use = module.usage[probe.SLICES.kernel_name(t, c, dtype_name)]
                assert use.spill_stores == use.spill_loads == 0, (name, t, c, dtype_name, use)
        # What the line compiles to: y in four 16-byte stores a thread, streaming (EF, evict
        # first) in the cs copy and not in the wb copy, never split into 32-bit stores (the one
        # 32-bit store is rstd's), as the earlier probes' plain stores were.
        try:
            code = sass(module, "rmsnorm_kernel5_t512_c2_bf16")
        except SassUnavailable:
            continue
        stores = opcodes(code, "STG")
        wide = {op: k for op, k in stores.items() if ".128" in op}
        assert sum(wide.values()) == rn.KERNEL4_VECS and stores["STG.E"] == 1, (name, stores)
        assert all((".EF." in op) == (name == "cs") for op in wide), (name, stores)
    other = "wb" if probe.SHIPPED == "cs" else "cs"
    both = src.replace(
        probe.STORES[probe.SHIPPED], probe.STORES[probe.SHIPPED] + probe.STORES[other]
    )
    for broken in (src.replace(probe.STORES[probe.SHIPPED], "        y[0] = out;\n"), both):
        with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
            probe.shipped_store(broken)


def test_probe_rmsnorm_forward_staged_compiles_and_its_plain_stores_are_16_bytes(
    tmp_path: Path,
) -> None:
    """labs/probe_rmsnorm_forward_staged.py appends its kernel to a copy of rmsnorm.cu: the
    copy compiles for sm_90 (it once stopped compiling when rung 6 brought a helper of the
    same name into rmsnorm.cu), every candidate is in it, and the "plain" variant writes y in
    one 16-byte store a vector (STG.E.128, not the four 32-bit stores a vector assignment
    compiled to) where the other variants stream it (STG.E.EF.128). The rung-4 probe's plain
    stores are the same __stwb."""
    from minikernel.cuda import compile_file
    from minikernel.cuda.sass import SassUnavailable, opcodes, sass
    from minikernel.kernels.rmsnorm import CU_FILE

    probe = load_probe("probe_rmsnorm_forward_staged")
    path = tmp_path / "rmsnorm_staged.cu"
    path.write_text(probe.with_candidates(CU_FILE.read_text()))
    module = compile_file(path, "sm_90")
    for (_, _, dtype_name), launches in probe.CANDIDATES.items():
        for (t, k, c, _), v in probe.variants(launches):
            assert probe.kernel_name(dtype_name, t, k, c, v) in module.kernel_names
    for rung4_store in ("PLAIN_STORE", "K3_PLAIN_STORE"):
        assert "__stwb(" in getattr(load_probe("probe_rmsnorm_forward_rung4"), rung4_store)
    try:
        (t, k, c, _), _ = probe.variants(probe.CANDIDATES[32768, 32768, "bfloat16"])[1]
        plain = opcodes(sass(module, probe.kernel_name("bfloat16", t, k, c, " plain")), "STG")
        ours = opcodes(sass(module, probe.kernel_name("bfloat16", t, k, c, "")), "STG")
    except SassUnavailable:
        pytest.skip("no cuobjdump: the SASS half of this test needs the CUDA toolkit or Triton")
    wide = sum(n for op, n in plain.items() if op.startswith("STG.E.128"))
    assert wide == k and plain["STG.E"] == 1, plain  # k vectors of y, and rstd
    assert ours["STG.E.EF.128"] == k and ours["STG.E"] == 1, ours
