"""labs/probe_rmsnorm_backward_stores.py compiles its copy of rmsnorm.cu, and the backwards of
that copy store dx the way it says, read in the SASS.
No GPU: NVRTC, and cuobjdump where it is found. In a file of its own so that pytest-xdist
(--dist loadfile) compiles it beside the other probe tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_loader import load_probe


def test_probe_rmsnorm_backward_stores_copy_differs_in_the_stores_and_compiles(
    tmp_path: Path,
) -> None:
    """The probe's copy differs from rmsnorm.cu in the two sites' stores of dx only (tile_give
    and the ring), and swapping back gives the shipped source; the probe stops if a site stores
    with neither of its lines, or both, or the two sites ship different stores. The copy
    compiles for sm_90, every backward the probe's rows launch there (TILE_BWD's and
    ROWS_BWD_RING's) is in it without spilling, and each writes dx with 16-byte stores of the
    copy's kind (SASS_STORE) and none of the shipped kind."""
    import torch

    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file
    from minikernel.cuda.sass import SassUnavailable, opcodes, sass

    probe = load_probe("probe_rmsnorm_backward_stores")
    src = rn.CU_FILE.read_text()
    shipped, other = probe.SHIPPED, probe.OTHER
    assert shipped in probe.SASS_STORE and other != shipped
    text = probe.with_store(src, other)
    assert text != src
    back = text
    for lines in probe.STORES.values():
        assert text.count(lines[other]) == 1 and lines[shipped] not in text
        back = back.replace(lines[other], lines[shipped])
    assert back == src
    assert probe.shipped_store(text) == other
    assert probe.with_store(text, shipped) == src
    for lines in probe.STORES.values():
        neither = src.replace(lines[shipped], "        dxr[0] = 0;\n")
        both = src.replace(lines[shipped], lines[shipped] + lines[other])
        mixed = src.replace(lines[shipped], lines[other])  # this site only: the two differ
        for broken in (neither, both, mixed):
            with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
                probe.shipped_store(broken)

    path = tmp_path / f"rmsnorm_{other}.cu"
    path.write_text(text)
    module = compile_file(path, "sm_90")
    kernels = {}
    for _, n, dtype_name in probe.SHAPES:
        dtype = getattr(torch, dtype_name)
        plan = probe.plan_for(n, dtype, (9, 0))
        assert plan is not None, (n, dtype_name)  # every row of the probe has one of the sites
        if isinstance(plan, rn.TileBwdPlan):
            kernels[plan.kernel] = plan.vpt
        else:
            assert plan.stages, plan  # on sm_90, the ring
            kernels[f"{plan.kernel}_{rn._SUFFIX[dtype]}"] = plan.k
    assert any("ring" in name for name in kernels) and any("tile" in name for name in kernels)
    for name, vectors in sorted(kernels.items()):
        use = module.usage[name]
        assert use.spill_stores == use.spill_loads == 0, (name, use)
        try:
            stores = opcodes(sass(module, name), "STG")
        except SassUnavailable:
            continue
        # dx in 16-byte stores of the copy's kind, at least one per vector a thread holds,
        # and none of the shipped kind (the dw partials and sums go out as plain weak stores)
        assert stores[probe.SASS_STORE[other]] >= vectors, (name, stores)
        assert probe.SASS_STORE[shipped] not in stores, (name, stores)
