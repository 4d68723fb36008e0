"""labs/probe_rmsnorm_backward_stores.py compiles its copy of rmsnorm.cu, and the fixed-length
backwards of that copy store dx the way it says, read in the SASS.
No GPU: NVRTC, and cuobjdump where it is found. In a file of its own so that pytest-xdist
(--dist loadfile) compiles it beside the other probe tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_loader import load_probe


def test_probe_rmsnorm_backward_stores_copy_differs_in_the_store_and_compiles(
    tmp_path: Path,
) -> None:
    """The probe's copy differs from rmsnorm.cu in tile_give's store of dx only, and swapping
    back gives the shipped source; the probe stops if tile_give stores with neither line, or
    both. The copy compiles for sm_90, every fixed-length backward TILE_BWD launches at the
    probe's rows is in it without spilling, and each writes dx with 16-byte stores of the
    copy's kind (SASS_STORE) and its dw partials with plain 16-byte ones, never narrower."""
    import torch

    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import compile_file
    from minikernel.cuda.sass import SassUnavailable, opcodes, sass

    probe = load_probe("probe_rmsnorm_backward_stores")
    src = rn.CU_FILE.read_text()
    assert probe.SHIPPED in probe.STORES and probe.OTHER != probe.SHIPPED
    text = probe.with_store(src, probe.OTHER)
    assert text != src and text.count(probe.STORES[probe.OTHER]) == 1
    assert text.replace(probe.STORES[probe.OTHER], probe.STORES[probe.SHIPPED]) == src
    assert probe.shipped_store(text) == probe.OTHER
    assert probe.with_store(text, probe.SHIPPED) == src
    both = src.replace(
        probe.STORES[probe.SHIPPED], probe.STORES[probe.SHIPPED] + probe.STORES[probe.OTHER]
    )
    for broken in (src.replace(probe.STORES[probe.SHIPPED], "        dxr[0] = o.v[0];\n"), both):
        with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
            probe.shipped_store(broken)

    path = tmp_path / f"rmsnorm_{probe.OTHER}.cu"
    path.write_text(text)
    module = compile_file(path, "sm_90")
    plans = set()
    for _, n, dtype_name in probe.SHAPES:
        dtype = getattr(torch, dtype_name)
        plan = rn.plan_bwd_tile(n, dtype, dtype, (9, 0))
        assert plan is not None, (n, dtype_name)  # every row of the probe has a fixed length
        plans.add(plan)
    for plan in sorted(plans, key=lambda p: p.kernel):
        use = module.usage[plan.kernel]
        assert use.spill_stores == use.spill_loads == 0, (plan.kernel, use)
        try:
            code = sass(module, plan.kernel)
        except SassUnavailable:
            continue
        stores = opcodes(code, "STG")
        # dx in 16-byte stores of the copy's kind (as many as a thread has vectors, once per
        # row in flight), the dw partials in plain 16-byte ones: nothing narrower, no other kind.
        assert stores[probe.SASS_STORE[probe.OTHER]] >= plan.vpt, (plan.kernel, stores)
        assert set(stores) <= {probe.SASS_STORE[probe.OTHER], "STG.E.128"}, (plan.kernel, stores)
