"""RMSNorm: ``y = x / sqrt(mean(x**2) + eps) * weight`` over the trailing dimensions.

Public entry points: :func:`rms_norm` (same arguments as ``torch.nn.functional.rms_norm``, with
autograd), :class:`RMSNorm` (drops in for ``torch.nn.RMSNorm``) and :class:`RMSNormFunction`.
``VARIANTS`` lists the forward kernels by registry key; every rung shares the Triton backward.
"""

from __future__ import annotations

import ctypes
import importlib
import os
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from minikernel._checks import FLOAT_DTYPES, check_device, check_tensor
from minikernel.bench.peers import compiled
from minikernel.cuda.slices import CLUSTERS, SLICE_BYTES, THREADS, SlicePlan, plan_slices

if TYPE_CHECKING:
    from minikernel.kernels.softmax.cuda_kernels import DeviceFacts
from minikernel.kernels._peers import PeerUnavailable, import_peer
from minikernel.kernels._registry import Variant, with_inputs

from .reference import make_inputs, reference, reference_grads

OP = "rmsnorm"
HERE = Path(__file__).resolve().parent
CU_FILE = HERE / "rmsnorm.cu"
_SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

__all__ = [
    "OP",
    "PEERS",
    "VARIANTS",
    "RMSNorm",
    "RMSNormFunction",
    "bwd_bytes",
    "fwd_bytes",
    "make_inputs",
    "make_runner",
    "reference",
    "reference_grads",
    "rms_norm",
    "rmsnorm_backward",
    "unfused_bytes",
]


def _size(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def fwd_bytes(m: int, n: int, dtype: torch.dtype, weight_dtype: torch.dtype | None = None) -> int:
    """Forward byte model: read x and write y once (2*M*N elements), read the weight once."""
    w = 0 if weight_dtype is None else n * _size(weight_dtype)
    return 2 * m * n * _size(dtype) + w


def bwd_bytes(m: int, n: int, dtype: torch.dtype, weight_dtype: torch.dtype | None = None) -> int:
    """Backward byte model: read x and dy, write dx (3*M*N elements); read w, write dw."""
    w = 0 if weight_dtype is None else 2 * n * _size(weight_dtype)
    return 3 * m * n * _size(dtype) + w


# The unfused RMSNorm of many model files (see _unfused below), one PyTorch kernel per op:
# (bytes read, bytes written) per element, in units of the input's element size b ("b") and of
# fp32 ("f"). With fp32 input both casts are free (PyTorch returns the same tensor).
UNFUSED_STEPS = (
    ("h = x.to(float32)", ("b", "f")),
    ("h.pow(2)", ("f", "f")),
    (".mean(-1)", ("f", "")),
    ("h * rsqrt(var + eps)", ("f", "f")),
    ("h.to(x.dtype)", ("f", "b")),
    ("w * h", ("b", "b")),
)


def unfused_bytes(m: int, n: int, dtype: torch.dtype) -> int:
    """Bytes the unfused chain moves (per-row and weight terms left out): the sum over its
    kernels of what each reads and writes, every intermediate a full M x N tensor."""
    size = {"b": _size(dtype), "f": 4, "": 0}
    total = 0
    for step, (read, write) in UNFUSED_STEPS:
        if ".to(" in step and dtype == torch.float32:
            continue  # a cast of an fp32 tensor to fp32 is the tensor itself: no kernel
        total += size[read] + size[write]
    return m * n * total


# --------------------------------------------------------------------------------------------
# Forward launchers: fn(x2d, weight or None, out, eps, rstd) -> out
# --------------------------------------------------------------------------------------------


def _round_up(a: int, b: int) -> int:
    return -(-a // b) * b


# --8<-- [start:cuda_launch]
def _launch_cuda(
    rung: int,
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None = None,
) -> torch.Tensor:
    from minikernel.cuda import get_kernel

    m, n = x.shape
    vec = 16 // x.element_size()
    tensors = [t for t in (x, w, out) if t is not None]
    if rung >= 2 and (n % vec or any(t.data_ptr() % 16 for t in tensors)):
        rung = 1  # kernels 2-6 move 16-byte vectors: rows must be whole vectors, pointers aligned
    if rung == 6:
        return _launch_cuda6(x, w, out, eps, rstd)
    if rung == 5:
        return _launch_cuda5(x, w, out, eps, rstd)
    if rung == 4:
        return _launch_cuda4(x, w, out, eps, rstd)
    if rung == 3:
        return _launch_cuda3(x, w, out, eps, rstd)
    if rung == 2:  # about two 16-byte vectors per thread; kernel2 keeps up to four
        threads = _round_up(-(-(n // vec) // 2), 32)
    else:  # about eight elements per thread, a power of two
        threads = 1 << max(0, (n // 8 - 1).bit_length())
    threads = min(1024, max(32, threads))  # whole warps: the block reduction needs them
    wf32 = "_wf32" if w is not None and w.dtype == torch.float32 else ""
    kernel = get_kernel(CU_FILE, f"rmsnorm_kernel{rung}_{_SUFFIX[x.dtype]}{wf32}")
    null = ctypes.c_void_p(0)
    args = (x, w if w is not None else null, out, rstd if rstd is not None else null)
    kernel(m, threads, (*args, ctypes.c_int64(n), ctypes.c_float(eps)))
    return out


# --8<-- [end:cuda_launch]


RMS_CLUSTER_SLICE = 32 * 1024
"""Bytes of a row each block of a cluster stages in rung 3, when the row is longer than one
block's SLICE_BYTES. Smaller than softmax's: RMSNorm does almost no arithmetic per element, so
more, shorter blocks per SM (up to six) overlap each other's barrier waits and stores better.
Measured on the H200 (a side probe at 65536 and 131072 columns, bf16 and fp32): 32 KB slices
in clusters of 4 or 8 at 0.88-0.90 of the copy ceiling, 64 KB slices at 0.75-0.82 where the
cluster is 4 and level where it is 2."""


def plan3(
    m: int, n: int, dtype: torch.dtype, smem_optin: int, cc: tuple[int, int], **knobs: int
) -> SlicePlan | None:
    """Rung 3's cluster slices for an (m, n) input (sm_90+), or None where kernel 2 runs
    instead: GPUs without clusters, rows past 8 slices. A row of up to SLICE_BYTES stays in
    one block with about two 16-byte vectors per thread (up to 512 threads); a longer one is
    cut into RMS_CLUSTER_SLICE slices of 256 threads (512 when a row past 8 such slices makes
    them larger). ``knobs`` (tuning experiments) replace that choice: see plan_slices."""
    if cc < (9, 0):
        return None
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    nvec = max(1, n // vec)
    if not knobs:
        if nvec * 16 <= SLICE_BYTES:
            knobs = {"threads": next((t for t in THREADS if 2 * t >= nvec), THREADS[-1])}
        else:
            wide = -(-nvec // CLUSTERS[-1]) * 16 > RMS_CLUSTER_SLICE
            knobs = {"slice_bytes": RMS_CLUSTER_SLICE, "threads": 512 if wide else 256}
    sp = plan_slices(nvec, smem_optin, **knobs)
    if sp is None or m * sp.cluster > 2**31 - 1:
        return None
    return sp


def _device_facts(x: torch.Tensor) -> DeviceFacts:
    """Compute capability and opt-in shared memory of the GPU holding x."""
    from minikernel.kernels.softmax.cuda_kernels import device_facts

    return device_facts(x.device.index if x.device.index is not None else 0)


def _launch_slices(
    rung: int,
    sp: SlicePlan,
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None,
    smem: int,
) -> torch.Tensor:
    """Kernels 3 to 6: one cluster of ``sp.cluster`` blocks per row, ``sp.per_block`` vectors
    of it per block; ``smem`` bytes of dynamic shared memory (kernel 3 stages its slice there,
    kernels 4 and 5 keep it in registers, kernel 6 copies it there with cp.async.ca)."""
    from minikernel.cuda import get_kernel

    m, n = x.shape
    wf32 = "_wf32" if w is not None and w.dtype == torch.float32 else ""
    name = f"rmsnorm_kernel{rung}_t{sp.threads}_c{sp.cluster}_{_SUFFIX[x.dtype]}{wf32}"
    kernel = get_kernel(CU_FILE, name)
    kernel.allow_cluster_size(sp.cluster)  # nothing to do up to 8
    null = ctypes.c_void_p(0)
    args = (x, w if w is not None else null, out, rstd if rstd is not None else null)
    extra = (ctypes.c_int64(n), ctypes.c_float(eps), ctypes.c_int32(sp.per_block))
    kernel(m * sp.cluster, sp.threads, (*args, *extra), shared_mem=smem)
    return out


def _launch_cuda3(
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None,
    **knobs: int,
) -> torch.Tensor:
    m, n = x.shape
    facts = _device_facts(x)
    sp = plan3(m, n, x.dtype, facts.smem_optin, facts.cc, **knobs)
    if sp is None:
        return _launch_cuda(2, x, w, out, eps, rstd)
    return _launch_slices(3, sp, x, w, out, eps, rstd, sp.smem)


KERNEL4_VECS = 4  # 16-byte vectors per thread in rmsnorm.cu's kernel 4 (its KERNEL4_VECS)
KERNEL4_SLICE = 512 * KERNEL4_VECS  # vectors a block of 512 threads holds: 32 KB
KERNEL4_SHAPES = ((512, 2), (512, 4), (512, 8), (1024, 8), (1024, 16))  # (threads, cluster)
"""Rung 4's blocks, smallest first: 32 KB slices of 512 threads over clusters of 2 to 8, then
64 KB slices of 1024 threads over 8 or 16 (16 is a "non-portable" cluster size, allowed on
sm_90). A side probe on the H200 measured eight 64 KB blocks faster than sixteen 32 KB ones at
131072 fp32 values."""


def plan4(m: int, n: int, dtype: torch.dtype, cc: tuple[int, int]) -> SlicePlan | None:
    """Rung 4's blocks for an (m, n) input, or None where rung 3 runs instead: rows that fit
    one block of 512 threads (up to 32 KB: a side probe on the H200 measured kernel 4 level with
    kernel 3 there, and slower at 1024 fp32 columns), rows past 1 MB, GPUs without clusters.
    The first of KERNEL4_SHAPES whose blocks hold the row."""
    if cc < (9, 0):
        return None
    nvec = max(1, n // (16 // _size(dtype)))
    if nvec <= KERNEL4_SLICE:
        return None
    for threads, cluster in KERNEL4_SHAPES:
        per_block = -(-nvec // cluster)
        if per_block <= threads * KERNEL4_VECS:
            break
    else:
        return None
    if m * cluster > 2**31 - 1:
        return None
    return SlicePlan(cluster, per_block, threads)


def _launch_cuda4(
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None,
) -> torch.Tensor:
    m, n = x.shape
    sp = plan4(m, n, x.dtype, _device_facts(x).cc)
    if sp is None:
        return _launch_cuda3(x, w, out, eps, rstd)
    return _launch_slices(4, sp, x, w, out, eps, rstd, 0)


def plan5(
    m: int, n: int, dtype: torch.dtype, cc: tuple[int, int], weighted: bool
) -> SlicePlan | None:
    """Rung 5's blocks: rung 4's, where every block's slice is whole (each of its threads holds
    KERNEL4_VECS vectors, so the kernel needs no bounds checks) and there is a weight; None
    where rung 4 runs instead (a slice cut short, no weight, or no rung-4 plan)."""
    sp = plan4(m, n, dtype, cc)
    if sp is None or not weighted or n % (16 // _size(dtype)):
        return None
    whole = sp.per_block == sp.threads * KERNEL4_VECS
    if not whole or sp.per_block * sp.cluster != n // (16 // _size(dtype)):
        return None
    return sp


def _launch_cuda5(
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None,
) -> torch.Tensor:
    m, n = x.shape
    sp = plan5(m, n, x.dtype, _device_facts(x).cc, w is not None)
    if sp is None:
        return _launch_cuda4(x, w, out, eps, rstd)
    return _launch_slices(5, sp, x, w, out, eps, rstd, 0)


KERNEL6_THREADS = 512  # rmsnorm.cu's KERNEL6_THREADS
KERNEL6_SLICE = KERNEL6_THREADS * 8  # vectors a block holds (8 a thread, KERNEL6_VECS): 64 KB
KERNEL6_CLUSTERS = (8, 16)  # the clusters rmsnorm.cu stamps kernel 6 for
KERNEL6_FROM = 8 * KERNEL4_SLICE  # rows of more vectors than eight 32 KB slices (256 KB)


def plan6(
    m: int, n: int, dtype: torch.dtype, cc: tuple[int, int], weighted: bool
) -> SlicePlan | None:
    """Rung 6's blocks: rows past 256 KB (where rungs 4 and 5 go to blocks of 1024 threads) in
    64 KB slices of 512 threads, 8 vectors each, over a cluster of 8 (512 KB rows) or 16 (1 MB),
    where there is a weight; None where rung 5 runs instead (shorter rows, other lengths, no
    weight, no clusters, or a grid past 2**31 - 1 blocks)."""
    vec = 16 // _size(dtype)
    if cc < (9, 0) or not weighted or n % vec:
        return None
    nvec = n // vec
    if nvec <= KERNEL6_FROM or nvec % KERNEL6_SLICE:
        return None
    cluster = nvec // KERNEL6_SLICE
    if cluster not in KERNEL6_CLUSTERS or m * cluster > 2**31 - 1:
        return None
    return SlicePlan(cluster, KERNEL6_SLICE, KERNEL6_THREADS)


def _launch_cuda6(
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None,
) -> torch.Tensor:
    m, n = x.shape
    sp = plan6(m, n, x.dtype, _device_facts(x).cc, w is not None)
    if sp is None:
        return _launch_cuda5(x, w, out, eps, rstd)
    return _launch_slices(6, sp, x, w, out, eps, rstd, sp.per_block * 16)


def _launch_triton(
    rung: int,
    x: torch.Tensor,
    w: torch.Tensor | None,
    out: torch.Tensor,
    eps: float,
    rstd: torch.Tensor | None = None,
) -> torch.Tensor:
    from . import triton_kernels as tk

    if rstd is None:
        rstd = torch.empty(x.shape[0], dtype=torch.float32, device=x.device)
    launch = tk.launch_kernel1 if rung == 1 else tk.launch_kernel2
    return launch(x, w, out, rstd, eps)


_CUDA_SOURCES = (
    CU_FILE,
    HERE.parent.parent / "cuda" / "common.cuh",
    HERE.parent.parent / "cuda" / "cluster.cuh",
    HERE.parent.parent / "cuda" / "slices.py",
    Path(__file__),
)
_TRITON_SOURCES = (HERE / "triton_kernels.py",)

VARIANTS: dict[str, Variant] = {
    "cuda:1": Variant(
        OP,
        "cuda:1",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_cuda(1, x, w, o, eps, rstd),
        _CUDA_SOURCES,
        "one block per row, a strided loop per thread, block reduction",
    ),
    "cuda:2": Variant(
        OP,
        "cuda:2",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_cuda(2, x, w, o, eps, rstd),
        _CUDA_SOURCES,
        "16-byte vectors, the row kept in registers between reduction and write",
    ),
    "cuda:3": Variant(
        OP,
        "cuda:3",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_cuda(3, x, w, o, eps, rstd),
        _CUDA_SOURCES,
        "the row staged in shared memory, over a thread-block cluster when long",
    ),
    "cuda:4": Variant(
        OP,
        "cuda:4",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_cuda(4, x, w, o, eps, rstd),
        _CUDA_SOURCES,
        "rows past 32 KB: each block's slice in registers, over a cluster; else rung 3",
    ),
    "cuda:5": Variant(
        OP,
        "cuda:5",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_cuda(5, x, w, o, eps, rstd),
        _CUDA_SOURCES,
        "rung 4 with fewer instructions per element and plain stores, where every slice is whole; "
        "else rung 4",
    ),
    "cuda:6": Variant(
        OP,
        "cuda:6",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_cuda(6, x, w, o, eps, rstd),
        _CUDA_SOURCES,
        "rows past 256 KB in QuACK's order: x by cp.async.ca, weights early; else rung 5",
    ),
    "triton:1": Variant(
        OP,
        "triton:1",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_triton(1, x, w, o, eps, rstd),
        _TRITON_SOURCES,
        "one row per program, the whole row in one block (rows up to 65536)",
    ),
    "triton:2": Variant(
        OP,
        "triton:2",
        lambda x, w, o, eps=1e-6, rstd=None: _launch_triton(2, x, w, o, eps, rstd),
        _TRITON_SOURCES,
        "short rows packed per program; long rows in two passes, the second from L2",
    ),
}


# --------------------------------------------------------------------------------------------
# Backward
# --------------------------------------------------------------------------------------------

BWD_SLICE = 32 * 1024
"""Bytes of x (and as many of dy) that one block of the CUDA backward owns in each row."""
BWD_SHAPES = {(512, 4), (512, 8)}  # (threads, vectors per thread) in rmsnorm.cu


@dataclass(frozen=True)
class BwdPlan:
    cluster: int  # blocks per row
    per_block: int  # 16-byte vectors of each row that each block owns
    threads: int
    k: int  # 16-byte vectors per thread and tensor
    vec: int  # elements of x per 16-byte vector

    def smem(self, w_size: int) -> int:
        """Dynamic shared memory of one block, in bytes: its x and dy slices, and its slice of
        the weight (``w_size`` bytes per weight; 0 without a weight)."""
        return 2 * self.per_block * 16 + self.per_block * self.vec * w_size

    @property
    def kernel(self) -> str:
        return f"rmsnorm_bwd_kernel_t{self.threads}_c{self.cluster}_k{self.k}"


def plan_bwd(n: int, dtype: torch.dtype, cc: tuple[int, int], **knobs: int) -> BwdPlan | None:
    """How the CUDA backward (rmsnorm_bwd_kernel_*) covers rows of ``n`` elements, or None
    where Triton's backward runs instead: rows that fit its registers (it reads those once
    too; the CUDA kernel is for the longer rows that Triton reads twice), GPUs without
    clusters, rows past 8 x 512 x 8 vectors (8 x 512 x 4 in 16-bit). The smallest cluster
    whose blocks own at most BWD_SLICE bytes each (8 past that), 512 threads of 4 vectors
    each (8 when the slice is larger). ``knobs`` (tuning experiments) may name the cluster,
    threads and k."""
    from .triton_kernels import MAX_REGISTER_ROW

    if cc < (9, 0) or n <= MAX_REGISTER_ROW:
        return None
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    nvec = n // vec
    cluster = knobs.get("cluster") or next(
        (c for c in CLUSTERS[1:] if -(-nvec // c) * 16 <= BWD_SLICE), CLUSTERS[-1]
    )
    per_block = -(-nvec // cluster)
    threads = knobs.get("threads", 512)
    k = knobs.get("k") or (4 if threads * 4 >= per_block else 8)
    if (
        (threads, k) not in BWD_SHAPES
        or threads * k < per_block
        or (k == 8 and threads == 512 and (cluster != 8 or vec != 4))  # fp32 only: 16-bit spills
    ):
        return None
    return BwdPlan(cluster, per_block, threads, k, vec)


ROWS_BWD_THREADS = {(4, 4): 640, (4, 2): 640, (8, 4): 384, (8, 2): 384}
"""Threads per block of rmsnorm_bwd_rows_kernel_k{K}_t{threads}, by (K, element size): all the
warps one SM holds with the registers K vectors per lane need (rmsnorm.cu)."""
ROWS_BWD_SLOTS = 2
"""Warps whose dw sums the block holds in shared memory at once (the same constant in
rmsnorm.cu)."""


ROWS_BWD_RING = {4: (12, 4), 8: (8, 3)}
"""K -> (warps per block, stages per warp) of the warp-per-row backward with its rows' copies
in flight ahead of it (rmsnorm_bwd_ring_k{K}_w{warps}_s{stages}): what plan_bwd_rows launches on
sm_90, the launches an H200 side probe found fastest (labs/probe_rmsnorm_backward_rows.py; the
fused-rmsnorm page, section 4, says what it tried). Each stage holds a row of x and of dy, 32 K
vectors each: warps x stages x 2 KB x K of shared memory."""


@dataclass(frozen=True)
class RowsBwdPlan:
    k: int  # 16-byte vectors per lane and tensor: a warp holds 32 k vectors of a row
    threads: int
    nvec: int  # 16-byte vectors per row
    elem_size: int  # bytes per element of x
    stages: int = 0  # past 0: rmsnorm_bwd_ring, a ring of this many rows per warp

    def __post_init__(self) -> None:
        if self.stages == 1 or self.stages < 0:
            raise ValueError(f"RowsBwdPlan: a ring needs 2 stages or more, not {self.stages}")

    @property
    def smem(self) -> int:
        """Dynamic shared memory of one block. The ring kernel: room for an fp32 weight (a
        16-bit one takes half) and the warps' rings, which then hold the dw sums. The other:
        ROWS_BWD_SLOTS warps' dw sums, n floats each, and at least one float per thread (the
        folded column sums reuse it); none without dw (the launch passes 0 then)."""
        n = self.nvec * (16 // self.elem_size)
        if self.stages:
            return -(-n * 4 // 16) * 16 + self.threads // 32 * self.stages * 2 * 32 * self.k * 16
        return max(ROWS_BWD_SLOTS * n, self.threads) * 4

    @property
    def kernel(self) -> str:
        if self.stages:
            return f"rmsnorm_bwd_ring_k{self.k}_w{self.threads // 32}_s{self.stages}"
        return f"rmsnorm_bwd_rows_kernel_k{self.k}_t{self.threads}"


def plan_bwd_rows(
    n: int, dtype: torch.dtype, cc: tuple[int, int] | None = None
) -> RowsBwdPlan | None:
    """The warp-per-row CUDA backward for rows of ``n`` elements, or None: rows of whole
    16-byte vectors that need 3 to 8 vectors per lane, 65 to 256 vectors (16-bit dtypes: 520 to
    2048 elements; fp32: 260 to 1024). On sm_90 (``cc``) the ring kernel (ROWS_BWD_RING), on
    other GPUs or without ``cc`` the one that reads a row at a time (rmsnorm_bwd_rows_kernel_*).
    Shorter and longer rows keep the other backwards (Triton's; the cluster kernel from 16385
    elements)."""
    size = torch.empty((), dtype=dtype).element_size()
    vec = 16 // size
    nvec = n // vec
    if n % vec or not 64 < nvec <= 32 * 8:
        return None
    k = 4 if nvec <= 32 * 4 else 8
    if cc == (9, 0):
        warps, stages = ROWS_BWD_RING[k]
        return RowsBwdPlan(k, 32 * warps, nvec, size, stages)
    return RowsBwdPlan(k, ROWS_BWD_THREADS[(k, min(size, 4))], nvec, size)


TILE_BWD = {
    (4096, 4): (256, 4, True, 1, 2),
    (8192, 4): (512, 4, True, 1),
    (16384, 4): (512, 8, False, 1),
    (32768, 4): (256, 8, True, 4),
    (65536, 4): (256, 8, True, 8),
    (131072, 4): (256, 8, True, 16),
    (32768, 2): (256, 4, True, 4),
    (65536, 2): (256, 4, True, 8),
    (131072, 2): (256, 4, True, 16),
}
"""(row length, bytes per element of x) -> (threads, 16-byte vectors per thread, weights in
registers, blocks per row[, blocks per SM at most]) of the fixed-length backward: the launches
H200 side probes found fastest (labs/probe_rmsnorm_backward_tile.py and, for the grid,
labs/probe_rmsnorm_backward_dw.py; the fused-rmsnorm page, section 4, says what they tried).
In fp32, one block per row up to 16384 (rmsnorm_bwd_tile; at 16384 the weights in shared
memory, since 512 threads x 8 vectors need all 128 registers a thread of 512 may have), and a
cluster of blocks of 8192 elements each past it, with two rows in flight
(rmsnorm_bwd_tile_cluster). At 4096 three blocks fit on an SM, but a grid of two per SM was
faster, dw included, than three per SM without dw: each block writes one dw partial row, so the
second kernel adds up a third fewer, and the rows themselves went faster too. In 16-bit, the
same clusters of 8192-element blocks (256 threads x 4 vectors of 8) from 32768; shorter 16-bit
rows keep the other backwards."""


@dataclass(frozen=True)
class TileBwdPlan:
    threads: int
    vpt: int  # 16-byte vectors per thread and tensor: a block holds threads * vpt of each row
    wreg: bool  # the weights in registers, or in shared memory after the row buffers
    cluster: int = 1  # blocks per row: more than one runs rmsnorm_bwd_tile_cluster
    suffix: str = "f32_wf32"  # the dtypes: x's, then _wf32 for an fp32 weight (fp32 x: always)
    per_sm: int = 0  # blocks per SM at most in the grid (0: as many as fit at once)

    def __post_init__(self) -> None:
        if self.per_sm < 0 or (self.per_sm and self.cluster > 1):
            raise ValueError(
                f"TileBwdPlan: per_sm={self.per_sm} (blocks per SM at most) must be 0, or > 0 "
                "for the one-block kernel only"
            )
        if self.cluster > 1 and not self.wreg:
            raise ValueError("TileBwdPlan: the cluster kernel keeps its weights in registers")
        if self.cluster == 1 and self.suffix != "f32_wf32":
            raise ValueError("TileBwdPlan: the one-block kernel is fp32 only")

    @property
    def vn(self) -> int:
        """Elements of x per 16-byte vector."""
        return 4 if self.suffix.startswith("f32") else 8

    @property
    def n(self) -> int:
        return self.cluster * self.threads * self.vpt * self.vn

    @property
    def smem(self) -> int:
        """Dynamic shared memory of one block: its part of a row of x and of dy, and of the
        weights where they are not in registers."""
        return (2 if self.wreg else 3) * self.threads * self.vpt * 16

    @property
    def kernel(self) -> str:
        if self.cluster > 1:
            return (
                f"rmsnorm_bwd_tile_cluster_t{self.threads}_v{self.vpt}_c{self.cluster}_"
                f"{self.suffix}"
            )
        return f"rmsnorm_bwd_tile_t{self.threads}_v{self.vpt}_w{int(self.wreg)}_{self.suffix}"


def plan_bwd_tile(
    n: int, dtype: torch.dtype, w_dtype: torch.dtype | None, cc: tuple[int, int]
) -> TileBwdPlan | None:
    """The fixed-length backward (rmsnorm_bwd_tile_*) for rows of ``n`` elements, or None: rows
    of exactly one of TILE_BWD's lengths for x's dtype (fp32: 4096 to 131072, the powers of two;
    fp16 and bf16: 32768 to 131072), with a weight in x's dtype, in fp32 or none (fp32 x: an
    fp32 weight or none), on sm_90+ (clusters; the GPUs it was measured on). Other rows keep the
    other backwards (Triton's, the warp-per-row and cluster kernels)."""
    size = torch.empty((), dtype=dtype).element_size()
    if cc < (9, 0) or dtype not in _SUFFIX or w_dtype not in (None, dtype, torch.float32):
        return None
    launch = TILE_BWD.get((n, size))
    if launch is None:
        return None
    suffix = _SUFFIX[dtype] + ("_wf32" if w_dtype == torch.float32 or size == 4 else "")
    threads, vpt, wreg, cluster, *per_sm = launch
    return TileBwdPlan(threads, vpt, wreg, cluster, suffix, *per_sm)


def _launch_bwd(
    kernel,
    dy: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor | None,
    rstd: torch.Tensor,
    dx: torch.Tensor,
    extra: tuple,
    *,
    groups: int,
    threads: int,
    cluster: int = 1,
    smem: int = 0,
    need_dw: bool = True,
    folded: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Launch one of the persistent CUDA backwards over ``groups`` blocks (or clusters of
    ``cluster``), the arguments every one takes first, then ``extra``. Each block (cluster)
    writes its dw sums as a row of a (groups, n) fp32 partial; the return is their sum in a
    fixed order (reduce_dw), or None without a weight or where dw is not needed. ``folded``: the
    dw a cooperative launch sums itself (the warp-per-row kernel's grid-wide fold), returned."""
    from .triton_kernels import reduce_dw

    has_dw = w is not None and need_dw
    part = (
        torch.empty((groups, x.shape[1]), dtype=torch.float32, device=x.device) if has_dw else None
    )
    null = ctypes.c_void_p(0)
    args = (dy, x, w if w is not None else null, rstd, dx, part if has_dw else null)
    kernel(
        groups * cluster, threads, (*args, *extra), shared_mem=smem, cooperative=folded is not None
    )
    if folded is not None or not has_dw:
        return folded
    return reduce_dw(part, w.dtype)


def _backward_rows(
    dy: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor | None,
    rstd: torch.Tensor,
    plan: RowsBwdPlan,
    dx: torch.Tensor,
    need_dw: bool,
    fold_dw: bool = True,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Launch the warp-per-row backward (aligned, whole-vector rows: the caller checked)."""
    from minikernel.cuda import get_kernel

    m, n = x.shape
    wf32 = "_wf32" if w is not None and w.dtype == torch.float32 else ""
    kernel = get_kernel(CU_FILE, f"{plan.kernel}_{_SUFFIX[x.dtype]}{wf32}")
    has_dw = w is not None and need_dw
    smem = plan.smem if has_dw or plan.stages else 0
    warps = plan.threads // 32
    blocks = max(1, min(-(-m // warps), kernel.max_active_clusters(plan.threads, smem, 1)))
    # Fold the column sums of the blocks' partial rows into this kernel (a grid-wide barrier,
    # then each block sums a slice of columns) where each block's slice fits its threads.
    fold = has_dw and fold_dw and -(-n // blocks) <= plan.threads
    dw = torch.empty(n, dtype=w.dtype, device=x.device) if fold else None
    null = ctypes.c_void_p(0)
    extra = (dw, _barrier_word(x.device)) if fold else (null, null)
    extra += (ctypes.c_int64(m), ctypes.c_int32(plan.nvec))
    dw = _launch_bwd(
        kernel,
        dy,
        x,
        w,
        rstd,
        dx,
        extra,
        groups=blocks,
        threads=plan.threads,
        smem=smem,
        need_dw=need_dw,
        folded=dw,
    )
    return dx, dw


def _backward_tile(
    dy: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor | None,
    rstd: torch.Tensor,
    plan: TileBwdPlan,
    dx: torch.Tensor,
    need_dw: bool,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Launch the fixed-length fp32 backward: one block (or cluster) per SM slot, each taking
    every grid-th row, then its partial dw rows summed (contiguous, 16-byte aligned fp32
    tensors with rows of plan.n elements and fewer than 2^31 rows: the caller checked)."""
    from minikernel.cuda import get_kernel

    m = x.shape[0]
    kernel = get_kernel(CU_FILE, plan.kernel)
    kernel.allow_cluster_size(plan.cluster)  # nothing to do up to 8
    groups = kernel.max_active_clusters(plan.threads, plan.smem, plan.cluster)
    if plan.per_sm:
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        groups = min(groups, plan.per_sm * sms)
    groups = max(1, min(m, groups))
    dw = _launch_bwd(
        kernel,
        dy,
        x,
        w,
        rstd,
        dx,
        (ctypes.c_int64(m),),
        groups=groups,
        threads=plan.threads,
        cluster=plan.cluster,
        smem=plan.smem,
        need_dw=need_dw,
    )
    return dx, dw


_BARRIER_WORDS: dict[tuple[int, int], torch.Tensor] = {}


def _barrier_word(device: torch.device) -> torch.Tensor:
    """The grid barrier's word for launches on the current stream of ``device``: zeroed once,
    left ready for the next launch by each one (rmsnorm.cu, grid_barrier). One per stream, so
    that two launches that may run at once never share it.

    Under CUDA-graph capture, a fresh word for each launch, zeroed by a memset captured with it:
    nothing runs while a graph is captured, so a cached word first made there would be zeroed
    only when that graph replays, and another graph that reused it could replay first and find
    it uninitialised."""
    if torch.cuda.is_current_stream_capturing():
        return torch.zeros(1, dtype=torch.int32, device=device)
    index = device.index if device.index is not None else torch.cuda.current_device()
    key = (index, torch.cuda.current_stream(device).cuda_stream)
    word = _BARRIER_WORDS.get(key)
    if word is None:
        word = _BARRIER_WORDS[key] = torch.zeros(1, dtype=torch.int32, device=device)
    return word


def backward_cuda_plan(
    n: int,
    dtype: torch.dtype,
    w_dtype: torch.dtype | None,
    cc: tuple[int, int],
    **knobs: int,
) -> TileBwdPlan | RowsBwdPlan | BwdPlan | None:
    """Which CUDA backward ``cuda:3`` and ``cuda:4`` run for rows of ``n`` elements (16-byte
    aligned tensors): the fixed-length kernel (plan_bwd_tile), the warp-per-row kernel
    (plan_bwd_rows), the cluster kernel (plan_bwd), in that order; None where Triton's runs.
    ``knobs`` (tuning experiments) go to plan_bwd and skip the other two."""
    if n % (16 // torch.empty((), dtype=dtype).element_size()):
        return None  # not whole 16-byte vectors
    if not knobs:
        plan = plan_bwd_tile(n, dtype, w_dtype, cc) or plan_bwd_rows(n, dtype, cc)
        if plan is not None:
            return plan
    return plan_bwd(n, dtype, cc, **knobs)


def _backward_cuda(
    dy: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor | None,
    rstd: torch.Tensor,
    *,
    need_dw: bool = True,
    dx: torch.Tensor | None = None,
    **knobs: int,
) -> tuple[torch.Tensor, torch.Tensor | None] | None:
    """The CUDA backward (dx, dweight), dx into ``dx`` if given: the fixed-length kernel for
    rows of a power-of-two length it is built for (plan_bwd_tile: fp32 from 4096, 16-bit from
    32768, up to 131072), the warp-per-row kernel for short rows (plan_bwd_rows), the cluster
    kernel for the other long ones (plan_bwd). None where none
    applies (the other rows between, which Triton reads once; no clusters; rows that are not
    whole 16-byte vectors; unaligned tensors): the caller runs Triton's. ``knobs`` (tuning
    experiments) go to plan_bwd and skip the other two kernels."""
    from minikernel.cuda import get_kernel

    m, n = x.shape
    tensors = [t for t in (dy, x, w, dx) if t is not None]
    if any(t.data_ptr() % 16 for t in tensors):
        return None
    w_dtype = w.dtype if w is not None else None
    sp = backward_cuda_plan(n, x.dtype, w_dtype, _device_facts(x).cc, **knobs)
    if isinstance(sp, TileBwdPlan):
        if m >= 2**31:
            return None  # its row index is a 32-bit int
        return _backward_tile(
            dy, x, w, rstd, sp, torch.empty_like(x) if dx is None else dx, need_dw
        )
    if isinstance(sp, RowsBwdPlan):
        return _backward_rows(
            dy, x, w, rstd, sp, torch.empty_like(x) if dx is None else dx, need_dw
        )
    if sp is None:
        return None
    wf32 = "_wf32" if w is not None and w.dtype == torch.float32 else ""
    kernel = get_kernel(CU_FILE, f"{sp.kernel}_{_SUFFIX[x.dtype]}{wf32}")
    smem = sp.smem(w.element_size() if w is not None else 0)
    groups = max(1, min(m, kernel.max_active_clusters(sp.threads, smem, sp.cluster)))
    dx = torch.empty_like(x) if dx is None else dx
    extra = (ctypes.c_int64(m), ctypes.c_int64(n), ctypes.c_int32(sp.per_block))
    dw = _launch_bwd(
        kernel,
        dy,
        x,
        w,
        rstd,
        dx,
        extra,
        groups=groups,
        threads=sp.threads,
        cluster=sp.cluster,
        smem=smem,
        need_dw=need_dw,
    )
    return dx, dw


CUDA_BWD_AFTER = ("cuda:3", "cuda:4", "cuda:5", "cuda:6")
"""Forward rungs after which a named ``impl``'s backward is CUDA C where a CUDA kernel applies
(the lab's ``cuda:3`` backward); after the others it is Triton's (the lab's ``triton:2``)."""


def _backward(
    dy: torch.Tensor,
    x: torch.Tensor,
    w: torch.Tensor | None,
    rstd: torch.Tensor,
    *,
    need_dw: bool = True,
    impl: str = "triton:2",
    cuda: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dx, dweight) for contiguous 2-D ``x`` and ``dy``: the CUDA backward where it applies
    if ``cuda`` (by default: after the forward rungs of CUDA_BWD_AFTER), Triton's otherwise."""
    from .triton_kernels import launch_backward

    if (impl in CUDA_BWD_AFTER if cuda is None else cuda) and dy.is_cuda:
        got = _backward_cuda(dy, x, w, rstd, need_dw=need_dw)
        if got is not None:
            return got
    dx = torch.empty_like(x)
    dw = launch_backward(dy, x, w, rstd, dx, need_dw=need_dw)
    return dx, dw


def rmsnorm_backward(
    dy: torch.Tensor, x: torch.Tensor, weight: torch.Tensor | None, rstd: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(dx, dweight) for 2-D contiguous ``x`` and ``dy`` and the forward's per-row ``rstd``.
    The backward every rung shares (Triton)."""
    return _backward(dy, x, weight, rstd)


DEFAULT_TRITON_MAX = 16384
"""The longest rows (in elements) whose forward :func:`rms_norm` gives ``triton:2`` by default
on a GPU with clusters; longer rows go to the top of the CUDA ladder. Lab 02 on the H200:
``triton:2`` the fastest forward of ours at every length up to 16384 in both dtypes, the
cluster rungs from 32768 (the fused-RMSNorm page checks both against the results)."""

DEFAULT_TRITON_MAX_FP32 = 32768
"""The same bound for fp32 rows: ``triton:2`` holds a 32768-element fp32 row whole in one
program of 32 warps, and lab 02 found it ahead of the cluster rungs there, while at 32768
16-bit elements the clusters stay ahead (the page checks both)."""


def default_impl(t: torch.Tensor, n: int | None = None) -> str:
    """The forward :func:`rms_norm` runs when no impl is named, for rows of ``n`` elements
    (``t``'s last dimension by default). On sm_90+ GPUs with NVIDIA's Python bindings,
    ``triton:2`` for rows of up to DEFAULT_TRITON_MAX elements (DEFAULT_TRITON_MAX_FP32 for
    fp32 rows) and ``cuda:6`` past it (which falls back to rungs 5, 4, 3 and below where its
    own kernel does not apply); ``triton:2`` on other GPUs and under Triton's interpreter;
    PyTorch otherwise. The default call's backward is chosen apart from its forward (see
    :func:`default_backward_is_cuda`)."""
    if t.is_cuda:
        from minikernel.cuda import clusters_available

        if not clusters_available(t.device):
            return "triton:2"
        n = t.shape[-1] if n is None else n
        limit = DEFAULT_TRITON_MAX_FP32 if t.dtype == torch.float32 else DEFAULT_TRITON_MAX
        return "triton:2" if n <= limit else "cuda:6"
    if os.environ.get("TRITON_INTERPRET") == "1":
        return "triton:2"
    return "torch"


def default_backward_is_cuda(t: torch.Tensor) -> bool:
    """Whether the default call's backward is CUDA C where a CUDA kernel applies, whichever
    forward ran: on sm_90+ GPUs with the bindings. Then short rows go to the warp-per-row
    kernel (plan_bwd_rows), the power-of-two rows of the fixed-length kernel (plan_bwd_tile:
    fp32 from 4096 elements, 16-bit from 32768, up to 131072) to it and the other rows longer
    than 16384 elements to the cluster kernel (plan_bwd); Triton's takes the other rows
    between. Lab 02 times this path as ``cuda:3``'s backward, the fastest of ours wherever it
    runs a CUDA kernel."""
    if not t.is_cuda:
        return False
    from minikernel.cuda import clusters_available

    return clusters_available(t.device)


# --------------------------------------------------------------------------------------------
# autograd
# --------------------------------------------------------------------------------------------


class RMSNormFunction(torch.autograd.Function):
    """Forward with one of ``VARIANTS``; backward with the Triton kernels, or with the CUDA
    backward where it applies after the rungs of CUDA_BWD_AFTER, or wherever ``cuda_bwd``
    asks for it (see _backward).

    ``apply(x, weight, eps, impl, cuda_bwd=None)``: ``x`` contiguous, RMS over its last
    dimension; ``weight`` of that size or None. Saves x, the weight and one fp32 rstd per row.
    """

    @staticmethod
    def forward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        weight: torch.Tensor | None,
        eps: float,
        impl: str,
        cuda_bwd: bool | None = None,
    ) -> torch.Tensor:
        n = x.shape[-1]
        x2 = x.view(-1, n)
        y = torch.empty_like(x2)
        rstd = torch.empty(x2.shape[0], dtype=torch.float32, device=x.device)
        w = None if weight is None else weight.view(n)
        VARIANTS[impl].fn(x2, w, y, eps, rstd)
        ctx.save_for_backward(x2, w, rstd)
        ctx.impl = impl
        ctx.cuda_bwd = cuda_bwd
        ctx.x_shape = x.shape
        ctx.w_shape = None if weight is None else weight.shape
        return y.view(x.shape)

    @staticmethod
    def backward(  # type: ignore[override]
        ctx: torch.autograd.function.FunctionCtx, dy: torch.Tensor
    ) -> tuple[torch.Tensor | None, ...]:
        x2, w, rstd = ctx.saved_tensors
        dy2 = dy.reshape(x2.shape).contiguous()
        need_dw = w is not None and ctx.needs_input_grad[1]
        dx, dw = _backward(dy2, x2, w, rstd, need_dw=need_dw, impl=ctx.impl, cuda=ctx.cuda_bwd)
        dw_out = dw.view(ctx.w_shape) if dw is not None else None
        return dx.view(ctx.x_shape), dw_out, None, None, None


# --------------------------------------------------------------------------------------------
# Public function and module
# --------------------------------------------------------------------------------------------


def _normalized(shape: int | Sequence[int] | torch.Size) -> tuple[int, ...]:
    return (shape,) if isinstance(shape, int) else tuple(shape)


def rms_norm(
    x: torch.Tensor,
    normalized_shape: int | Sequence[int] | torch.Size,
    weight: torch.Tensor | None = None,
    eps: float | None = None,
    *,
    impl: str | None = None,
) -> torch.Tensor:
    """RMSNorm of ``x`` over its trailing ``normalized_shape`` dimensions, with autograd.

    Same arguments and result as ``torch.nn.functional.rms_norm``: ``eps=None`` means
    ``torch.finfo(x.dtype).eps``; the output has x's dtype. ``x``: contiguous float32, float16
    or bfloat16; ``weight``: ``normalized_shape``, in x's dtype or float32. ``impl``: a key of
    ``VARIANTS`` or ``"torch"``; by default the fastest of ours for the device and the row
    length (:func:`default_impl`, and :func:`default_backward_is_cuda` for the backward). A
    named impl runs its own forward and the backward the lab times with it. Raises TypeError /
    ValueError naming the argument at fault.
    """
    op = OP
    check_tensor(op, "x", x, dtypes=FLOAT_DTYPES, contiguous=True)
    shape = _normalized(normalized_shape)
    if not shape or tuple(x.shape[-len(shape) :]) != shape or x.dim() < len(shape):
        raise ValueError(
            f"{op}: normalized_shape {shape} must match the trailing dimensions of x, "
            f"got x of shape {tuple(x.shape)}"
        )
    if weight is not None:
        check_tensor(op, "weight", weight, dtypes=FLOAT_DTYPES, contiguous=True)
        if tuple(weight.shape) != shape:
            raise ValueError(
                f"{op}: weight has shape {tuple(weight.shape)}, expected normalized_shape {shape}"
            )
        if weight.dtype not in (x.dtype, torch.float32):
            raise TypeError(
                f"{op}: weight has dtype {str(weight.dtype).removeprefix('torch.')}; it must be "
                f"x's dtype ({str(x.dtype).removeprefix('torch.')}) or float32"
            )
        if weight.device != x.device:
            raise ValueError(f"{op}: x is on {x.device} but weight is on {weight.device}")
    eps = torch.finfo(x.dtype).eps if eps is None else float(eps)
    if not eps >= 0.0:
        raise ValueError(f"{op}: eps must be >= 0, got {eps}")
    n = 1
    for s in shape:
        n *= s
    cuda_bwd = None  # a named impl: the backward that goes with it
    if impl is None:
        impl = default_impl(x, n)
        cuda_bwd = default_backward_is_cuda(x)
    if impl == "torch":
        return F.rms_norm(x, shape, weight, eps)
    if impl not in VARIANTS:
        raise ValueError(f"{op}: unknown impl {impl!r}; choose from {[*VARIANTS, 'torch']}")
    check_device(op, impl, x)
    if x.numel() == 0:
        return torch.empty_like(x)
    x_rows = x.view(-1, n)
    y = RMSNormFunction.apply(x_rows, weight, eps, impl, cuda_bwd)
    return y.view(x.shape)


class RMSNorm(torch.nn.RMSNorm):
    """Drop-in for ``torch.nn.RMSNorm`` (same constructor, parameters and state dict) whose
    forward runs minikernel's kernels. Inputs the kernels do not take (another device, float64,
    a weight in a third dtype) go to PyTorch's own implementation, so it never refuses an input
    that ``torch.nn.RMSNorm`` accepts. ``impl`` picks a variant (default: the fastest)."""

    def __init__(
        self,
        normalized_shape: int | Sequence[int] | torch.Size,
        eps: float | None = None,
        elementwise_affine: bool = True,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
        *,
        impl: str | None = None,
    ) -> None:
        super().__init__(normalized_shape, eps, elementwise_affine, device, dtype)
        self.impl = impl

    def _runs_here(self, x: torch.Tensor) -> bool:
        w = self.weight
        shape = tuple(self.normalized_shape)
        return (
            x.dtype in FLOAT_DTYPES
            and x.dim() >= len(shape)
            and tuple(x.shape[-len(shape) :]) == shape
            and x.numel() > 0
            and (x.is_cuda or os.environ.get("TRITON_INTERPRET") == "1")
            and (w is None or (w.dtype in (x.dtype, torch.float32) and w.device == x.device))
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self._runs_here(x):
            return F.rms_norm(x, self.normalized_shape, self.weight, self.eps)
        return rms_norm(
            x.contiguous(), self.normalized_shape, self.weight, self.eps, impl=self.impl
        )


# --------------------------------------------------------------------------------------------
# Cases for the lab and for ncu: the same code times a variant and profiles it.
# --------------------------------------------------------------------------------------------

PEERS = ("torch:eager", "torch:compile", "torch:unfused", "liger", "quack")
EPS = 1e-6  # the lab's eps, the same for every implementation


def _unfused(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """The RMSNorm many model files still write (Hugging Face's LlamaRMSNorm): one PyTorch op
    per line, each a kernel that reads and writes memory, the input upcast to fp32 first."""
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + eps)
    return w * h.to(x.dtype)


def _peer_forward(impl: str, n: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    if impl == "torch:eager":
        return lambda x, w: F.rms_norm(x, (n,), w, EPS)
    if impl == "torch:compile":
        return compiled(lambda x, w: F.rms_norm(x, (n,), w, EPS))  # built for this shape
    if impl == "torch:unfused":
        return lambda x, w: _unfused(x, w, EPS)
    if impl == "liger":
        ops = import_peer("liger_kernel.ops.rms_norm", "liger-kernel")
        if n >= 65536:
            raise PeerUnavailable(f"Liger's RMSNorm refuses rows of 65536 elements or more ({n})")
        # offset 0, Llama casting, in place backward: Liger's defaults for LigerRMSNorm
        return lambda x, w: ops.LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", True)
    if impl == "quack":
        quack = import_peer("quack", "quack-kernels")
        return lambda x, w: quack.rmsnorm(x, w, eps=EPS)
    raise ValueError(f"{OP}: unknown peer {impl!r}; choose from {list(PEERS)}")


def make_runner(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    pass_: str = "fwd",
    device: str = "cuda",
    seed: int = 0,
) -> Callable[[], object]:
    """A no-argument callable that runs ``impl`` once on seeded inputs of ``shape`` = [M, N]:
    the forward (``pass_="fwd"``) or the backward alone (``"bwd"``: dx and dweight, from a
    graph built once here). Raises PeerUnavailable where a baseline cannot run the case.
    ``runner.inputs`` holds (x, weight, dy), so a caller can check what the runner returns."""
    m, n = shape
    if impl == "quack" and pass_ == "bwd" and n > 131072 and dtype == torch.float32:
        # QuACK 0.6.5 raises this in its backward only (not enough shared memory, it says)
        raise PeerUnavailable(f"QuACK's RMSNorm backward refuses fp32 rows past 131072 ({n})")
    x, w, dy = make_inputs(m, n, dtype, device, seed, with_grad_out=True)
    if impl in VARIANTS:
        if pass_ == "fwd":
            out = torch.empty_like(x)
            rstd = torch.empty(m, dtype=torch.float32, device=x.device)
            fn = VARIANTS[impl].fn
            return with_inputs(lambda: fn(x, w, out, EPS, rstd), x, w, dy)
        forward = lambda a, b: rms_norm(a, (n,), b, EPS, impl=impl)
    else:
        forward = _peer_forward(impl, n)
    if pass_ == "fwd":
        forward(x, w)  # fail here, not inside the timer, if the peer refuses the case
        return with_inputs(lambda: forward(x, w), x, w, dy)
    if pass_ != "bwd":
        raise ValueError(f"{OP}: pass_ must be 'fwd' or 'bwd', got {pass_!r}")
    x.requires_grad_(True)
    w.requires_grad_(True)
    # The backward pass is timed on its own, replaying this one graph (retain_graph=True);
    # torch.compile's donated buffers forbid that, so the graph is built without them (they
    # save memory in backward, not time).
    cfg = importlib.import_module("torch._functorch.config")  # `import torch` does not load it
    no_donation = (
        cfg.patch(donated_buffer=False) if hasattr(cfg, "donated_buffer") else nullcontext()
    )
    with no_donation:
        y = forward(x, w)
    return with_inputs(lambda: torch.autograd.grad(y, (x, w), dy, retain_graph=True), x, w, dy)
