"""Which tensor-core and data-movement instructions each GPU generation has, as ptxas sees them.

Checkpoint C3a says an RTX 5090 (sm_120) has neither Hopper's wgmma nor datacenter Blackwell's
tensor memory (TMEM, the tcgen05 instructions), so dense GEMM there cannot use the kernels cuBLAS
and CUTLASS build on those features. That is a claim about the hardware; this test makes it a
fact the compiler checks. Each probe in tests/fixtures/arch_probes/ uses one instruction family
in inline PTX and is compiled with NVRTC (no GPU needed) for each target: it must compile where
the table says yes and be refused by ptxas, naming the instruction, where it says no.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from minikernel.cuda import CudaCompileError, CudaUnavailableError, compile_file

PROBES = Path(__file__).resolve().parent / "fixtures" / "arch_probes"

# Targets: sm_80 (A100; sm_86 and sm_89, RTX 30xx and 40xx, behave the same here), sm_90a (H100,
# H200), sm_100a (B200, datacenter Blackwell), sm_120a (RTX 5090, consumer Blackwell). An "a"
# target enables the features only that generation has, which its successors may drop.
# --8<-- [start:table]
TARGETS = ["sm_80", "sm_90a", "sm_100a", "sm_120a"]
HAS = {
    # warp-level MMA (mma.sync): every NVIDIA GPU since Ampere
    "mma_sync": dict(sm_80=True, sm_90a=True, sm_100a=True, sm_120a=True),
    # TMA: bulk tensor copies between global and shared memory
    "tma": dict(sm_80=False, sm_90a=True, sm_100a=True, sm_120a=True),
    # warpgroup MMA (wgmma): Hopper only; neither Blackwell has it
    "wgmma": dict(sm_80=False, sm_90a=True, sm_100a=False, sm_120a=False),
    # tensor memory (TMEM), where tcgen05.mma accumulates: SM100 only
    "tcgen05": dict(sm_80=False, sm_90a=False, sm_100a=True, sm_120a=False),
}
# --8<-- [end:table]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("probe", sorted(HAS))
def test_instruction_availability(probe: str, target: str) -> None:
    path = PROBES / f"{probe}.cu"
    expected = HAS[probe][target]
    try:
        compile_file(path, target)
    except CudaUnavailableError as e:  # pragma: no cover - NVRTC is a declared dependency
        pytest.skip(str(e))
    except CudaCompileError as e:
        assert not expected, f"{probe} should compile for {target}:\n{e}"
        log = str(e)
        # Refused for the right reason (the target lacks the instruction), not a typo in the PTX.
        assert "not supported on .target" in log or "requires .target" in log, log
        return
    assert expected, f"{probe} compiled for {target}, but the table says {target} lacks it"


def test_every_probe_is_in_the_table() -> None:
    assert sorted(p.stem for p in PROBES.glob("*.cu")) == sorted(HAS)
