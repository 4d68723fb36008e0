"""labs/probe_rmsnorm_forward_staged.py compiles against the current rmsnorm.cu, and its plain
stores are 16-byte stores, read in the SASS.
No GPU: NVRTC, and cuobjdump where it is found. In a file of its own so that pytest-xdist
(--dist loadfile) compiles it beside the other probe tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from probe_loader import load_probe


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
