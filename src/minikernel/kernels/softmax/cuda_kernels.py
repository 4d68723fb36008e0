"""Host side of softmax.cu: which kernel of a rung runs a given shape, and how it is launched.

:func:`plan` is a pure function of the shape, the dtype and two facts about the GPU (its
compute capability and how much shared memory a block may opt in to), so the choice of kernel,
grid and shared memory is tested on machines without a GPU. :func:`launch` runs the plan.

Rungs 1 to 6 are one kernel each and refuse shapes their idea cannot hold (a row that does not
fit in shared memory, or in registers) with :class:`UnsupportedShape`. Rungs 7 to 10 add one
idea each where it applies and hand every other shape to the rung below:
cuda:9 (cluster, long rows) -> cuda:8 (loop, rows of any length) -> cuda:7 (warp per row,
short rows) -> cuda:6 (block per row, row in registers); cuda:10 (the row in shared memory,
over a cluster when long) -> cuda:8 for rows past its clusters, cuda:7 for short rows;
cuda:11 (rungs 7 and 6 with one exponential per element) -> cuda:10 for rows of 16 KB and more;
cuda:12 runs cuda:11's choice, with rung 10's fp32 kernels swapped for rung 12's (the same
kernels plus an L2 prefetch of a row further down); cuda:13 runs cuda:12's choice with a cheaper
exponential in each of its kernels; cuda:14 runs rows of 16 KB to 1 MB (fp32: from 256 KB)
over a cluster with each block's slice in registers, and every other shape as cuda:13;
cuda:15 runs short rows (up to 32 lanes of VPT_MAX vectors) in groups of lanes sized to the row,
and every other shape, or a row that is not whole aligned vectors, as cuda:14; cuda:16 runs
cuda:14's register slices with a cheaper exponential (and fp32 rows of 256 KB too), and every
other shape as cuda:15.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import functools
import re
from dataclasses import dataclass
from pathlib import Path

import torch

from minikernel.cuda.slices import SLICE_BYTES, plan_slices

HERE = Path(__file__).resolve().parent
CU_FILE = HERE / "softmax.cu"
SUFFIX = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16"}

ELEMS_PER_THREAD = 32
"""Elements each thread of kernels 6, 7 and 9 keeps in registers (VPT = 32 / vector width)."""
KERNEL6_THREADS = (64, 128, 256, 512, 1024)
KERNEL7_ROWS_PER_BLOCK = 4
KERNEL8_THREADS = 512
KERNEL9_CONFIGS = ((512, 2), (512, 4), (512, 8), (1024, 8))  # (threads per block, cluster size)
KERNEL10_MIN_SLICE = 16 * 1024
"""Rows shorter than this many bytes go from rung 10 to rungs 7 and 6: staging a few KB in
shared memory costs more than it saves (measured on the H200 at 4096 columns)."""
STATIC_SMEM_RESERVE = 1024  # bytes of static shared memory (reduction scratch) beside the row
_INT32_MAX = 2**31 - 1


class UnsupportedShape(ValueError):
    """A rung cannot run this shape by design (its row does not fit where the rung keeps it)."""


@dataclass(frozen=True)
class DeviceFacts:
    cc: tuple[int, int]
    smem_optin: int  # bytes of dynamic shared memory one block may opt in to


H200 = DeviceFacts(cc=(9, 0), smem_optin=232448)
"""What an H100/H200 reports: used by the CPU tests of the planning logic."""


@dataclass(frozen=True)
class Plan:
    rung: int  # the kernel family that runs (cuda:9 may run kernel 7 on a short row)
    kernel: str  # extern "C" name in softmax.cu
    grid: int
    block: int
    smem: int = 0  # dynamic shared memory, bytes
    takes_m: bool = False  # the kernel's parameters are (x, y, M, N) rather than (x, y, N)
    per_block: int = 0  # kernels 10, 12, 14: vectors of the row each block of a cluster holds;
    #                    kernel 15: vectors in a row
    ahead: int = 0  # kernel 12: rows between a block's row and the one whose slice it prefetches
    cluster: int = 1  # blocks per cluster where the host must opt in (more than 8: kernel 14)


def vector_width(dtype: torch.dtype) -> int:
    """Elements in one 16-byte vector: 4 floats or 8 halves."""
    return 16 // dtype.itemsize


def _pow2_threads(work: int) -> int:
    """A block of 32..1024 threads, the power of two at or above ``work`` items."""
    t = 32
    while t < work and t < 1024:
        t *= 2
    return t


def _refuse(rung: int, why: str, m: int, n: int, dtype: torch.dtype) -> UnsupportedShape:
    dt = str(dtype).removeprefix("torch.")
    return UnsupportedShape(
        f"softmax: impl 'cuda:{rung}' cannot run {m} x {n} {dt}: {why}; "
        "'cuda:8' and 'cuda:9' take rows of any length"
    )


def _plan1(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    return Plan(1, f"softmax_kernel1_{SUFFIX[dtype]}", -(-m // 256), 256, takes_m=True)


def _plan_smem(rung: int, m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    vn = vector_width(dtype)
    if rung < 5:  # the row as fp32
        smem, threads = 4 * n, _pow2_threads(n)
    else:  # the 16-byte-aligned body of the row, in its own dtype
        smem, threads = (n // vn) * 16, _pow2_threads(-(-n // vn))
    limit = dev.smem_optin - STATIC_SMEM_RESERVE
    if smem > limit:
        raise _refuse(
            rung, f"its row needs {smem} bytes of shared memory, a block gets {limit}", m, n, dtype
        )
    return Plan(rung, f"softmax_kernel{rung}_{SUFFIX[dtype]}", m, threads, smem)


def _plan6(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    vpt = ELEMS_PER_THREAD // vector_width(dtype)
    nvec = n // vector_width(dtype)  # the aligned body has at most this many vectors
    for threads in KERNEL6_THREADS:
        if threads * vpt >= nvec:
            return Plan(6, f"softmax_kernel6_t{threads}_{SUFFIX[dtype]}", m, threads)
    most = KERNEL6_THREADS[-1] * ELEMS_PER_THREAD
    raise _refuse(
        6, f"it keeps a row in the registers of one block, at most {most} elements", m, n, dtype
    )


def _warp_row(rung: int, m: int, n: int, dtype: torch.dtype) -> Plan | None:
    """Kernels 7 and 11 on a row one warp holds: the fewest of 1, 2, 4, 8 vectors per lane that
    cover it, within ELEMS_PER_THREAD elements; None when the row needs more."""
    vn = vector_width(dtype)
    nvec = n // vn
    for vpt in (1, 2, 4, 8):
        if vpt * vn > ELEMS_PER_THREAD:
            break
        if 32 * vpt >= nvec:
            grid = -(-m // KERNEL7_ROWS_PER_BLOCK)
            name = f"softmax_kernel{rung}_v{vpt}_{SUFFIX[dtype]}"
            return Plan(rung, name, grid, 32 * KERNEL7_ROWS_PER_BLOCK, takes_m=True)
    return None


def _plan7(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    return _warp_row(7, m, n, dtype) or _plan6(m, n, dtype, dev)


def _plan8(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    if n // vector_width(dtype) <= KERNEL6_THREADS[-1] * ELEMS_PER_THREAD // vector_width(dtype):
        return _plan7(m, n, dtype, dev)
    return Plan(8, f"softmax_kernel8_{SUFFIX[dtype]}", m, KERNEL8_THREADS)


def _plan9(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    vn = vector_width(dtype)
    vpt = ELEMS_PER_THREAD // vn
    nvec = n // vn
    # Clusters need sm_90+; a row that one 512-thread block holds needs no cluster.
    if dev.cc < (9, 0) or nvec <= 512 * vpt:
        return _plan8(m, n, dtype, dev)
    for threads, cluster in KERNEL9_CONFIGS:
        if threads * vpt * cluster >= nvec and m * cluster <= _INT32_MAX:
            name = f"softmax_kernel9_t{threads}_c{cluster}_{SUFFIX[dtype]}"
            return Plan(9, name, m * cluster, threads)
    return _plan8(m, n, dtype, dev)


def plan10(
    m: int,
    n: int,
    dtype: torch.dtype,
    dev: DeviceFacts,
    *,
    slice_bytes: int = SLICE_BYTES,
    threads: int | None = None,
) -> Plan:
    """Kernel 10: the row cut into cluster slices by :func:`plan_slices` (the smallest cluster
    whose slices fit ``slice_bytes``). Short rows go to rung 7, rows too long for 8 slices to
    rung 8, and so does everything before sm_90. ``slice_bytes`` and ``threads`` are knobs for
    tuning experiments; the defaults are what the rung runs."""
    vn = vector_width(dtype)
    nvec = n // vn
    if dev.cc < (9, 0):
        return _plan8(m, n, dtype, dev)
    if nvec * 16 < KERNEL10_MIN_SLICE:  # a few KB: registers (rungs 7, 6) do better
        return _plan7(m, n, dtype, dev)
    sp = plan_slices(nvec, dev.smem_optin, slice_bytes=slice_bytes, threads=threads)
    if sp is None or m * sp.cluster > _INT32_MAX:
        return _plan8(m, n, dtype, dev)
    name = f"softmax_kernel10_t{sp.threads}_c{sp.cluster}_{SUFFIX[dtype]}"
    return Plan(10, name, m * sp.cluster, sp.threads, smem=sp.smem, per_block=sp.per_block)


def _plan11(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """Kernel 11: rows of up to KERNEL10_MIN_SLICE bytes in registers with one exponential per
    element, a warp per row up to 32 x 32 elements and a block per row above; longer rows go to
    rung 10 (and where rung 10 cannot run them, to rung 8). At exactly 16 KB, where rung 10
    stages the row and rung 7 keeps it in registers, this rung takes the registers, so that the
    lab measures both ways there. Every kernel 11 takes (x, y, M, N)."""
    vn = vector_width(dtype)
    nvec = n // vn
    if nvec * 16 > KERNEL10_MIN_SLICE:
        return plan10(m, n, dtype, dev)
    if (warp := _warp_row(11, m, n, dtype)) is not None:
        return warp
    threads = 64  # 16 KB fill 128 threads (fp32) or 256 (16-bit) at 32 elements each
    while threads * (ELEMS_PER_THREAD // vn) < nvec:
        threads *= 2
    return Plan(11, f"softmax_kernel11_t{threads}_{SUFFIX[dtype]}", m, threads, takes_m=True)


PREFETCH_BYTES = 8 << 20
"""How far ahead kernel 12 asks L2 to fetch, in bytes of rows. Closer, the slice is asked for
when the block that reads it is already waiting on it; much further, L2 (60 MB on the H200, as
the lab records it, shared with the rows in flight) evicts it before that block comes. A side
probe on the H200 (fp32 rows of 64 KB to 1 MB, 2 to 16 MB ahead) found the best distance
between 6 and 12 MB at each shape, with 8 and 12 MB within ~2% of each other."""


def prefetch_rows(n: int, dtype: torch.dtype) -> int:
    """Rows ahead for kernel 12: PREFETCH_BYTES of rows, at least one."""
    return max(1, -(-PREFETCH_BYTES // (n * (torch.finfo(dtype).bits // 8))))


def _plan12(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """Kernel 12: for fp32 rows, kernel 10's plan (same slices, clusters and threads) with the
    L2 prefetch ``prefetch_rows`` ahead; everything else where rung 11 sends it (16-bit rows
    too: a side probe on the H200 measured the prefetch slower than rung 10 on bf16 rows of
    128 to 512 KB). Kernel 12 takes (x, y, N, per_block, M, ahead)."""
    p = _plan11(m, n, dtype, dev)
    if p.rung != 10 or dtype != torch.float32:
        return p
    name = p.kernel.replace("softmax_kernel10_", "softmax_kernel12_")
    return dataclasses.replace(p, rung=12, kernel=name, ahead=prefetch_rows(n, dtype))


def _plan13(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """Kernel 13: rung 12's plan with its kernels (rung 11's, rung 10's, rung 12's) swapped for
    the same kernels built with the two-instruction exponential; rung 7 and rung 8, where rung
    12 hands a shape to them, stay as they are. The kernels for rows of 16 KB and more all take
    (x, y, N, per_block, M, ahead) (``ahead`` unused on 16-bit rows); the shorter ones (x, y, M,
    N), like kernel 11."""
    p = _plan12(m, n, dtype, dev)
    if p.rung not in (10, 11, 12):
        return p
    name = re.sub(r"^softmax_kernel1[012]_", "softmax_kernel13_", p.kernel)
    return dataclasses.replace(p, rung=13, kernel=name)


KERNEL14_SLICES = ((32 << 10, 256, 4), (512 << 10, 256, 8), (1 << 20, 512, 8))
"""(rows up to this many bytes, threads, vectors per thread) for kernel 14: 16 KB slices over
two blocks up to 32 KB, 32 KB slices over 2 to 16 blocks up to 512 KB, 64 KB slices over 16
blocks up to 1 MB (fp32 only: a 16-bit 64 KB slice would need ~100 registers per thread)."""
KERNEL14_CLUSTERS = (2, 4, 8, 16)
KERNEL14_FP32_FROM = (256 << 10) + 16
"""The shortest fp32 row rung 14 takes, in bytes: one vector over 256 KB. Rows up to 256 KB stay
with rung 12's prefetch, level with the register slice in the side probe that chose these
shapes (the docstring of :func:`_plan14`)."""
KERNEL16_FP32_FROM = 256 << 10
"""The shortest fp32 row rung 16 takes: 256 KB (65536 columns), where lab 02 measured rung 12
behind QuACK."""
KERNEL16_SLICES = {(256 << 10, torch.float32): (1024, 8), (128 << 10, torch.bfloat16): (256, 4)}
"""(bytes of a row's whole vectors, dtype) -> (threads, vectors per thread) where rung 16 cuts
the row into other slices than rung 14: lab 02's rows of 65536 columns, where it measured QuACK
a little ahead of rung 16 on 32 KB slices. An fp32 row of 256 KB as two 128 KB blocks of 1024
threads and a bf16 row of 128 KB as eight 16 KB blocks of 256 threads x 4 vectors were the
fastest of the slices labs/probe_softmax_slices.py timed on the H200 at 8192 x 65536 fp32 and
32768 x 65536 bf16 (lab 02 says by how much). Rows of other lengths keep rung 14's slices."""


def _plan14(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """Kernel 14: the cluster slice in registers (softmax.cu) for 16-bit rows of more than 16 KB
    up to 512 KB and fp32 rows of more than 256 KB up to 1 MB; every other shape where rung 13
    sends it. The cluster is the smallest of 2, 4, 8, 16 whose slices hold the row; a cluster of
    16 needs the host's opt-in (``Plan.cluster``). A side probe on the H200 (aligned rows, one
    run each) chose the shapes: QuACK's 256 threads x 8 vectors with p kept in fp32 was the
    fastest of the register layouts it timed at bf16 rows of 64 KB to 512 KB; at 32 KB, two
    16 KB blocks beat one 32 KB block; fp32 rows gained from 512 KB up. Takes (x, y, N,
    per_block), like kernel 10."""
    return _slice_plan(14, m, n, dtype, dev, fp32_from=KERNEL14_FP32_FROM) or _plan13(
        m, n, dtype, dev
    )


def _slice_plan(
    rung: int,
    m: int,
    n: int,
    dtype: torch.dtype,
    dev: DeviceFacts,
    fp32_from: int,
    slices: dict[tuple[int, torch.dtype], tuple[int, int]] | None = None,
) -> Plan | None:
    """Rung 14's register slice (or rung 16's, the same shapes with its own kernels) for an
    (m, n) input, taking fp32 rows of ``fp32_from`` bytes and more; None for a row it does not
    take. ``slices``: (threads, vectors per thread) for rows of exactly these bytes of vectors,
    in place of KERNEL14_SLICES' (rung 16's KERNEL16_SLICES)."""
    vn = vector_width(dtype)
    nbytes = (n // vn) * 16
    wide = dtype == torch.float32
    if dev.cc < (9, 0) or nbytes <= KERNEL10_MIN_SLICE or (wide and nbytes < fp32_from):
        return None
    for most, threads, k in KERNEL14_SLICES:
        if nbytes <= most and (wide or threads * k * 16 <= 32 << 10):
            break
    else:
        return None
    threads, k = (slices or {}).get((nbytes, dtype), (threads, k))
    slice_bytes = threads * k * 16
    cluster = next(c for c in KERNEL14_CLUSTERS if c * slice_bytes >= nbytes)
    if m * cluster > _INT32_MAX:
        return None
    nvec = n // vn
    # Rows that are whole vectors and fill every slice run the kernel without bound checks
    # (``_full``); :func:`launch` swaps it for the checked one when x is not 16-byte aligned.
    full = n % vn == 0 and nvec == cluster * threads * k
    full_tag = "full_" if full else ""
    name = f"softmax_kernel{rung}_t{threads}_k{k}_c{cluster}_{full_tag}{SUFFIX[dtype]}"
    return Plan(rung, name, m * cluster, threads, per_block=-(-nvec // cluster), cluster=cluster)


KERNEL15_THREADS = 128
KERNEL15_VPT_MAX = {torch.float32: 8, torch.float16: 5, torch.bfloat16: 5}
"""Vectors per lane kernel 15 holds at most: 32 fp32 values, or 40 values of a 16-bit dtype (the
register budget of rung 11's short rows, plus one vector for 16-bit rows of 33 to 40 vectors
per warp, such as 1280 columns)."""


def short_row_layout(nvec: int, vpt_max: int) -> tuple[int, int] | None:
    """(lanes per row, vectors per lane) for kernel 15 on rows of ``nvec`` vectors: the pair
    with the fewest vector slots (lanes x vectors) among 1, 2, 4, ..., 32 lanes and at most
    ``vpt_max`` vectors each; on a tie, the most lanes with at least two vectors each (two loads
    in flight per lane), else the most lanes. None when even 32 lanes cannot hold the row.

    A side probe on the H200 timed the candidates at four short shapes: fewer vectors over more
    lanes was faster at small batches (600 fp32 columns, one row: 32 x 5 in 1.43 us against
    16 x 10 in 1.86), and one vector per lane a little slower than two (256 bf16 columns, 32768
    rows: 32 x 1 in 11.8 us against 16 x 2 in 11.6)."""
    best: tuple[tuple[int, bool, int], tuple[int, int]] | None = None
    for lanes in (32, 16, 8, 4, 2, 1):
        vpt = -(-nvec // lanes)
        if vpt > vpt_max:
            continue
        key = (lanes * vpt, vpt < 2, -lanes)
        if best is None or key < best[0]:
            best = (key, (lanes, vpt))
    return None if best is None else best[1]


def _plan15(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """Kernel 15: rows of whole 16-byte vectors, up to 32 x KERNEL15_VPT_MAX of them (1024 fp32
    or 1280 16-bit elements), in groups of ``short_row_layout`` lanes, 128 / lanes rows per
    128-thread block; every other row as rung 14. Kernel 15 takes (x, y, M, nvec), and needs x
    16-byte aligned: :func:`launch` runs rung 14's plan on an x that is not."""
    vn = vector_width(dtype)
    layout = short_row_layout(n // vn, KERNEL15_VPT_MAX[dtype]) if n % vn == 0 else None
    if layout is None:
        return _plan14(m, n, dtype, dev)
    lanes, vpt = layout
    rows = KERNEL15_THREADS // lanes
    name = f"softmax_kernel15_l{lanes}_v{vpt}_{SUFFIX[dtype]}"
    return Plan(15, name, -(-m // rows), KERNEL15_THREADS, per_block=n // vn)


def _plan16(m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """Kernel 16: rung 14's register slices, with the exponent's shift folded into one FFMA
    (softmax.cu), on the rows rung 14 takes and on fp32 rows of 256 KB (65536 columns), which
    rung 14 leaves to rung 12, with other slices at the lengths of KERNEL16_SLICES; rung 15's
    short rows, and every other row where rung 15 sends it. Same arguments as kernel 14."""
    p = _plan15(m, n, dtype, dev)
    if p.rung == 15:
        return p
    return (
        _slice_plan(16, m, n, dtype, dev, fp32_from=KERNEL16_FP32_FROM, slices=KERNEL16_SLICES) or p
    )


_PLANNERS = {
    1: _plan1,
    2: functools.partial(_plan_smem, 2),
    3: functools.partial(_plan_smem, 3),
    4: functools.partial(_plan_smem, 4),
    5: functools.partial(_plan_smem, 5),
    6: _plan6,
    7: _plan7,
    8: _plan8,
    9: _plan9,
    10: plan10,
    11: _plan11,
    12: _plan12,
    13: _plan13,
    14: _plan14,
    15: _plan15,
    16: _plan16,
}
RUNGS = tuple(_PLANNERS)


@functools.lru_cache(maxsize=4096)
def plan(rung: int, m: int, n: int, dtype: torch.dtype, dev: DeviceFacts) -> Plan:
    """The kernel, grid, block and shared memory that rung ``rung`` uses for an (m, n) input.

    A pure function of its arguments, so it is cached: :func:`launch` calls it on every call,
    and walking a rung's chain of planners costs the host several microseconds each time (a
    refused shape raises, and is not cached)."""
    if dtype not in SUFFIX:
        raise TypeError(f"softmax: CUDA kernels take float32, float16 or bfloat16, not {dtype}")
    if m < 1 or n < 1:
        raise ValueError(f"softmax: plan needs m, n >= 1, got {m} x {n}")
    if rung >= 2 and m > _INT32_MAX:
        raise _refuse(
            rung, "one block per row, and a grid has at most 2^31 - 1 blocks", m, n, dtype
        )
    if rung in (5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16) and n > _INT32_MAX:
        raise _refuse(rung, "it indexes a row with 32-bit integers", m, n, dtype)
    try:
        return _PLANNERS[rung](m, n, dtype, dev)
    except UnsupportedShape as exc:  # a rung that hands long rows down names itself, not the
        msg = str(exc)  # rung it fell back to
        new = re.sub(r"impl 'cuda:\d+'", f"impl 'cuda:{rung}'", msg, count=1)
        raise UnsupportedShape(new) from None


# --------------------------------------------------------------------------------------------
# Launching
# --------------------------------------------------------------------------------------------


@functools.cache
def device_facts(index: int) -> DeviceFacts:
    """Compute capability and opt-in shared memory per block of CUDA device ``index``."""
    props = torch.cuda.get_device_properties(index)
    optin = getattr(props, "shared_memory_per_block_optin", 0)
    if not optin:
        try:
            from cuda.bindings import driver

            attr = driver.CUdevice_attribute.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
            err, optin = driver.cuDeviceGetAttribute(attr, index)
            optin = int(optin) if int(err) == 0 else 0
        except ImportError:
            optin = 0
    return DeviceFacts(cc=(props.major, props.minor), smem_optin=int(optin) or 48 * 1024)


@functools.cache
def _kernel(name: str, index: int):  # type: ignore[no-untyped-def]
    # One handle per (kernel, device); launch makes the device current first.
    from minikernel.cuda import get_kernel

    return get_kernel(CU_FILE, name)


def match_alignment(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """x itself when x and y sit at the same address modulo 16 (the vector kernels split every
    row of x and y at the same element), else a copy of x placed to match y."""
    if (x.data_ptr() - y.data_ptr()) % 16 == 0:
        return x
    es = x.element_size()
    buf = torch.empty(x.numel() + 16 // es, dtype=x.dtype, device=x.device)
    shift = ((y.data_ptr() - buf.data_ptr()) % 16) // es
    moved = buf[shift : shift + x.numel()].view(x.shape)
    moved.copy_(x)
    return moved


def launch(rung: int, x: torch.Tensor, y: torch.Tensor, p: Plan | None = None) -> torch.Tensor:
    """Run rung ``rung`` on contiguous CUDA tensors x, y of shape (M, N); returns y. ``p``
    overrides the planned launch (tuning experiments)."""
    m, n = x.shape
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    if p is None:
        p = plan(rung, m, n, x.dtype, device_facts(index))
    if p.rung >= 5:
        x = match_alignment(x, y)
    if p.rung == 15 and x.data_ptr() % 16:  # kernel 15 reads whole vectors from x's start
        p = _plan14(m, n, x.dtype, device_facts(index))
    if "_full_" in p.kernel and x.data_ptr() % 16:  # rows with scalar edges: the checked kernel
        p = dataclasses.replace(p, kernel=p.kernel.replace("_full_", "_"))
    if p.takes_m:
        args: tuple = (x, y, ctypes.c_int64(m), ctypes.c_int64(n))
    elif p.rung == 15:
        args = (x, y, ctypes.c_int64(m), ctypes.c_int32(p.per_block))
    elif p.rung in (10, 14, 16):
        args = (x, y, ctypes.c_int64(n), ctypes.c_int32(p.per_block))
    elif p.rung in (12, 13):
        args = (
            x,
            y,
            ctypes.c_int64(n),
            ctypes.c_int32(p.per_block),
            ctypes.c_int64(m),
            ctypes.c_int32(p.ahead),
        )
    else:
        args = (x, y, ctypes.c_int64(n))
    # x's device current for the launch (its stream and context); when it is already current,
    # as it usually is, entering torch.cuda.device would cost the host a device switch for nothing.
    here = index == torch.cuda.current_device()
    with contextlib.nullcontext() if here else torch.cuda.device(index):
        kernel = _kernel(p.kernel, index)
        kernel.allow_cluster_size(p.cluster)  # nothing to do up to 8
        kernel(p.grid, p.block, args, shared_mem=p.smem)
    return y
