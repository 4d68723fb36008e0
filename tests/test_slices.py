"""How rows are cut into thread-block-cluster slices (minikernel.cuda.slices), on the CPU."""

from __future__ import annotations

import pytest

from minikernel.cuda.slices import SLICE_BYTES, VECS_PER_THREAD, SlicePlan, plan_slices

H200_OPTIN = 232448  # bytes of shared memory an H100/H200 block may opt in to


@pytest.mark.parametrize(
    ("nvec", "want"),
    [
        (1, SlicePlan(1, 1, 128)),  # the smallest row: one block, fewest threads
        (512, SlicePlan(1, 512, 128)),  # 4096 bf16: 4 vectors per thread
        (2048, SlicePlan(1, 2048, 128)),  # 16384 bf16: 32 KB, 16 vectors per thread
        (4096, SlicePlan(1, 4096, 512)),  # exactly one 64 KB slice: a wide block (measured)
        (4097, SlicePlan(2, 2049, 256)),  # one vector more: a cluster of two half slices
        (16032, SlicePlan(4, 4008, 256)),  # a 128256-class bf16 row: four ~64 KB slices
        (32768, SlicePlan(8, 4096, 256)),  # 262144 bf16: eight 64 KB slices
        (65536, SlicePlan(8, 8192, 512)),  # 262144 fp32: eight 128 KB slices, one block per SM
    ],
)
def test_smallest_cluster_whose_slices_fit(nvec: int, want: SlicePlan) -> None:
    got = plan_slices(nvec, H200_OPTIN)
    assert got == want
    assert got.cluster * got.per_block >= nvec  # the slices cover the row
    assert (got.cluster - 1) * got.per_block < nvec  # and none is empty


def test_slice_bytes_and_threads() -> None:
    sp = plan_slices(4096, H200_OPTIN)
    assert sp is not None and sp.smem == SLICE_BYTES
    assert sp.per_block <= sp.threads * VECS_PER_THREAD
    assert plan_slices(4096, H200_OPTIN, slice_bytes=32 * 1024) == SlicePlan(2, 2048, 128)
    assert plan_slices(3072, H200_OPTIN) == SlicePlan(1, 3072, 512)  # WIDE_BLOCK_MIN
    assert plan_slices(3071, H200_OPTIN) == SlicePlan(1, 3071, 256)
    assert plan_slices(4096, H200_OPTIN, threads=256) == SlicePlan(1, 4096, 256)


def test_rows_past_eight_opt_in_slices_are_refused() -> None:
    most = (H200_OPTIN - 1024) // 16  # vectors in one block's largest slice
    assert plan_slices(8 * most, H200_OPTIN) == SlicePlan(8, most, 512)  # capped at 512
    assert plan_slices(8 * most + 8, H200_OPTIN) is None
    with pytest.raises(ValueError, match="at least one vector"):
        plan_slices(0, H200_OPTIN)
