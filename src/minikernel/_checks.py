"""Input checks shared by every host wrapper.

A kernel trusts its pointers completely: give it a CPU tensor, a float64 tensor or a transposed
view and it reads the wrong bytes without a word. So every public function checks its inputs
first and raises an error that names the argument and what is wrong with it:
TypeError for a wrong type or dtype, ValueError for a wrong device, rank, shape, stride or size.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def _names(dtypes: Iterable[torch.dtype]) -> str:
    return ", ".join(str(d).removeprefix("torch.") for d in dtypes)


def check_tensor(
    op: str,
    name: str,
    t: object,
    *,
    dtypes: Iterable[torch.dtype] = FLOAT_DTYPES,
    ndim: int | None = None,
    contiguous: bool = False,
    nonempty: bool = False,
) -> torch.Tensor:
    """Raise a clear error if ``t`` is not a tensor ``op`` can take as ``name``."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(t).__name__}")
    dtypes = tuple(dtypes)
    if t.dtype not in dtypes:
        raise TypeError(
            f"{op}: {name} has dtype {str(t.dtype).removeprefix('torch.')}; "
            f"supported: {_names(dtypes)}"
        )
    if ndim is not None and t.dim() != ndim:
        raise ValueError(f"{op}: {name} must have {ndim} dimension(s), got shape {tuple(t.shape)}")
    if contiguous and not t.is_contiguous():
        raise ValueError(
            f"{op}: {name} must be contiguous, got strides {t.stride()} for shape "
            f"{tuple(t.shape)}; call .contiguous() first"
        )
    if nonempty and t.numel() == 0:
        raise ValueError(f"{op}: {name} is empty (shape {tuple(t.shape)})")
    return t


def check_same(op: str, name_a: str, a: torch.Tensor, name_b: str, b: torch.Tensor) -> None:
    """Raise if two tensors that an elementwise kernel pairs up differ in device, dtype or shape."""
    if a.device != b.device:
        raise ValueError(f"{op}: {name_a} is on {a.device} but {name_b} is on {b.device}")
    if a.dtype != b.dtype:
        raise TypeError(
            f"{op}: {name_a} has dtype {str(a.dtype).removeprefix('torch.')} but {name_b} has "
            f"{str(b.dtype).removeprefix('torch.')}; cast one of them first"
        )
    if a.shape != b.shape:
        raise ValueError(
            f"{op}: {name_a} has shape {tuple(a.shape)} but {name_b} has {tuple(b.shape)}"
        )


def check_device(op: str, impl: str, t: torch.Tensor) -> None:
    """CUDA C variants need CUDA tensors; Triton ones too unless the interpreter is on."""
    import os

    if impl.startswith("cuda:"):  # the launch path of every call: no environment lookup here
        if not t.is_cuda:
            raise ValueError(f"{op}: impl {impl!r} runs on a CUDA GPU; got a tensor on {t.device}")
        return
    interpret = os.environ.get("TRITON_INTERPRET") == "1"
    if impl.startswith("triton:") and not t.is_cuda and not interpret:
        raise ValueError(
            f"{op}: impl {impl!r} needs a CUDA tensor (got {t.device}); on a CPU machine set "
            "TRITON_INTERPRET=1 before importing minikernel to run Triton in its interpreter"
        )
    if impl.startswith("triton:") and t.is_cuda and interpret:
        raise ValueError(
            f"{op}: TRITON_INTERPRET=1 is set, so Triton runs on the CPU; got a tensor on "
            f"{t.device}. Unset it to run Triton on the GPU"
        )
