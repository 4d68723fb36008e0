"""How a row is cut into cluster slices for the kernels built on ``cluster.cuh``.

One pure function, shared by every op that stages rows in shared memory (softmax rung 10,
RMSNorm rung 3, cross-entropy rung cuda:1), so that their host code tests without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass

SLICE_BYTES = 64 * 1024
"""The shared memory one block stages when the row allows: three such blocks fit on an SM
(228 KB), so one block's loads overlap another's barrier and stores."""
CLUSTERS = (1, 2, 4, 8)  # 8 is the largest portable cluster size
THREADS = (128, 256, 512)
VECS_PER_THREAD = 16  # 16-byte vectors each thread stages (all in flight at once: cp.async)
WIDE_BLOCK_MIN = 3072  # a slice of this many vectors or more, in a cluster of 1 or 2: 512 threads
STATIC_SMEM_RESERVE = 1024  # bytes of static shared memory (reduction scratch) beside a slice


@dataclass(frozen=True)
class SlicePlan:
    cluster: int  # blocks per row
    per_block: int  # 16-byte vectors of the row each block stages
    threads: int  # threads per block

    @property
    def smem(self) -> int:
        """Dynamic shared memory of one block, in bytes."""
        return self.per_block * 16


def plan_slices(
    nvec: int,
    smem_optin: int,
    *,
    slice_bytes: int = SLICE_BYTES,
    threads: int | None = None,
) -> SlicePlan | None:
    """The smallest cluster whose blocks each stage at most ``slice_bytes`` of a row of
    ``nvec`` 16-byte vectors; for rows longer than 8 such slices, 8 larger slices up to what
    a block may opt in to (``smem_optin``). None when even that does not hold the row. The
    block gets the fewest threads that stage about VECS_PER_THREAD vectors each, unless
    ``threads`` is given (tuning experiments)."""
    if nvec < 1:
        raise ValueError(f"plan_slices: a row needs at least one vector, got {nvec}")
    limit = smem_optin - STATIC_SMEM_RESERVE
    for cluster in CLUSTERS:
        per_block = -(-nvec // cluster)
        if per_block * 16 <= slice_bytes:
            break
    else:
        if per_block * 16 > limit:
            return None
    if threads is None:
        if cluster <= 2 and per_block >= WIDE_BLOCK_MIN:
            threads = THREADS[-1]
        else:
            threads = next((t for t in THREADS if t * VECS_PER_THREAD >= per_block), THREADS[-1])
    return SlicePlan(cluster, per_block, threads)
