"""Which lane groups and block size are fastest for rung 15 at 32768 x 600 bf16, where QuACK leads?

    python labs/probe_softmax_short.py              # the shapes below, 5 rounds
    python labs/probe_softmax_short.py --rounds 3 --n 600

Rung 15 (softmax.cu) gives each short row a group of LPR lanes holding VPT 16-byte vectors each,
128 threads a block: at 600 bf16 columns (75 vectors) the host's rule (short_row_layout, the
fewest vector slots) picks 16 lanes x 5 vectors, 8 rows a block. Lab 02 has QuACK a little
ahead of it at 32768 x 600 bf16; QuACK's source gives such a row a whole warp (32 lanes x 3
vectors here, 96 slots) in blocks of 128 threads. This probe compiles a copy of softmax.cu
whose rung 15 takes the block size as a template parameter, instantiates every layout that
holds the row (LPR x VPT >= the row's vectors, VPT within rung 15's register budget) at 64,
128, 256 and 512 threads a block, checks each against the fp64 reference on three rows, and
times them with the shipped rung 15 and QuACK (where it is installed) in interleaved rounds,
all timed like the lab (events, a clean L2, a GPU-side lead). Lab 02's page (rung 15) says what
an H200 showed: no layout or block size stood out from the others. It prints, it writes
nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import torch

import minikernel.kernels.softmax as sm
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.probe import add_peer, gpu_ceiling, kernel_source, probe_parser, race, report

SHAPES = [  # (rows, row length, dtype)
    (32768, 600, "bfloat16"),  # QuACK ahead in lab 02
    (65536, 600, "float32"),  # level with QuACK in lab 02 (150 vectors: 32 x 5 shipped)
]
THREADS = (64, 128, 256, 512)
CU_TYPE = {"float32": ("f32", "float"), "bfloat16": ("bf16", "mk_bf16")}
HEAD = "template <typename T, int LPR, int VPT>\n__device__ __forceinline__ void softmax15("
ROWS = "blockIdx.x) * (128 / LPR)"
ANCHOR = "// --8<-- [end:kernel15]\n"


def layouts(nvec: int, dtype_name: str) -> list[tuple[int, int]]:
    """(lanes, vectors per lane) for every power-of-two group of lanes that holds a row of
    ``nvec`` vectors with at most rung 15's vectors per lane."""
    most = ck.KERNEL15_VPT_MAX[getattr(torch, dtype_name)]
    out = []
    for lanes in (32, 16, 8, 4, 2, 1):
        vpt = -(-nvec // lanes)
        if vpt <= most:
            out.append((lanes, vpt))
    return out


def kernel_name(dtype_name: str, lanes: int, vpt: int, threads: int) -> str:
    return f"softmax_kernel15_l{lanes}_v{vpt}_t{threads}_{CU_TYPE[dtype_name][0]}_probe"


def with_candidates(src: str) -> str:
    """softmax.cu whose softmax15 takes its block size (default 128, so the shipped kernels do
    not change), with a kernel for every layout and block size of SHAPES."""
    for text in (HEAD, ROWS, ANCHOR):
        if src.count(text) != 1:
            raise SystemExit(f"probe_softmax_short: softmax.cu changed; update:\n{text}")
    src = src.replace(HEAD, HEAD.replace("int VPT>", "int VPT, int THREADS = 128>"))
    src = src.replace(ROWS, "blockIdx.x) * (THREADS / LPR)")
    extra = []
    for _, n, dtype_name in SHAPES:
        ctype = CU_TYPE[dtype_name][1]
        vn = 16 // getattr(torch, dtype_name).itemsize
        for lanes, vpt in layouts(n // vn, dtype_name):
            for t in THREADS:
                extra.append(
                    f'extern "C" __global__ void __launch_bounds__({t}) '
                    f"{kernel_name(dtype_name, lanes, vpt, t)}(const {ctype}* x, {ctype}* y, "
                    f"long long M, int nvec) {{ softmax15<{ctype}, {lanes}, {vpt}, {t}>(x, y, M, "
                    "nvec); }\n"
                )
    return src.replace(ANCHOR, ANCHOR + "".join(extra))


def candidate_plan(m: int, n: int, dtype_name: str, lanes: int, vpt: int, t: int) -> ck.Plan:
    """Rung 15's launch of one candidate: t / lanes rows a block."""
    nvec = n // (16 // getattr(torch, dtype_name).itemsize)
    name = kernel_name(dtype_name, lanes, vpt, t)
    return ck.Plan(15, name, -(-m // (t // lanes)), t, per_block=nvec)


def probe(m: int, n: int, dtype_name: str, rounds: int, gbps: float) -> None:
    """Every candidate from the copy ck.CU_FILE points at (the shipped kernels included: the
    copy's default block is rung 15's 128 threads), so no launch reloads a module: these calls
    take about 20 µs, and the host's cost stays behind the timer's lead."""
    dtype = getattr(torch, dtype_name)
    x = sm.make_inputs(m, n, dtype, "cuda", 1)
    y = torch.empty_like(x)
    rows = [0, m // 2, m - 1]
    want = sm.reference(x[rows])
    atol, rtol = sm.tolerances("cuda:15", n)[dtype]
    shipped = ck.plan(15, m, n, dtype, ck.device_facts(x.device.index or 0))
    print(f"  {m} x {n} {dtype_name}: rung 15 ships {shipped.kernel}, {shipped.block} threads")
    cands = {"cuda:15 (shipped)": lambda: ck.launch(15, x, y)}
    vn = 16 // dtype.itemsize
    for lanes, vpt in layouts(n // vn, dtype_name):
        for t in THREADS:
            p = candidate_plan(m, n, dtype_name, lanes, vpt, t)
            run = lambda p=p: ck.launch(15, x, y, p)
            label = f"l{lanes} v{vpt} t{t}"
            close = torch.allclose(run()[rows].double(), want, atol=atol, rtol=rtol)
            if not close:
                print(f"  {label}: WRONG")
                continue
            cands[label] = run
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=18)


def main() -> None:
    args = probe_parser(__doc__, (n for _, n, _ in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_softmax_short")
    with kernel_source(ck, with_candidates(ck.CU_FILE.read_text()), "softmax_short.cu"):
        ck._kernel.cache_clear()
        try:
            for m, n, dtype_name in SHAPES:
                if not args.n or n in args.n:
                    probe(m, n, dtype_name, args.rounds, gbps)
                    torch.cuda.empty_cache()
        finally:
            ck._kernel.cache_clear()


if __name__ == "__main__":
    main()
