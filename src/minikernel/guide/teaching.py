"""Small kernels of the Triton guide that are not ops: each one makes one idea visible.

- :func:`program_ids` (lesson 3): every element records which program instance wrote it, so
  a 1-D grid of ``cdiv(n, BLOCK_SIZE)`` programs can be seen.
- :func:`tensor_metadata`, :func:`element_address` (lesson 3): what PyTorch keeps on the host
  about a tensor, and the one number (an address) a kernel receives.
- :func:`masked_load` (lesson 4): what the masked-off lanes of a block hold (``other``).
- :func:`tile_ids` (lesson 7): which program of a 2-D tiling handles which element.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl


# --8<-- [start:program_ids]
@triton.jit
def program_id_kernel(out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)  # which of the cdiv(n, BLOCK_SIZE) programs this is
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # the elements it owns
    # pid is a scalar; storing it into a block of pointers broadcasts it to every lane.
    tl.store(out_ptr + offsets, pid, mask=offsets < n)


def program_ids(n: int, block_size: int, device: str | torch.device = "cpu") -> torch.Tensor:
    """An int32 vector of ``n`` elements, each holding the id of the program that wrote it."""
    out = torch.full((n,), -1, dtype=torch.int32, device=device)
    grid = (triton.cdiv(n, block_size),)
    program_id_kernel[grid](out, n, BLOCK_SIZE=block_size)
    return out


# --8<-- [end:program_ids]


# --8<-- [start:metadata]
def tensor_metadata(t: torch.Tensor) -> dict[str, Any]:
    """What PyTorch knows about ``t`` on the host. A kernel gets none of it: Triton passes
    ``data_ptr()`` (the address of element [0, 0, ...]) and whatever scalars you pass too."""
    return {
        "shape": tuple(t.shape),
        "strides": t.stride(),  # in elements, one per dimension
        "storage_offset": t.storage_offset(),  # elements between the storage's start and t[0...]
        "dtype": str(t.dtype).removeprefix("torch."),
        "element_size": t.element_size(),
        "device": str(t.device),
        "data_ptr": t.data_ptr(),
        "contiguous": t.is_contiguous(),
    }


def element_address(t: torch.Tensor, *index: int) -> int:
    """The byte address of ``t[index]``: the pointer arithmetic a kernel does."""
    if len(index) != t.dim():
        raise ValueError(f"element_address: need {t.dim()} indices, got {len(index)}")
    offset = sum(i * s for i, s in zip(index, t.stride(), strict=True))
    return t.data_ptr() + offset * t.element_size()


# --8<-- [end:metadata]


# --8<-- [start:masked_load]
@triton.jit
def masked_load_kernel(x_ptr, out_ptr, n, other, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(axis=0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    # Masked-off lanes do not touch memory; they hold `other` instead (undefined without it).
    vals = tl.load(x_ptr + offsets, mask=mask, other=other)
    tl.store(out_ptr + offsets, vals)  # no mask: out has room for whole blocks


def masked_load(x: torch.Tensor, block_size: int, other: float = 0.0) -> torch.Tensor:
    """``x`` padded to a whole number of blocks: the tail shows what masked lanes held."""
    n = x.numel()
    blocks = triton.cdiv(n, block_size)
    out = torch.empty(blocks * block_size, dtype=x.dtype, device=x.device)
    masked_load_kernel[(blocks,)](x, out, n, other, BLOCK_SIZE=block_size)
    return out


# --8<-- [end:masked_load]


# --8<-- [start:tile_ids]
@triton.jit
def tile_id_kernel(out_ptr, M, N, stride_m, stride_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(axis=0)
    tiles_n = tl.cdiv(N, BLOCK_N)
    rows = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    ids = tl.full((BLOCK_M, BLOCK_N), pid, dtype=tl.int32)
    tl.store(out_ptr + rows[:, None] * stride_m + cols[None, :] * stride_n, ids, mask=mask)


def tile_ids(
    m: int, n: int, block_m: int, block_n: int, device: str | torch.device = "cpu"
) -> torch.Tensor:
    """An ``m x n`` int32 matrix holding, for each element, the program that owns it."""
    out = torch.full((m, n), -1, dtype=torch.int32, device=device)
    grid = (triton.cdiv(m, block_m) * triton.cdiv(n, block_n),)
    tile_id_kernel[grid](out, m, n, *out.stride(), BLOCK_M=block_m, BLOCK_N=block_n)
    return out


# --8<-- [end:tile_ids]
