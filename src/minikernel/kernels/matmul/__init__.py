"""Matrix product ``act(a @ b + bias)``: a CUDA C ladder in fp32 and a Triton GEMM with a fused
epilogue for fp32 (TF32), fp16 and bf16.

Public entry point: :func:`matmul`. ``VARIANTS`` lists the implementations by registry key;
``PEERS`` the baselines the lab measures beside them (cuBLAS through ``torch.mm``).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F

from minikernel._checks import FLOAT_DTYPES, check_device, check_tensor
from minikernel.kernels._registry import Variant

from .reference import make_inputs, reference

OP = "matmul"
HERE = Path(__file__).resolve().parent
CU_FILE = HERE / "matmul.cu"
ACTIVATIONS = (None, "relu", "gelu")
_INT_MAX = 2**31 - 1
_GRID_Y_MAX = 65535

__all__ = [
    "ACTIVATIONS",
    "OP",
    "PEERS",
    "VARIANTS",
    "make_inputs",
    "make_runner",
    "matmul",
    "matmul_flops",
    "reference",
]


def matmul_flops(m: int, n: int, k: int) -> int:
    """The FLOP model: m * n dot products of length k, a multiply and an add per term."""
    return 2 * m * n * k


# --8<-- [start:cuda_launch]
def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


def _launch_cuda(rung: int, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    from minikernel.cuda import get_kernel

    m, k = a.shape
    n = b.shape[1]
    # (grid, block) per rung; grid.x is the dimension that the threads of a warp walk along.
    launch = {
        1: ((_cdiv(m, 32), _cdiv(n, 8)), (32, 8)),  # warp along M: uncoalesced on purpose
        2: ((_cdiv(n, 32), _cdiv(m, 8)), (32, 8)),
        3: ((_cdiv(n, 32), _cdiv(m, 32)), (32, 32)),
        4: ((_cdiv(n, 128), _cdiv(m, 128)), 256),
        5: ((_cdiv(n, 128), _cdiv(m, 128)), 256),
    }
    grid, block = launch[rung]
    if grid[1] > _GRID_Y_MAX:
        raise ValueError(f"{OP}: cuda:{rung} cannot launch {grid[1]} block rows (max 65535)")
    args: tuple = (a, b, c, ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k))
    if rung == 5:
        # float4 loads and stores need every row to start on a 16-byte boundary.
        vec = k % 4 == 0 and n % 4 == 0 and all(t.data_ptr() % 16 == 0 for t in (a, b, c))
        args += (ctypes.c_int(int(vec)),)
    get_kernel(CU_FILE, f"matmul_kernel{rung}_f32")(grid, block, args)
    return c


# --8<-- [end:cuda_launch]


def _triton(rung: int) -> Callable[..., torch.Tensor]:
    def run(
        a: torch.Tensor,
        b: torch.Tensor,
        c: torch.Tensor,
        bias: torch.Tensor | None = None,
        activation: str | None = None,
    ) -> torch.Tensor:
        from . import triton_kernels as tk

        if rung >= 2 and tk.tma_compatible(a, b, c):
            launch = tk.launch_kernel2 if rung == 2 else tk.launch_kernel3
            return launch(a, b, c, bias, activation)
        # kernels 2-3 build TMA descriptors, which need 16-byte aligned rows; kernel1 takes any.
        return tk.launch_kernel1(a, b, c, bias, activation)

    return run


def _torch(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
) -> torch.Tensor:
    """Fallback on any device: PyTorch in float32 (exact fp32 products), rounded once."""
    r = a.float() @ b.float()
    if bias is not None:
        r += bias.float()
    if activation is not None:
        r = F.relu(r) if activation == "relu" else F.gelu(r)
    return c.copy_(r)


_CUDA_SOURCES = (CU_FILE, HERE.parent.parent / "cuda" / "common.cuh", Path(__file__))
_TRITON_SOURCES = (HERE / "triton_kernels.py",)
_F32 = (torch.float32,)


def _cuda_variant(rung: int, summary: str) -> Variant:
    return Variant(
        OP,
        f"cuda:{rung}",
        lambda a, b, c, *_: _launch_cuda(rung, a, b, c),
        _CUDA_SOURCES,
        summary,
        dtypes=_F32,
    )


VARIANTS: dict[str, Variant] = {
    "cuda:1": _cuda_variant(1, "one thread per output, warps along a column: uncoalesced"),
    "cuda:2": _cuda_variant(2, "one thread per output, warps along a row: coalesced"),
    "cuda:3": _cuda_variant(3, "32x32 tiles of A and B in shared memory"),
    "cuda:4": _cuda_variant(4, "128x128 block tiles, 8x8 register tiles per thread"),
    "cuda:5": _cuda_variant(5, "register tiles + float4 loads, conflict-free reads, double buffer"),
    "triton:1": Variant(
        OP,
        "triton:1",
        _triton(1),
        _TRITON_SOURCES,
        "autotuned tiles, grouped order, fused bias + activation",
    ),
    "triton:2": Variant(
        OP,
        "triton:2",
        _triton(2),
        _TRITON_SOURCES,
        "triton:1 with TMA tensor descriptors (falls back to triton:1 on unaligned rows)",
    ),
    "triton:3": Variant(
        OP,
        "triton:3",
        _triton(3),
        _TRITON_SOURCES,
        "triton:2, persistent: one program per SM, tile and K loops flattened and pipelined",
    ),
}


def default_impl(t: torch.Tensor) -> str:
    """The implementation :func:`matmul` picks when none is named."""
    if t.is_cuda or os.environ.get("TRITON_INTERPRET") == "1":
        return "triton:3"
    return "torch"


def matmul(
    a: torch.Tensor,
    b: torch.Tensor,
    bias: torch.Tensor | None = None,
    activation: str | None = None,
    *,
    out: torch.Tensor | None = None,
    impl: str | None = None,
) -> torch.Tensor:
    """Return ``activation(a @ b + bias)``.

    ``a``: (M, K), ``b``: (K, N), contiguous, same dtype (float32, float16 or bfloat16) and
    device; ``bias``: (N,) of the same dtype, or None; ``activation``: None, "relu" or "gelu"
    (exact). Products accumulate in fp32; fp32 inputs go through TF32 in the Triton kernels
    (``cuda:N`` and ``"torch"`` compute in full fp32). ``impl``: a key of ``VARIANTS`` or
    ``"torch"``. The CUDA C rungs take float32 and no bias or activation.
    Raises TypeError / ValueError naming the argument at fault.
    """
    op = OP
    check_tensor(op, "a", a, dtypes=FLOAT_DTYPES, ndim=2, contiguous=True, nonempty=True)
    check_tensor(op, "b", b, dtypes=FLOAT_DTYPES, ndim=2, contiguous=True, nonempty=True)
    if a.device != b.device:
        raise ValueError(f"{op}: a is on {a.device} but b is on {b.device}")
    if a.dtype != b.dtype:
        raise TypeError(
            f"{op}: a has dtype {str(a.dtype).removeprefix('torch.')} but b has "
            f"{str(b.dtype).removeprefix('torch.')}; cast one of them first"
        )
    (m, k), (kb, n) = a.shape, b.shape
    if k != kb:
        raise ValueError(
            f"{op}: inner dimensions differ: a is {tuple(a.shape)} and b is {tuple(b.shape)}"
        )
    if max(m, n, k) > _INT_MAX:
        raise ValueError(f"{op}: dimensions must be below 2^31, got M={m}, N={n}, K={k}")
    if bias is not None:
        check_tensor(op, "bias", bias, dtypes=(a.dtype,), ndim=1, contiguous=True)
        if bias.shape[0] != n or bias.device != a.device:
            raise ValueError(
                f"{op}: bias must have N={n} elements on {a.device}, got shape "
                f"{tuple(bias.shape)} on {bias.device}"
            )
    if activation not in ACTIVATIONS:
        raise ValueError(f"{op}: activation must be one of {ACTIVATIONS}, got {activation!r}")
    if out is None:
        out = torch.empty(m, n, dtype=a.dtype, device=a.device)
    else:
        check_tensor(op, "out", out, dtypes=(a.dtype,), ndim=2, contiguous=True)
        if tuple(out.shape) != (m, n) or out.device != a.device:
            raise ValueError(
                f"{op}: out must be ({m}, {n}) on {a.device}, got {tuple(out.shape)} on "
                f"{out.device}"
            )
    impl = impl or default_impl(a)
    if impl == "torch":
        return _torch(a, b, out, bias, activation)
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {[*VARIANTS, 'torch']}")
    variant = VARIANTS[impl]
    if a.dtype not in variant.dtypes:
        raise TypeError(f"{op}: impl {impl!r} takes float32 only, got {a.dtype}")
    if variant.language == "cuda" and (bias is not None or activation is not None):
        raise ValueError(
            f"{op}: impl {impl!r} computes a @ b only; bias and activation are fused in the "
            "triton impls"
        )
    check_device(op, impl, a)
    return variant.fn(a, b, out, bias, activation)


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("cublas",)
"""cuBLAS through torch.mm; for float32 with TF32 off (full fp32 products)."""

EPILOGUES = {"none": (False, None), "bias": (True, None), "bias+relu": (True, "relu")}
EPILOGUES["bias+gelu"] = (True, "gelu")


def make_runner(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    epilogue: str = "none",
    device: str = "cuda",
    seed: int = 0,
    *,
    inputs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None,
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that runs ``impl`` once on seeded inputs of ``shape`` = (M, N, K),
    or on ``inputs`` = (a, b, bias) when given (a lab shares one set among implementations).

    ``epilogue``: "none", "bias", "bias+relu" or "bias+gelu". Peers: "cublas" (torch.mm, for
    float32 with TF32 off) and "torch:eager" (torch.addmm and then the activation: the unfused
    baseline of an epilogue).
    """
    m, n, k = shape
    has_bias, activation = EPILOGUES[epilogue]
    a, b, bias = inputs if inputs is not None else make_inputs(m, n, k, dtype, device, seed)
    bias_or_none = bias if has_bias else None
    c = torch.empty(m, n, dtype=dtype, device=device)
    if impl in ("cublas", "torch:eager"):
        if impl == "cublas" and epilogue != "none":
            raise ValueError(
                f"{OP}: 'cublas' is the plain product; use 'torch:eager' for {epilogue}"
            )
        act = {None: None, "relu": F.relu, "gelu": F.gelu}[activation]

        def run_torch() -> torch.Tensor:
            prev = torch.backends.cuda.matmul.allow_tf32
            torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means fp32 products here
            try:
                r = torch.mm(a, b, out=c) if bias_or_none is None else torch.addmm(bias, a, b)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = prev
            return r if act is None else act(r)

        return run_torch
    return lambda: matmul(a, b, bias_or_none, activation, out=c, impl=impl)
