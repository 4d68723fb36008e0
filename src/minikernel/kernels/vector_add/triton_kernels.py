"""Vector add in Triton: one program instance per block of BLOCK_SIZE elements.

Byte model: 3 * n * element size (read a, read b, write out).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl


# --8<-- [start:kernel1]
@triton.jit
def vector_add_kernel1(a_ptr, b_ptr, out_ptr, n, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0).to(tl.int64)  # int64: offsets past 2^31 elements stay correct
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n  # the last block runs past the end: masked lanes neither load nor store
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    # fp16/bf16 inputs are added in fp32 and rounded once on the store, as torch's a + b does
    tl.store(out_ptr + offsets, (a.to(tl.float32) + b.to(tl.float32)).to(a.dtype), mask=mask)


def launch_kernel1(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    n = out.numel()
    block = 1024  # 1024 elements over 4 warps: 8 per thread, two 16-byte loads per input
    grid = (triton.cdiv(n, block),)
    vector_add_kernel1[grid](a, b, out, n, BLOCK_SIZE=block, num_warps=4)
    return out


# --8<-- [end:kernel1]
