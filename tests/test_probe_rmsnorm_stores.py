"""labs/probe_rmsnorm_forward_stores.py compiles each of its copies of rmsnorm.cu, and each
stores y the way it says, read in the SASS.
No GPU: NVRTC, and cuobjdump where it is found. In a file of its own so that pytest-xdist
(--dist loadfile) compiles it beside the other probe tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_loader import load_probe


def test_probe_rmsnorm_forward_stores_compiles_every_copy_without_spills(
    tmp_path: Path,
) -> None:
    """labs/probe_rmsnorm_forward_stores.py compiles rung 5 at every slice of its rows once per
    store of y (streaming, plain, weak plain): one copy is rung 5 as shipped (whichever store
    it ships: the slices probe's copy, which test_probe_rmsnorm_kernels.py compiles and reads),
    and the others differ from it in that store only. Every candidate of each row is in each
    of the others, compiles for sm_90 without spilling and stores y as SASS_STORE says; the
    probe stops if rung 5's store is none of them, or two."""
    import torch

    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file
    from minikernel.cuda.sass import SassUnavailable, opcodes, sass

    probe = load_probe("probe_rmsnorm_forward_stores")
    src = rn.CU_FILE.read_text()
    texts = probe.variants(src)
    assert set(texts) == set(probe.STORES) and probe.SHIPPED in texts
    shipped_text = texts[probe.SHIPPED]
    assert shipped_text == probe.SLICES.with_candidates(src)
    for name, text in texts.items():  # each copy differs from the shipped one in its store only
        assert text.count(probe.STORES[name]) == 1, name
        assert text.replace(probe.STORES[name], probe.STORES[probe.SHIPPED]) == shipped_text
    for name, text in texts.items():
        if name == probe.SHIPPED:
            continue  # the slices probe's copy: compiled and read in its own test
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
        # What the line compiles to: y in four 16-byte stores a thread, as SASS_STORE names
        # them, never split into 32-bit stores (the one 32-bit store is rstd's), as the earlier
        # probes' plain stores were.
        try:
            code = sass(module, "rmsnorm_kernel5_t512_c2_bf16")
        except SassUnavailable:
            continue
        stores = opcodes(code, "STG")
        wide = {op: k for op, k in stores.items() if ".128" in op}
        assert sum(wide.values()) == rn.KERNEL4_VECS and stores["STG.E"] == 1, (name, stores)
        assert set(wide) == {probe.SASS_STORE[name]}, (name, stores)
    other = next(name for name in probe.STORES if name != probe.SHIPPED)
    both = src.replace(
        probe.STORES[probe.SHIPPED], probe.STORES[probe.SHIPPED] + probe.STORES[other]
    )
    for broken in (src.replace(probe.STORES[probe.SHIPPED], "        y[0] = out;\n"), both):
        with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
            probe.shipped_store(broken)
