"""Lesson 10 (from correct to production): solutions.

Exercise 1: an autotuning search space for the copy kernel: valid configs only, a key that
does not retune for every size, and a single config under the interpreter.
Exercise 2: a debugging ladder: check semantics on the smallest cases first and report the
first rung that fails, before any performance work.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import torch
import triton
import triton.language as tl

from minikernel.testing import run_checked


# --8<-- [start:ex1]
def copy_autotune_configs(interpret: bool | None = None) -> list[triton.Config]:
    """BLOCK_SIZE x num_warps pairs worth trying for a 1-D copy.

    Kept: every thread gets at least one 16-byte vector (BLOCK_SIZE >= 4 * 32 * num_warps)
    and at most 64 elements (so the registers never spill): about a dozen pairs, not hundreds,
    since each config costs a compile and a timing on first use. The interpreter times
    nothing, so it gets one config.
    """
    if interpret is None:
        interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if interpret:
        return [triton.Config({"BLOCK_SIZE": 1024}, num_warps=4)]
    configs = []
    for num_warps in (2, 4, 8):
        for block in (512, 1024, 2048, 4096, 8192):
            per_thread = block // (32 * num_warps)
            if 4 <= per_thread <= 64:
                configs.append(triton.Config({"BLOCK_SIZE": block}, num_warps=num_warps))
    return configs


@triton.autotune(configs=copy_autotune_configs(), key=["size_class"])
@triton.jit(do_not_specialize=["size_class"])  # a key, not a value the code depends on
def autotuned_copy_kernel(x_ptr, out_ptr, n, size_class, BLOCK_SIZE: tl.constexpr):
    # size_class (log2 of n, rounded up) is only the autotuning key: sizes in one power-of-two
    # class share the tuned config instead of each paying for a new search.
    offsets = tl.program_id(axis=0).to(tl.int64) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask), mask=mask)


def autotuned_copy(x: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Copy contiguous ``x`` with the config the autotuner picked for its size class."""
    out = torch.empty_like(x) if out is None else out
    n = x.numel()
    size_class = max(n - 1, 0).bit_length()

    def grid(meta: dict[str, Any]) -> tuple[int]:  # the grid depends on the chosen BLOCK_SIZE
        return (triton.cdiv(n, meta["BLOCK_SIZE"]),)

    autotuned_copy_kernel[grid](x, out, n, size_class)
    return out


# --8<-- [end:ex1]


# --8<-- [start:ex2]
def debug_ladder(
    kernel: Callable[[torch.Tensor, torch.Tensor], object],
    block_size: int,
    *,
    device: str = "cpu",
    dtype: torch.dtype = torch.float32,
) -> list[tuple[str, bool, str]]:
    """Climb from the smallest case to the general one; stop at the first failure.

    Each rung is (name, passed, checker message). A copy kernel that fails "one element" has
    a wrong mask or grid; one that passes "one block" but fails "one past a block" has a
    wrong tail; only a kernel that passes every rung is worth timing.
    """
    rungs = [
        ("one element", 1),
        ("one block", block_size),
        ("one past a block", block_size + 1),
        ("many blocks, odd size", 7 * block_size + 3),
    ]
    results = []
    for name, n in rungs:
        x = torch.randn(n, generator=torch.Generator().manual_seed(n)).to(dtype).to(device)
        zero = {dtype: (0.0, 0.0)}  # a copy must be exact
        check = run_checked(kernel, [x], x.double(), tolerances=zero, name=name)
        results.append((name, check.ok, check.message))
        if not check.ok:
            break
    return results


# --8<-- [end:ex2]
