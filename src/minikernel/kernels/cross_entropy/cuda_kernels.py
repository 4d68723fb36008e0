"""Host side of cross_entropy.cu: which cluster kernel runs a (T, V) input, and its launch.

:func:`plan` is pure (shape, dtype, alignment and two facts about the GPU), so the CPU tests
check it; :func:`launch` runs it, or returns False for a case the kernel does not take (no
clusters before sm_90, x and dx aligned differently, a row longer than 8 slices, the
per-row-scaled backward of reduction='none'), which the caller then gives to Triton.
"""

from __future__ import annotations

import ctypes
import functools
from pathlib import Path

import torch

from minikernel.cuda.slices import SlicePlan, plan_slices

HERE = Path(__file__).resolve().parent
CU_FILE = HERE / "cross_entropy.cu"
SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}
_INT32_MAX = 2**31 - 1
LOSS_THREADS = 128  # the loss-only kernel's block (see cross_entropy.cu)
LOSS_U = 4  # and how many 16-byte vectors each of its threads has in flight


def plan(
    t: int,
    v: int,
    dtype: torch.dtype,
    cc: tuple[int, int],
    smem_optin: int,
    smooth: bool,
    loss_only: bool = False,
    **knobs: int,
) -> tuple[str, SlicePlan] | None:
    """(kernel name, slices) for T rows of V logits, or None when the kernel cannot run it.
    ``loss_only``: the kernel that streams each row through one block for the loss and writes
    no gradient (no slices, no shared memory; ``knobs`` do not apply to it)."""
    if cc < (9, 0) or dtype not in SUFFIX or v > _INT32_MAX:
        return None
    vn = 16 // torch.empty((), dtype=dtype).element_size()
    ls = "_ls" if smooth else ""
    if loss_only:  # one block per row, streamed: no slices, no shared memory
        if t > _INT32_MAX:
            return None
        sp = SlicePlan(1, max(1, v // vn), LOSS_THREADS)
        return f"cross_entropy_loss_kernel1_t{LOSS_THREADS}_u{LOSS_U}{ls}_{SUFFIX[dtype]}", sp
    sp = plan_slices(max(1, v // vn), smem_optin, **knobs)
    if sp is None or t * sp.cluster > _INT32_MAX:
        return None
    return f"cross_entropy_kernel1_t{sp.threads}_c{sp.cluster}{ls}_{SUFFIX[dtype]}", sp


@functools.cache
def _kernel(name: str, index: int):  # type: ignore[no-untyped-def]
    from minikernel.cuda import get_kernel

    with torch.cuda.device(index):
        return get_kernel(CU_FILE, name)


def launch(
    x: torch.Tensor,
    target: torch.Tensor,
    loss: torch.Tensor,
    stats: torch.Tensor,
    *,
    dx: torch.Tensor | None = None,
    n_valid: torch.Tensor | None = None,
    ignore_index: int = -100,
    label_smoothing: float = 0.0,
    total: torch.Tensor | None = None,
    mean: bool = False,
    knobs: dict | None = None,
) -> bool:
    """Loss, (T, 2) row statistics and, when ``dx`` is given (it may be ``x``), the gradient
    scaled by 1/``n_valid`` when given; without ``dx``, the loss-only kernel, which with
    ``total`` (a 0-dim tensor of x's dtype) also writes there the batch's sum of the losses,
    or with ``mean`` their mean over the targets that are not ``ignore_index``. False (nothing
    launched) for a case it does not take."""
    from minikernel.kernels.softmax.cuda_kernels import device_facts

    t, v = x.shape
    if not x.is_cuda or x.stride(1) != 1:
        return False
    if dx is not None and (
        dx.stride(1) != 1
        or (x.data_ptr() - dx.data_ptr()) % 16
        or (x.stride(0) - dx.stride(0)) * x.element_size() % 16
    ):
        return False  # the rows of x and dx would split at different columns
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    facts = device_facts(index)
    loss_only = dx is None
    p = plan(
        t,
        v,
        x.dtype,
        facts.cc,
        facts.smem_optin,
        label_smoothing > 0.0,
        loss_only,
        **(knobs or {}),
    )
    if p is None:
        return False
    name, sp = p
    null = ctypes.c_void_p(0)
    tgt = target if target.dtype == torch.int64 else target.long()
    if loss_only:
        mode = 0 if total is None else 2 if mean else 1
        # The kernel's counters and per-group partial sums (cross_entropy.cu, reduce_batch),
        # new for each call (one memset), so that calls on different streams never share them.
        groups = -(-t // LOSS_THREADS)
        tickets = torch.zeros(groups + 1, dtype=torch.int32, device=x.device) if mode else null
        partial = torch.empty(2 * groups, dtype=torch.float32, device=x.device) if mode else null
        args_loss = (
            x,
            ctypes.c_int64(x.stride(0)),
            tgt,
            loss,
            stats,
            ctypes.c_int64(v),
            ctypes.c_int64(ignore_index),
            ctypes.c_float(label_smoothing),
            ctypes.c_int32(mode),
            total if mode else null,
            tickets,
            partial,
        )
        with torch.cuda.device(index):
            _kernel(name, index)(t, sp.threads, args_loss, shared_mem=0)
        return True
    args = (
        x,
        ctypes.c_int64(x.stride(0)),
        tgt,
        loss,
        stats,
        dx,
        ctypes.c_int64(dx.stride(0)),
        n_valid if n_valid is not None else null,
        ctypes.c_int64(v),
        ctypes.c_int64(ignore_index),
        ctypes.c_float(label_smoothing),
        ctypes.c_int32(sp.per_block),
    )
    with torch.cuda.device(index):
        _kernel(name, index)(t * sp.cluster, sp.threads, args, shared_mem=sp.smem)
    return True
