"""Which cluster slice is fastest for rung 16 on 64K-column rows, where QuACK leads lab 02?

    python labs/probe_softmax_slices.py              # the two shapes below, 5 rounds
    python labs/probe_softmax_slices.py --rounds 3 --n 65536 --dtype float32

Rung 14 (softmax.cu) splits a long row over a cluster of blocks, each holding its slice in
registers: 256 threads x 8 vectors (32 KB) per block, the shape QuACK uses for long rows, which
an earlier side probe found the fastest register layout on bf16 rows of 64 to 512 KB. Rung 16
first took the same slices, and on fp32 rows of 256 KB (8192 x 65536) nobody had timed another
shape. There, and on bf16 rows of 128 KB (32768 x 65536), lab 02 had QuACK a little ahead of
our fastest rung. This probe compiles a copy of softmax.cu with rung 16 instantiated for other
slices of the same rows (CANDIDATES: more threads or fewer, more vectors per thread or fewer,
and the cluster that makes the row), prints each kernel's registers and spills, checks each
against the fp64 reference on three rows, and times them with the shipped rung 16, rung 12
(fp32) and QuACK (where it is installed) in interleaved rounds.

On the H200 the fp32 row was fastest as two 128 KB blocks of 1024 threads, ahead of QuACK and
of the 32 KB slices, and the bf16 row as eight 16 KB blocks of 256 x 4, still a little behind
QuACK; rung 16 now ships both (KERNEL16_SLICES). It prints, it writes nothing: the course's
numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import minikernel.kernels.softmax as sm
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.probe import (
    add_peer,
    gpu_ceiling,
    launch_from,
    probe_parser,
    race,
    report,
    write_variants,
)

CANDIDATES = {  # (rows, row length, x's dtype) -> (threads, vectors per thread, cluster, MINB)
    # 256 KB fp32 rows. MINB (blocks per SM) sets the register budget, 65536 / (threads x
    # MINB): 64 registers for every fp32 candidate but 1024 x 8.
    (8192, 65536, "float32"): [
        (256, 8, 8, 4),  # rung 14's 32 KB slices over 8, rung 16's before KERNEL16_SLICES
        (512, 8, 4, 2),  # 64 KB slices over 4
        (1024, 4, 4, 1),  # 64 KB over 4, four vectors a thread
        (512, 4, 8, 2),  # 32 KB over 8, four vectors a thread
        (256, 4, 16, 4),  # 16 KB over 16
        (128, 8, 16, 8),  # 16 KB over 16, eight vectors a thread
        (1024, 8, 2, 1),  # 128 KB over 2: rung 16's since KERNEL16_SLICES
    ],
    # 128 KB bf16 rows; rung 14's slice: 256 x 8 over 4 (MINB 3: 85 registers).
    (32768, 65536, "bfloat16"): [
        (256, 8, 4, 3),  # rung 14's 32 KB slices over 4, rung 16's before KERNEL16_SLICES
        (512, 8, 2, 1),  # 64 KB over 2: 128 registers
        (128, 8, 8, 6),  # 16 KB over 8, eight vectors a thread
        (256, 4, 8, 4),  # 16 KB over 8, 4 vectors a thread: rung 16's since KERNEL16_SLICES
        (1024, 4, 2, 1),  # 64 KB over 2, four vectors a thread
        (512, 4, 4, 2),  # 32 KB over 4, four vectors a thread
        (512, 2, 8, 2),  # 16 KB over 8, two vectors a thread
        (128, 4, 16, 8),  # 8 KB over 16
    ],
}
CU_TYPE = {"float32": ("f32", "float"), "bfloat16": ("bf16", "mk_bf16")}
ANCHOR = "SOFTMAX_SLICE_RUNG(16, true, f32, float, 512, 8, 16, 2)\n"
"""The last of rung 16's instantiations in softmax.cu: the candidates go after it."""


def kernel_name(dtype_name: str, threads: int, k: int, cluster: int) -> str:
    """The probe's full-slice (no bounds checks) rung 16 kernel of one slice shape."""
    return f"softmax_kernel16_t{threads}_k{k}_c{cluster}_full_{CU_TYPE[dtype_name][0]}_probe"


def with_candidates(src: str) -> str:
    """softmax.cu with rung 16's full-slice kernel instantiated for every candidate slice, under
    a name of its own (``kernel_name``), so that none collides with a shipped kernel."""
    if src.count(ANCHOR) != 1:
        raise SystemExit(f"probe_softmax_slices: softmax.cu changed; update ANCHOR:\n{ANCHOR}")
    extra = []
    for (_, _, dtype_name), launches in CANDIDATES.items():
        ctype = CU_TYPE[dtype_name][1]
        for t, k, c, minb in launches:
            name = kernel_name(dtype_name, t, k, c)
            extra.append(f"SOFTMAX14_ONE({name}, {ctype}, {t}, {k}, {c}, {minb}, true, true)\n")
    return src.replace(ANCHOR, ANCHOR + "".join(extra))


def candidate_plan(m: int, n: int, dtype_name: str, t: int, k: int, c: int) -> ck.Plan:
    """Rung 16's launch of one candidate slice (the rows fill every slice: the _full_ kernel)."""
    nvec = n // ck.vector_width(getattr(torch, dtype_name))
    if nvec != t * k * c:
        raise SystemExit(f"probe_softmax_slices: {t} x {k} x {c} vectors is not a row of {n}")
    return ck.Plan(16, kernel_name(dtype_name, t, k, c), m * c, t, per_block=nvec // c, cluster=c)


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x = sm.make_inputs(m, n, dtype, "cuda", 1)
    y = torch.empty_like(x)
    rows = [0, m // 2, m - 1]
    want = sm.reference(x[rows])
    atol, rtol = sm.tolerances("cuda:16", n)[dtype]
    shipped = ck.plan(16, m, n, dtype, ck.device_facts(x.device.index or 0))
    print(f"  {m} x {n} {dtype_name}: rung 16 ships {shipped.kernel}")
    cands = {"cuda:16 (shipped)": launch_from(ck, path, lambda: ck.launch(16, x, y))}
    if dtype == torch.float32:
        cands["cuda:12"] = launch_from(ck, path, lambda: ck.launch(12, x, y))
    for t, k, c, _ in CANDIDATES[(m, n, dtype_name)]:
        p = candidate_plan(m, n, dtype_name, t, k, c)
        if p.kernel.removesuffix("_probe") == shipped.kernel:
            continue  # timed above
        run = launch_from(ck, path, lambda p=p: ck.launch(16, x, y, p))
        label = f"t{t} k{k} c{c}"
        try:
            got = run()[rows].double()
        except Exception as exc:  # a probe: say why a launch failed and go on
            print(f"  {label}: {type(exc).__name__}: {exc}")
            continue
        ck.CU_FILE, real = path, ck.CU_FILE
        ck._kernel.cache_clear()
        try:
            use = ck._kernel(p.kernel, x.device.index or 0).usage
        finally:
            ck.CU_FILE = real
            ck._kernel.cache_clear()
        close = torch.allclose(got, want, atol=atol, rtol=rtol)
        print(f"  {label}: {use}, {'within tolerance' if close else 'WRONG'}")
        if close:
            cands[label] = run
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=18)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in CANDIDATES))
    parser.add_argument("--dtype", nargs="*", choices=sorted(CU_TYPE), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_softmax_slices")
    with tempfile.TemporaryDirectory() as tmp:
        path = write_variants(
            {"slices": with_candidates(ck.CU_FILE.read_text())}, Path(tmp), "softmax"
        )
        for m, n, dtype_name in CANDIDATES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, path["slices"], args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
