"""Layout checks for the 2-D kernels (transpose, copy2d, add_bias): which strided outputs a
kernel may write into, and which inputs it may not write over."""

from __future__ import annotations

import torch


def check_writable(op: str, name: str, out: torch.Tensor) -> None:
    """Raise ValueError if two elements of the 2-D tensor ``out`` share an address (an expanded
    or overlapping view): programs writing different elements would race on one location."""
    dims = sorted(
        ((size, stride) for size, stride in zip(out.shape, out.stride(), strict=True) if size > 1),
        key=lambda d: d[1],
    )
    reach = 0  # the farthest offset the smaller-stride dimensions already cover
    for size, stride in dims:
        if stride <= reach:
            raise ValueError(
                f"{op}: {name} has overlapping elements (shape {tuple(out.shape)}, strides "
                f"{out.stride()}); it must be a view in which every element has its own address"
            )
        reach += (size - 1) * stride


def check_no_alias(op: str, name: str, out: torch.Tensor, other: str, t: torch.Tensor) -> None:
    """Raise ValueError if ``out`` lives in the same storage as ``t``: an out-of-place kernel
    would overwrite input that other programs have not read yet."""
    if (
        out.numel()
        and t.numel()
        and out.untyped_storage().data_ptr() == t.untyped_storage().data_ptr()
    ):
        raise ValueError(
            f"{op}: {name} shares memory with {other}; this kernel cannot work in place, "
            f"give {name} its own storage"
        )
