"""Does rung 15 close the last gap to QuACK at 32768 x 600 bf16 as a persistent kernel?

    python labs/probe_softmax_persistent.py              # the shapes below, 5 rounds
    python labs/probe_softmax_persistent.py --rounds 3 --n 600

Rung 15 (softmax.cu) gives each short row a group of lanes and each 128-thread block
128 / lanes rows, one block per group of rows: at 32768 x 600 bf16 that is 4096 blocks, about
three waves of them, and lab 02 has QuACK a hair ahead there (the p20-p80 ranges of the two
overlap). The layout and the block size were probed before (probe_softmax_short.py): every
candidate within a few per cent, none ahead. What no rung does on short rows is overlap one
group's loads with another group's arithmetic inside a block: the overlap comes only from the
other blocks resident on the SM, and the first and last waves have fewer of them.

This probe appends to a copy of softmax.cu a persistent form of rung 15: GRID = SMs x blocks
per SM, block b walking the groups of rows b, b + GRID, ..., with the same per-row arithmetic
(so the same bits as rung 15: checked on the whole output). Three forms:

    persistent      one group at a time: loads, max, exponentials, sum, stores, next group
    prefetch        the next group's 16-byte loads issued (into registers, still packed)
                    before this group's arithmetic, so that they are in flight while it runs
    pinned          prefetch with each load an asm volatile with a memory clobber, so that
                    neither the compiler nor ptxas sinks it below the stores (x and y are
                    __restrict__, so plain loads may move there to save registers)

Byte model and prediction: both move rung 15's bytes (read x, write y: 2 x 32768 x 600 x 2
bytes); the report prints that model's time at the ceiling measured at the start. Rung 15's time
above it is its first and last waves and the launch of 4096 blocks; a persistent grid launches
132 x k blocks once, and prefetch keeps loads in flight through each group's arithmetic, so if
the waves are the gap, prefetch should reach QuACK's time or pass it; if they are not, all
three tie. On the H200 neither happened: every form, at every grid, was slower than the shipped
rung 15 at both shapes (lab 02's page, rung 15, says more). It prints, it writes nothing: the
course's numbers come from ``nox -s labs``.
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
BLOCKS_PER_SM = (4, 8, 12, 16)
CU_TYPE = {"float32": ("f32", "float"), "bfloat16": ("bf16", "mk_bf16")}
ANCHOR = "// --8<-- [end:kernel15]\n"

PERSISTENT = r"""
// probe: rung 15 made persistent; FORM 1 and 2 issue the next group's loads before this one's math
template <typename T> __device__ __forceinline__ Vec<T> load_vec_pinned(const T* p) {
    uint4 r;
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p) : "memory");
    return *reinterpret_cast<Vec<T>*>(&r);
}

template <typename T, int LPR, int VPT, int FORM>  // 0 persistent, 1 prefetch, 2 pinned
__device__ __forceinline__ void softmax15p(const T* __restrict__ x, T* __restrict__ y,
                                           long long M, int nvec) {
    constexpr int VN = Vec<T>::N;
    constexpr int RPB = 128 / LPR;
    const int lane = threadIdx.x % LPR;
    const int sub = threadIdx.x / LPR;
    const long long groups = (M + RPB - 1) / RPB;
    Vec<T> raw[VPT];
    auto fetch = [&](long long g) {
        const long long row = g * RPB + sub;
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
            if (g < groups && row < M && i < nvec)
                raw[j] = FORM == 2 ? load_vec_pinned(x + (row * nvec + i) * VN)
                                   : load_vec_plain(x + (row * nvec + i) * VN);
        }
    };
    if (FORM > 0) fetch(blockIdx.x);
    for (long long g = blockIdx.x; g < groups; g += gridDim.x) {  // g is the same in a block
        if (FORM == 0) fetch(g);
        const long long row = g * RPB + sub;
        const bool live = row < M;
        const long long first = row * nvec;
        float f[VPT][VN];
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
            const int i = j * LPR + lane;
#pragma unroll
            for (int k = 0; k < VN; ++k)
                f[j][k] = (live && i < nvec) ? elem<true>(raw[j], k) : MK_NEG_INF;
        }
        if (FORM > 0) fetch(g + gridDim.x);  // in flight while this group's arithmetic runs
        float m = MK_NEG_INF;
#pragma unroll
        for (int j = 0; j < VPT; ++j) {
#pragma unroll
            for (int k = 0; k < VN; ++k) m = fmaxf(m, f[j][k]);
        }
#pragma unroll
        for (int o = LPR / 2; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
        float s = 0.f;
        if (foldable(m)) {
            const float ms = m * MK_LOG2E;
#pragma unroll
            for (int j = 0; j < VPT; ++j) {
#pragma unroll
                for (int k = 0; k < VN; ++k) {
                    f[j][k] = mk_ex2(fmaf(f[j][k], MK_LOG2E, -ms));
                    s += f[j][k];
                }
            }
        } else {
            const float shift = safe_shift(m);
#pragma unroll
            for (int j = 0; j < VPT; ++j) {
#pragma unroll
                for (int k = 0; k < VN; ++k) {
                    f[j][k] = mk_ex2((f[j][k] - shift) * MK_LOG2E);
                    s += f[j][k];
                }
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
    }
}
"""


FORMS = ("persistent", "prefetch", "pinned")


def kernel_name(dtype_name: str, lanes: int, vpt: int, form: int) -> str:
    return f"softmax_kernel15p{form}_l{lanes}_v{vpt}_{CU_TYPE[dtype_name][0]}_probe"


def with_candidates(src: str) -> str:
    """softmax.cu with softmax15p and its two forms for each shape's shipped layout."""
    if src.count(ANCHOR) != 1:
        raise SystemExit(f"probe_softmax_persistent: softmax.cu changed; update:\n{ANCHOR}")
    extra = [PERSISTENT]
    for _, _, dtype_name, lanes, vpt in SHAPES:
        ctype = CU_TYPE[dtype_name][1]
        for form in range(len(FORMS)):
            extra.append(
                f'extern "C" __global__ void __launch_bounds__(128) '
                f"{kernel_name(dtype_name, lanes, vpt, form)}(const {ctype}* x, {ctype}* y, "
                f"long long M, int nvec) {{ softmax15p<{ctype}, {lanes}, {vpt}, "
                f"{form}>(x, y, M, nvec); }}\n"
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
        raise SystemExit(f"probe_softmax_persistent: rung 15 ships {shipped.kernel}, not {want}")
    ref = ck.launch(15, x, torch.empty_like(x)).clone()
    cands = {"cuda:15 (shipped)": lambda: ck.launch(15, x, y)}
    nvec = n // (16 // dtype.itemsize)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    for form, form_name in enumerate(FORMS):
        name = kernel_name(dtype_name, lanes, vpt, form)
        use = ck._kernel(name, x.device.index or 0).usage
        for bps in BLOCKS_PER_SM:
            p = ck.Plan(15, name, sms * bps, 128, per_block=nvec)
            run = lambda p=p: ck.launch(15, x, y, p)
            nan = lambda p=p: ck.launch(15, x, torch.full_like(x, float("nan")), p)
            label = f"{form_name} {bps}/SM"
            admit(cands, label, run, ref, 0.0, str(use), check=nan)  # the same bits as rung 15
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=22)


def main() -> None:
    args = probe_parser(__doc__, (n for _, n, _, _, _ in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_softmax_persistent")
    with kernel_source(ck, with_candidates(ck.CU_FILE.read_text()), "softmax_persistent.cu"):
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
