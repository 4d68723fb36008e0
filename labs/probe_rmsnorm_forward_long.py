"""Does RMSNorm's rung 5 reach QuACK on long rows with QuACK's shape: few warps, long slices?

    python labs/probe_rmsnorm_forward_long.py              # the rows below, 5 rounds
    python labs/probe_rmsnorm_forward_long.py --rounds 3 --n 131072 --dtype float32

Nsight Compute at 16384 x 131072 fp32 (labs/probe_rmsnorm_forward_ncu.py) had QuACK's forward
moving the byte model's bytes with about a third of rung 4's warp instructions, eight warps
resident per SM and over 160 registers a thread, where rungs 4 and 5 give each of their many
threads four 16-byte vectors in 32 registers. The slice probe (probe_rmsnorm_forward_slices.py)
only varied the block and the cluster at four vectors a thread. This one varies the vectors a
thread holds: it compiles a copy of rmsnorm.cu whose rung 5 takes them as a template parameter
and instantiates CANDIDATES (threads, vectors a thread, cluster, blocks per SM for the register
budget), each with every vector of its slice whole, checks each against the shipped rung 5 on
the whole output, and races them with the shipped rungs 4 and 5 and QuACK in interleaved
rounds, all timed like the lab.

Byte model and prediction: every candidate moves the same bytes (x read, y written, the weights
from L2), so the floor is the same copy-ceiling time as the shipped rungs'. What changes is the
instructions per byte (the loop overhead, the reductions and the cluster exchange are paid once
per thread, so a thread with 16 or 32 vectors pays them over four to eight times the bytes) and
the loads in flight per SM (threads x vectors x 16 bytes: 256 x 32 x 16 = 128 KB at one block
per SM, as much as 2048 threads x 4 vectors). If the instruction count is what holds rung 5's
DRAM back at these rows, QuACK's shape should reach QuACK's time. On the H200 it did not: every
candidate was slower than the shipped rungs at every row, the more vectors a thread held the
slower (the fused-rmsnorm page, rung 5, says more). A later run (2026-12-02, 3 rounds, without
QuACK) added one block of 1024 threads x 8 vectors per 128 KB row, no cluster, the shape of
triton:2's whole rows: several per cent slower than the shipped rungs at 32768 fp32 and 65536
bf16, and at 32768 fp32 well behind triton:2 in the lab. It prints, it writes nothing: the course's
numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import ctypes
import tempfile
from pathlib import Path

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.probe import (
    add_peer,
    admit,
    gpu_ceiling,
    probe_parser,
    race,
    report,
    write_variants,
)

CANDIDATES = {  # (rows, row length, dtype) -> (threads, vectors a thread, cluster, blocks per SM)
    (16384, 131072, "float32"): [  # 32768 vectors a row
        (256, 32, 4, 1),  # QuACK's shape, as its profile and source suggest
        (256, 16, 8, 1),
        (512, 16, 4, 1),
        (128, 32, 8, 2),
        (256, 8, 16, 2),  # the v8 shape of probe_rmsnorm_forward_rung4, on rung 5
    ],
    (16384, 65536, "float32"): [  # 16384 vectors
        (256, 16, 4, 1),
        (256, 32, 2, 1),
        (128, 32, 4, 2),
        (256, 8, 8, 2),
    ],
    (32768, 131072, "bfloat16"): [  # 16384 vectors
        (256, 16, 4, 1),
        (256, 32, 2, 1),
        (128, 32, 4, 2),
        (256, 8, 8, 2),
    ],
    (32768, 32768, "bfloat16"): [  # 4096 vectors
        (256, 8, 2, 2),
        (128, 16, 2, 2),
        (128, 8, 4, 4),
        (512, 8, 1, 2),  # one block a row, no cluster (below)
    ],
    # Rows of 128 KB in one block of 1024 threads x 8 vectors, no cluster: the shape at which
    # triton:2, holding the row whole, was the fastest of ours at 32768 fp32 (lab 02 at
    # 306ba7ae7904); and the same with two blocks of 512 over a cluster of 2.
    (16384, 32768, "float32"): [  # 8192 vectors
        (1024, 8, 1, 1),
        (512, 8, 2, 2),
    ],
    (32768, 65536, "bfloat16"): [  # 8192 vectors
        (1024, 8, 1, 1),
        (512, 8, 2, 2),
    ],
}
CU_TYPE = {"float32": ("f32", "float"), "bfloat16": ("bf16", "mk_bf16")}
HEAD = (
    "template <typename T, typename W, int THREADS, int CLUSTER>\n"
    "__device__ __forceinline__ void rmsnorm5("
)
K_LINE = "    constexpr int K = KERNEL5_VECS;\n"
NO_SINGLE = '    static_assert(CLUSTER > 1, "a row that fits one block runs kernel 3");\n'
"""Rung 5's guard against a cluster of one (rung 4 has the same line): lifted in rung 5's copy,
where a cluster of one is a block that exchanges with itself."""
ANCHOR = "MK_FOR_EACH_DTYPE(RMSNORM5)\n"


def kernel_name(dtype_name: str, t: int, k: int, c: int) -> str:
    return f"rmsnorm_kernel5_t{t}_k{k}_c{c}_{CU_TYPE[dtype_name][0]}_probe"


def with_candidates(src: str) -> str:
    """rmsnorm.cu whose rmsnorm5 takes the vectors a thread holds as a template parameter
    (default KERNEL5_VECS: the shipped kernels do not change), plus a kernel per candidate under
    a name of its own, with the candidate's register budget (__launch_bounds__)."""
    for text in (HEAD, K_LINE, ANCHOR):
        if src.count(text) != 1:
            raise SystemExit(f"probe_rmsnorm_forward_long: rmsnorm.cu changed; update:\n{text}")
    rung5 = src.index(HEAD)
    if src.count(NO_SINGLE) != 2 or src.find(NO_SINGLE, rung5) < 0:
        raise SystemExit(f"probe_rmsnorm_forward_long: rmsnorm.cu changed; update:\n{NO_SINGLE}")
    src = src[:rung5] + src[rung5:].replace(NO_SINGLE, "", 1)
    src = src.replace(HEAD, HEAD.replace("int CLUSTER>", "int CLUSTER, int KV = KERNEL5_VECS>"))
    src = src.replace(K_LINE, "    constexpr int K = KV;  // probe: vectors a thread\n")
    extra = []
    for (_, _, dtype_name), launches in CANDIDATES.items():
        ctype = CU_TYPE[dtype_name][1]
        for t, k, c, minb in launches:
            extra.append(
                f'extern "C" __global__ void __cluster_dims__({c}, 1, 1) '
                f"__launch_bounds__({t}, {minb}) {kernel_name(dtype_name, t, k, c)}("
                f"const {ctype}* x, const {ctype}* w, {ctype}* y, float* rstd, long long n, "
                f"float eps, int per_block) {{ rmsnorm5<{ctype}, {ctype}, {t}, {c}, {k}>"
                "(x, w, y, rstd, n, eps, per_block); }\n"
            )
    return src.replace(ANCHOR, ANCHOR + "".join(extra))


def per_block(n: int, dtype_name: str, t: int, k: int, c: int) -> int:
    """Vectors each block holds: the candidate must make the row exactly (rung 5 has no bounds
    checks)."""
    nvec = n // (16 // getattr(torch, dtype_name).itemsize)
    if t * k * c != nvec:
        raise SystemExit(f"probe_rmsnorm_forward_long: {t} x {k} x {c} vectors is not {n}")
    return t * k


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    from minikernel.cuda import get_kernel

    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    eps = rn.EPS
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    y = torch.empty_like(x)

    def shipped(rung: int):  # type: ignore[no-untyped-def]
        launch = rn._launch_cuda5 if rung == 5 else rn._launch_cuda4
        return lambda out=y: launch(x, w, out, eps, rstd)

    def candidate(t: int, k: int, c: int):  # type: ignore[no-untyped-def]
        kernel = get_kernel(path, kernel_name(dtype_name, t, k, c))
        kernel.allow_cluster_size(c)
        extra = (
            ctypes.c_int64(n),
            ctypes.c_float(eps),
            ctypes.c_int32(per_block(n, dtype_name, t, k, c)),
        )

        def run(out: torch.Tensor = y) -> torch.Tensor:
            kernel(m * c, t, (x, w, out, rstd, *extra))
            return out

        return run

    ref = shipped(5)(torch.empty_like(x)).clone()
    scale = float(ref.float().abs().max())
    tol = (1e-5 if dtype == torch.float32 else 2**-7) * scale  # the sum's order may differ
    cands = {"cuda:4 (shipped)": shipped(4), "cuda:5 (shipped)": shipped(5)}
    for t, k, c, _ in CANDIDATES[(m, n, dtype_name)]:
        use = get_kernel(path, kernel_name(dtype_name, t, k, c)).usage
        run = candidate(t, k, c)
        nan = lambda run=run: run(torch.full_like(x, float("nan")))
        admit(cands, f"t{t} k{k} c{c}", run, ref, tol, str(use), check=nan)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=20)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in CANDIDATES))
    parser.add_argument("--dtype", nargs="*", choices=sorted(CU_TYPE), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_long")
    with tempfile.TemporaryDirectory() as tmp:
        src = with_candidates(rn.CU_FILE.read_text())
        path = write_variants({"long": src}, Path(tmp), "rmsnorm")["long"]
        for m, n, dtype_name in CANDIDATES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, path, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
