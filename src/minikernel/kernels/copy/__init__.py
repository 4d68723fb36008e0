"""Copy: ``out = x``, lesson 2's sanity kernel and lesson 6's BLOCK_SIZE sweep.

A copy does no arithmetic, so when it fails the fault is either the machine's (no GPU, Triton's
interpreter off on a CPU machine, a tensor on the wrong device, a missing driver) or the
kernel's (a wrong mask, a grid one block short, a compile error). This package tells the two
apart: environment problems raise :class:`EnvironmentFault`, a kernel that runs but copies
wrongly raises :class:`KernelFault`, and :func:`classify_fault` sorts any other exception.

Public entry points: :func:`copy`, :func:`sanity_check`. ``VARIANTS`` lists the implementations.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import torch

from minikernel._checks import FLOAT_DTYPES, check_same, check_tensor
from minikernel.kernels._registry import Variant

from .reference import EXACT, make_input, reference

OP = "copy"
HERE = Path(__file__).resolve().parent

__all__ = [
    "EXACT",
    "OP",
    "PEERS",
    "VARIANTS",
    "EnvironmentFault",
    "KernelFault",
    "bytes_moved",
    "check_environment",
    "classify_fault",
    "copy",
    "make_input",
    "make_runner",
    "reference",
    "sanity_check",
]


class EnvironmentFault(RuntimeError):
    """The machine cannot run the kernel: no GPU, interpreter not set, tensor on the wrong
    device, Triton or the driver missing. Nothing is wrong with the kernel's code."""


class KernelFault(AssertionError):
    """The kernel ran (or tried to compile) and is wrong: its output differs from the input,
    it wrote outside its output, left part of it unwritten, or did not compile."""


def bytes_moved(n: int, dtype: torch.dtype) -> int:
    """The byte model: each element read once and written once."""
    return 2 * n * torch.empty((), dtype=dtype).element_size()


# --8<-- [start:environment]
def _interpreted() -> bool:
    """True when the kernels were decorated in interpreter mode. Triton reads TRITON_INTERPRET
    when ``@triton.jit`` runs (at import), so setting it later changes nothing."""
    from .triton_kernels import copy_kernel1

    return type(copy_kernel1).__name__ == "InterpretedFunction"


def check_environment(op: str, x: torch.Tensor) -> None:
    """Raise EnvironmentFault if this machine cannot run a Triton kernel on ``x``."""
    interpret_env = os.environ.get("TRITON_INTERPRET") == "1"
    interpreted = _interpreted()
    if interpret_env != interpreted:
        raise EnvironmentFault(
            f"{op}: TRITON_INTERPRET is {'set' if interpret_env else 'unset'} now but was "
            f"{'set' if interpreted else 'unset'} when the kernels were imported; Triton reads "
            "it once, at import: set it before importing minikernel (or triton)"
        )
    if x.is_cuda and interpreted:
        raise EnvironmentFault(
            f"{op}: Triton runs in its CPU interpreter (TRITON_INTERPRET=1) but x is on "
            f"{x.device}; unset TRITON_INTERPRET to run on the GPU, or pass a CPU tensor"
        )
    if x.is_cuda or (x.device.type == "cpu" and interpreted):
        return
    if x.device.type != "cpu":
        raise EnvironmentFault(
            f"{op}: x is on {x.device}; Triton kernels run on CUDA GPUs, or on the CPU in "
            "Triton's interpreter (TRITON_INTERPRET=1)"
        )
    if torch.cuda.is_available():
        raise EnvironmentFault(
            f"{op}: x is on the CPU but a Triton kernel reads GPU memory; move it first "
            "(x = x.cuda())"
        )
    raise EnvironmentFault(
        f"{op}: no CUDA GPU is visible to PyTorch and TRITON_INTERPRET is not set; on a "
        "CPU-only machine set TRITON_INTERPRET=1 before importing triton to run kernels in "
        "its interpreter (correctness only, no timing)"
    )


# Messages of errors that come from the machine, not from the kernel (lower case).
_ENVIRONMENT_SIGNS = (
    "no cuda gpus are available",
    "found no nvidia driver",
    "cuda driver version is insufficient",
    "no kernel image is available",
    "cuda_error_no_device",
    "libcuda",
    "unsupported toolchain",
    "out of memory",
)
# Messages that mean the kernel touched memory it should not have.
_KERNEL_SIGNS = ("illegal memory access", "misaligned address", "device-side assert")


def classify_fault(exc: BaseException) -> str:
    """Sort an exception from building or running a kernel: ``"environment"`` (fix the machine),
    ``"kernel"`` (fix the kernel), ``"input"`` (fix the call) or ``"unknown"``."""
    if isinstance(exc, EnvironmentFault | ImportError):
        return "environment"
    if isinstance(exc, KernelFault):
        return "kernel"
    # Triton's own errors: the kernel did not compile, failed in the interpreter, or asked for
    # more shared memory / threads than a multiprocessor has.
    if type(exc).__name__ in ("CompilationError", "InterpreterError", "OutOfResources"):
        return "kernel"
    text = str(exc).lower()
    if any(s in text for s in _ENVIRONMENT_SIGNS):
        return "environment"
    if any(s in text for s in _KERNEL_SIGNS):
        return "kernel"
    if isinstance(exc, TypeError | ValueError):
        return "input"
    return "unknown"


# --8<-- [end:environment]


def _triton1(x: torch.Tensor, out: torch.Tensor, block_size: int, num_warps: int) -> torch.Tensor:
    from .triton_kernels import launch_kernel1

    launch_kernel1(x, out, block_size, num_warps)
    return out


_TRITON_SOURCES = (HERE / "triton_kernels.py",)

VARIANTS: dict[str, Variant] = {
    "triton:1": Variant(
        OP,
        "triton:1",
        lambda x, o: _triton1(x, o, 1024, 4),
        _TRITON_SOURCES,
        "blocks of 1024 elements over 4 warps, masked tail",
    ),
}


def _check_power_of_two(op: str, name: str, value: object, lo: int, hi: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{op}: {name} must be an int, got {type(value).__name__}")
    if value < lo or value > hi or value & (value - 1):
        raise ValueError(f"{op}: {name} must be a power of two from {lo} to {hi}, got {value}")
    return value


# --8<-- [start:copy]
def copy(
    x: torch.Tensor,
    *,
    out: torch.Tensor | None = None,
    impl: str = "triton:1",
    block_size: int = 1024,
    num_warps: int = 4,
) -> torch.Tensor:
    """Return a copy of ``x`` made by a Triton kernel.

    ``x``: a contiguous float32/float16/bfloat16 tensor of any shape (copied as a flat
    vector; for strided 2-D views use ``minikernel.kernels.transpose.copy2d``).
    ``block_size`` (a power of two, 16 to 65536) and ``num_warps`` (1 to 32) choose the
    launch. Environment problems raise EnvironmentFault; bad arguments TypeError/ValueError.
    """
    op = OP
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES, contiguous=True)
    if out is None:
        out = torch.empty_like(x)
    else:
        check_tensor(op, "out", out, dtypes=FLOAT_DTYPES, contiguous=True)
        check_same(op, "x", x, "out", out)
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {list(VARIANTS)}")
    _check_power_of_two(op, "block_size", block_size, 16, 65536)
    _check_power_of_two(op, "num_warps", num_warps, 1, 32)
    check_environment(op, x)  # the machine's faults, before the kernel can be blamed
    if x.numel() == 0:
        return out
    return _triton1(x, out, block_size, num_warps)


# --8<-- [end:copy]


# --8<-- [start:sanity]
def sanity_check(
    kernel: Callable[[torch.Tensor, torch.Tensor], object] | None = None, *, n: int = 3073
) -> str:
    """Lesson 2's sanity check: can this machine run a Triton kernel, and does it copy right?

    Runs ``kernel(x, out)`` (default: :func:`copy`) on ``n`` random float32 values inside
    guard margins (3073 = three blocks of 1024 and a last block of one element). Returns a
    one-line report; raises EnvironmentFault if the machine is at fault and KernelFault if the
    kernel is.
    """
    from minikernel.testing import run_checked

    try:
        import triton
    except ImportError as exc:  # pragma: no cover - triton is a dependency
        raise EnvironmentFault(f"{OP}: triton is not importable ({exc})") from exc
    interpreted = _interpreted()
    if interpreted or not torch.cuda.is_available():
        check_environment(OP, torch.empty(0))  # on the CPU: fine only under the interpreter
    device = "cpu" if interpreted else "cuda"
    x = make_input(n, torch.float32, device, seed=n)
    run = kernel or (lambda src, dst: copy(src, out=dst))
    try:
        result = run_checked(run, [x], reference(x), tolerances=EXACT, name="copy")
    except Exception as exc:
        if classify_fault(exc) == "environment":
            raise EnvironmentFault(f"{OP}: {type(exc).__name__}: {exc}") from exc
        raise KernelFault(f"{OP}: the kernel failed: {type(exc).__name__}: {exc}") from exc
    if not result.ok:
        raise KernelFault(result.message)
    where = "CPU (Triton interpreter)" if interpreted else torch.cuda.get_device_name()
    return (
        f"sanity check passed: {n} float32 values copied bit for bit on {where} "
        f"(triton {triton.__version__}, torch {torch.__version__})"
    )


# --8<-- [end:sanity]


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager",)


def make_runner(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    block_size: int | str = 1024,
    num_warps: int | str = 4,
    device: str = "cuda",
    seed: int = 0,
) -> Callable[[], torch.Tensor]:
    """A no-argument callable that copies seeded data of ``shape`` once with ``impl``.
    ``block_size`` / ``num_warps`` (ints, or strings from the ncu command line) pick the
    launch of triton:1."""
    (n,) = shape
    x = make_input(n, dtype, device, seed)
    out = torch.empty_like(x)
    if impl == "torch:eager":
        return lambda: out.copy_(x)
    bs, nw = int(block_size), int(num_warps)
    return lambda: copy(x, out=out, impl=impl, block_size=bs, num_warps=nw)
