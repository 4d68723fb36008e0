"""Vector add: ``out = a + b``, the first rung of every ladder in the course.

Public entry point: :func:`vector_add`. ``VARIANTS`` lists the implementations by registry key.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

from minikernel._checks import FLOAT_DTYPES, check_device, check_same, check_tensor
from minikernel.bench.peers import compiled
from minikernel.kernels._registry import Variant

from .reference import make_inputs, reference

OP = "vector_add"
HERE = Path(__file__).resolve().parent
CU_FILE = HERE / "vector_add.cu"
_SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

__all__ = [
    "OP",
    "PEERS",
    "VARIANTS",
    "bytes_moved",
    "make_inputs",
    "make_runner",
    "reference",
    "vector_add",
]


def bytes_moved(n: int, dtype: torch.dtype) -> int:
    """The byte model: each element of a and b read once, each element of out written once."""
    return 3 * n * torch.empty((), dtype=dtype).element_size()


# --8<-- [start:cuda_launch]
_VECTORS_PER_THREAD = {1: 0, 2: 1, 3: 4}  # rung -> 16-byte vectors per thread (0: scalars)


def _launch_cuda(rung: int, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    from minikernel.cuda import get_kernel

    n = out.numel()
    threads = 256
    if rung > 1 and not all(t.data_ptr() % 16 == 0 for t in (a, b, out)):
        rung = 1  # 16-byte loads need 16-byte aligned pointers; kernel1 needs nothing
    per_vector = 16 // out.element_size()
    # threads needed: one per element (rung 1), or one per _VECTORS_PER_THREAD vectors
    work = n if rung == 1 else -(-(n // per_vector) // _VECTORS_PER_THREAD[rung])
    blocks = max(-(-work // threads), 1)  # at least one block: it also covers the scalar tail
    kernel = get_kernel(CU_FILE, f"vector_add_kernel{rung}_{_SUFFIX[out.dtype]}")
    kernel(blocks, threads, (a, b, out, ctypes.c_int64(n)))
    return out


# --8<-- [end:cuda_launch]


def _triton1(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    from .triton_kernels import launch_kernel1

    return launch_kernel1(a, b, out)


def _numpy(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """CPU fallback: add in float32 with NumPy (it has no bfloat16), round once to the dtype."""
    s = a.float().numpy() + b.float().numpy()
    out.copy_(torch.from_numpy(np.ascontiguousarray(s)).to(out.dtype))
    return out


_CUDA_SOURCES = (CU_FILE, HERE.parent.parent / "cuda" / "common.cuh", Path(__file__))
_TRITON_SOURCES = (HERE / "triton_kernels.py",)

VARIANTS: dict[str, Variant] = {
    "cuda:1": Variant(
        OP,
        "cuda:1",
        lambda a, b, o: _launch_cuda(1, a, b, o),
        _CUDA_SOURCES,
        "one element per thread",
    ),
    "cuda:2": Variant(
        OP,
        "cuda:2",
        lambda a, b, o: _launch_cuda(2, a, b, o),
        _CUDA_SOURCES,
        "one 16-byte vector per thread",
    ),
    "cuda:3": Variant(
        OP,
        "cuda:3",
        lambda a, b, o: _launch_cuda(3, a, b, o),
        _CUDA_SOURCES,
        "four 16-byte vectors per thread, loads issued first",
    ),
    "triton:1": Variant(
        OP, "triton:1", _triton1, _TRITON_SOURCES, "blocks of 1024 elements, masked tail"
    ),
}


def default_impl(t: torch.Tensor) -> str:
    """The implementation :func:`vector_add` picks when none is named."""
    if t.is_cuda:
        return "triton:1"  # the fastest on the H200 (labs/results/h200/vector_add.json)
    return "triton:1" if os.environ.get("TRITON_INTERPRET") == "1" else "numpy"


def vector_add(
    a: torch.Tensor,
    b: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    impl: str | None = None,
) -> torch.Tensor:
    """Return ``a + b`` computed by one of the kernels of this package.

    ``a`` and ``b``: contiguous tensors of the same shape, dtype (float32, float16 or bfloat16)
    and device. ``impl``: a key of ``VARIANTS`` or ``"numpy"``; by default the fastest one
    available for the tensors' device. Raises TypeError / ValueError naming the argument at
    fault (wrong type, dtype, device, shape, or a non-contiguous tensor).
    """
    op = OP
    check_tensor(op, "a", a, dtypes=FLOAT_DTYPES, contiguous=True)
    check_tensor(op, "b", b, dtypes=FLOAT_DTYPES, contiguous=True)
    check_same(op, "a", a, "b", b)
    if out is None:
        out = torch.empty_like(a)
    else:
        check_tensor(op, "out", out, dtypes=FLOAT_DTYPES, contiguous=True)
        check_same(op, "a", a, "out", out)
    impl = impl or default_impl(a)
    if impl == "numpy":
        if a.is_cuda:
            raise ValueError(f"{op}: impl 'numpy' runs on the CPU; got tensors on {a.device}")
        return _numpy(a, b, out)
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {[*VARIANTS, 'numpy']}")
    check_device(op, impl, a)
    if a.numel() == 0:
        return out
    return VARIANTS[impl].fn(a, b, out)


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager", "torch:compile")


def make_runner(
    impl: str, shape: list[int], dtype: torch.dtype, device: str = "cuda", seed: int = 0
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that runs ``impl`` once on seeded inputs of ``shape``."""
    (n,) = shape
    a, b = make_inputs(n, dtype, device, seed)
    if impl == "torch:eager":
        return lambda: a + b
    if impl == "torch:compile":
        add = compiled(torch.add)
        return lambda: add(a, b)
    out = torch.empty_like(a)
    return lambda: vector_add(a, b, out=out, impl=impl)
