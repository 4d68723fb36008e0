"""Copy in Triton: the smallest kernel that proves the machine, the compiler and the launch work.

Versions (the registry key is triton:N):
  copy_kernel1  one program per block of BLOCK_SIZE elements, masked tail (lesson 2); the
                launcher takes BLOCK_SIZE and num_warps, so lesson 6 can sweep them

Byte model: 2 * n * element size (read x once, write out once). No arithmetic at all, so a copy
is memory-bound at every size that fills the GPU, and launch-bound below that.
"""

from __future__ import annotations

from typing import Any

import torch
import triton
import triton.language as tl

DEFAULT_BLOCK_SIZE = 1024
DEFAULT_NUM_WARPS = 4


# --8<-- [start:kernel1]
@triton.jit
def copy_kernel1(x_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)  # int64: pid * BLOCK_SIZE may pass 2^31
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)  # the BLOCK_SIZE elements of this block
    mask = offsets < n  # only the last block has lanes past the end; they neither read nor write
    x = tl.load(x_ptr + offsets, mask=mask)  # n * element size bytes read over the whole grid
    tl.store(out_ptr + offsets, x, mask=mask)  # and as many written


# --8<-- [end:kernel1]


# --8<-- [start:launch1]
def launch_kernel1(
    x: torch.Tensor,
    out: torch.Tensor,
    block_size: int = DEFAULT_BLOCK_SIZE,
    num_warps: int = DEFAULT_NUM_WARPS,
) -> Any:
    """Launch copy_kernel1 over contiguous ``x`` and ``out``; returns Triton's compiled kernel
    (its ``n_regs`` and ``n_spills`` say what this BLOCK_SIZE / num_warps pair costs)."""
    n = out.numel()
    grid = (triton.cdiv(n, block_size),)  # one program per block; the last may be partial
    return copy_kernel1[grid](x, out, n, BLOCK_SIZE=block_size, num_warps=num_warps)


# --8<-- [end:launch1]


def kernel1_resources(compiled: Any) -> dict[str, int | None]:
    """Registers and spilled registers per thread of a compiled kernel (None under the
    interpreter, which compiles nothing)."""
    regs = getattr(compiled, "n_regs", None)
    spills = getattr(compiled, "n_spills", None)
    return {
        "registers": None if regs is None else int(regs),
        "spills": None if spills is None else int(spills),
    }
