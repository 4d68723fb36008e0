"""Does staging short rows in shared memory with cp.async close rung 15's last gap to QuACK?

    python labs/probe_softmax_cpasync.py              # the shapes below, 5 rounds
    python labs/probe_softmax_cpasync.py --rounds 3 --n 600

Rung 15 (softmax.cu) loads each short row into registers: at 32768 x 600 bf16, 16 lanes x 5
vectors, 40 fp32 values a thread, held from the load to the store. Lab 02 has QuACK a hair
ahead there (p20-p80 ranges overlapping), and its page names one lever no probe had tried:
QuACK's copy through shared memory with cp.async, which keeps no register waiting on a load.
The layout, the block size (probe_softmax_short.py) and a persistent grid
(probe_softmax_persistent.py) were tried before; none was ahead.

This probe appends to a copy of softmax.cu a staged form of rung 15, with the same lanes,
vectors and per-element arithmetic (so the same bits: checked on the whole output). Each thread
copies its own vectors of the row into shared memory with cp.async.cg (L2 to shared memory,
past L1 and the registers) and waits for them; it reads back only what it copied, so no
barrier is needed. Two forms:

    regs      then reads its vectors into registers once and computes as rung 15 does (what
              the copy path alone changes)
    passes    reads them from shared memory in each of three passes (max, sum, scale and
              store), recomputing each exponential in the last, so that almost nothing is
              held in registers between passes: fewer registers a thread, and as many blocks
              per SM as shared memory allows (the occupancy QuACK's way buys)

each in blocks of 128 and 256 threads.

Byte model and prediction: both move rung 15's bytes (read x, write y: 2 x 32768 x 600 x 2
bytes at 32768 x 600 bf16); the report prints that model's time at the ceiling measured at the
start. If registers holding loads in flight are what keeps rung 15 from QuACK's time, `passes`
should reach it (more blocks per SM, more bytes in flight); if not, both forms tie with rung 15
or trail it by the extra trip through shared memory. On the H200 neither form was ahead: at
32768 x 600 bf16 `regs` trailed rung 15 by several per cent and `passes` by about a third (a
second exponential and two more reads of shared memory per element, with twice fp32's elements
per byte), while rung 15 and QuACK tied in the same rounds; at 65536 x 600 fp32 both forms
were within a few per cent of rung 15, behind it (lab 02's page, rung 15, says more). It
prints, it writes nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import torch

import minikernel.kernels.softmax as sm
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.probe import (
    add_peer,
    admit,
    gpu_ceiling,
    kernel_source,
    probe_parser,
    race,
    report,
)

SHAPES = [  # (rows, row length, dtype, the shipped layout: lanes, vectors a lane)
    (32768, 600, "bfloat16", 16, 5),  # QuACK a hair ahead in lab 02
    (65536, 600, "float32", 32, 5),  # level with QuACK in lab 02
]
BLOCKS = (128, 256)
CU_TYPE = {"float32": ("f32", "float"), "bfloat16": ("bf16", "mk_bf16")}
ANCHOR = "// --8<-- [end:kernel15]\n"

STAGED = r"""
// probe: rung 15 with its row staged in shared memory by cp.async; FORM 0 computes from
// registers after the copy, FORM 1 from shared memory in three passes
template <typename T, int LPR, int VPT, int BLOCK, int FORM>
__device__ __forceinline__ void softmax15s(const T* __restrict__ x, T* __restrict__ y,
                                           long long M, int nvec) {
    constexpr int VN = Vec<T>::N;
    const int lane = threadIdx.x % LPR;
    const int sub = threadIdx.x / LPR;
    const long long row = static_cast<long long>(blockIdx.x) * (BLOCK / LPR) + sub;
    const bool live = row < M;
    const long long first = row * nvec;
    Vec<T>* stage = dynamic_smem<Vec<T>>() + sub * (LPR * VPT);  // this group's slots
#pragma unroll
    for (int j = 0; j < VPT; ++j) {
        const int i = j * LPR + lane;
        if (live && i < nvec) cp_async16(stage + i, x + (first + i) * VN);
    }
    cp_async_wait_all();  // a thread reads back only the vectors it copied: no barrier
    if (FORM == 0) {
        float f[VPT][VN];
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
            if (live && i < nvec) {
                const Vec<T> v = stage[i];
#pragma unroll
                for (int k = 0; k < VN; ++k) f[j][k] = elem<true>(v, k);
            } else {
#pragma unroll
                for (int k = 0; k < VN; ++k) f[j][k] = MK_NEG_INF;
            }
        }
        float m = MK_NEG_INF;
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
#pragma unroll
            for (int k = 0; k < VN; ++k) m = fmaxf(m, f[j][k]);
        }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float s = 0.f;
        const bool fold = foldable(m);
        const float ms = m * MK_LOG2E, shift = safe_shift(m);
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
#pragma unroll
            for (int k = 0; k < VN; ++k) {
                f[j][k] = fold ? mk_ex2(fmaf(f[j][k], MK_LOG2E, -ms))
                               : mk_ex2((f[j][k] - shift) * MK_LOG2E);
                s += f[j][k];
            }
        }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float inv = mk_rcp(s);
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
            if (live && i < nvec) {
                Vec<T> o;
#pragma unroll
                for (int k = 0; k < VN; ++k) o.v[k] = from_float<T>(f[j][k] * inv);
                *reinterpret_cast<Vec<T>*>(y + (first + i) * VN) = o;
            }
        }
    } else {
        float m = MK_NEG_INF;
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
            if (live && i < nvec) {
                const Vec<T> v = stage[i];
#pragma unroll
                for (int k = 0; k < VN; ++k) m = fmaxf(m, elem<true>(v, k));
            }
        }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        const bool fold = foldable(m);
        const float ms = m * MK_LOG2E, shift = safe_shift(m);
        asm volatile("" ::: "memory");  // read the row again: do not keep the first pass's values
        float s = 0.f;
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
            if (live && i < nvec) {  // empty slots add exp(-inf) = 0: skipping them is the same
                const Vec<T> v = stage[i];
#pragma unroll
                for (int k = 0; k < VN; ++k) {
                    const float e = elem<true>(v, k);
                    s += fold ? mk_ex2(fmaf(e, MK_LOG2E, -ms)) : mk_ex2((e - shift) * MK_LOG2E);
                }
            }
        }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        const float inv = mk_rcp(s);
        asm volatile("" ::: "memory");
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
            if (live && i < nvec) {
                const Vec<T> v = stage[i];
                Vec<T> o;
#pragma unroll
                for (int k = 0; k < VN; ++k) {
                    const float e = elem<true>(v, k);
                    const float p =
                        fold ? mk_ex2(fmaf(e, MK_LOG2E, -ms)) : mk_ex2((e - shift) * MK_LOG2E);
                    o.v[k] = from_float<T>(p * inv);
                }
                *reinterpret_cast<Vec<T>*>(y + (first + i) * VN) = o;
            }
        }
    }
}
"""

FORMS = ("regs", "passes")


def kernel_name(dtype_name: str, lanes: int, vpt: int, block: int, form: int) -> str:
    return f"softmax_kernel15s{form}_l{lanes}_v{vpt}_b{block}_{CU_TYPE[dtype_name][0]}_probe"


def with_candidates(src: str) -> str:
    """softmax.cu with softmax15s in both forms and both blocks for each shape's layout."""
    if src.count(ANCHOR) != 1:
        raise SystemExit(f"probe_softmax_cpasync: softmax.cu changed; update:\n{ANCHOR}")
    extra = [STAGED]
    for _, _, dtype_name, lanes, vpt in SHAPES:
        ctype = CU_TYPE[dtype_name][1]
        for form in range(len(FORMS)):
            for block in BLOCKS:
                extra.append(
                    f'extern "C" __global__ void __launch_bounds__({block}) '
                    f"{kernel_name(dtype_name, lanes, vpt, block, form)}(const {ctype}* x, "
                    f"{ctype}* y, long long M, int nvec) {{ softmax15s<{ctype}, {lanes}, {vpt}, "
                    f"{block}, {form}>(x, y, M, nvec); }}\n"
                )
    return src.replace(ANCHOR, ANCHOR + "".join(extra))


def probe(m: int, n: int, dtype_name: str, lanes: int, vpt: int, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x = sm.make_inputs(m, n, dtype, "cuda", 1)
    y = torch.empty_like(x)
    facts = ck.device_facts(x.device.index or 0)
    shipped = ck.plan(15, m, n, dtype, facts)
    want = f"softmax_kernel15_l{lanes}_v{vpt}_{CU_TYPE[dtype_name][0]}"
    if shipped.kernel != want:
        raise SystemExit(f"probe_softmax_cpasync: rung 15 ships {shipped.kernel}, not {want}")
    ref = ck.launch(15, x, torch.empty_like(x)).clone()
    shipped_use = ck._kernel(shipped.kernel, x.device.index or 0).usage
    print(f"  cuda:15 (shipped): {shipped_use}")
    cands = {"cuda:15 (shipped)": lambda: ck.launch(15, x, y)}
    nvec = n // (16 // dtype.itemsize)
    for form, form_name in enumerate(FORMS):
        for block in BLOCKS:
            name = kernel_name(dtype_name, lanes, vpt, block, form)
            use = ck._kernel(name, x.device.index or 0).usage
            rows = block // lanes
            p = ck.Plan(15, name, -(-m // rows), block, smem=block * vpt * 16, per_block=nvec)
            run = lambda p=p: ck.launch(15, x, y, p)
            nan = lambda p=p: ck.launch(15, x, torch.full_like(x, float("nan")), p)
            admit(cands, f"{form_name} {block}", run, ref, 0.0, str(use), check=nan)
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=22)


def main() -> None:
    args = probe_parser(__doc__, (n for _, n, _, _, _ in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_softmax_cpasync")
    with kernel_source(ck, with_candidates(ck.CU_FILE.read_text()), "softmax_cpasync.cu"):
        ck._kernel.cache_clear()
        try:
            for m, n, dtype_name, lanes, vpt in SHAPES:
                if not args.n or n in args.n:
                    probe(m, n, dtype_name, lanes, vpt, args.rounds, gbps)
                    torch.cuda.empty_cache()
        finally:
            ck._kernel.cache_clear()


if __name__ == "__main__":
    main()
