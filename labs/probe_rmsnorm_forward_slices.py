"""Which cluster slice is fastest for RMSNorm's rung 5 on the long rows, where QuACK leads?

    python labs/probe_rmsnorm_forward_slices.py              # the five rows below, 5 rounds
    python labs/probe_rmsnorm_forward_slices.py --rounds 3 --n 131072 --dtype float32

Rung 5 (rmsnorm5 in rmsnorm.cu) takes rung 4's blocks wherever every thread holds exactly
KERNEL4_VECS = 4 vectors: plan4's first block of KERNEL4_SHAPES that holds the row, 512 threads
over clusters of 2 to 8, then 1024 threads over 8 or 16. Softmax's rung 16 found its fastest
slice on each long row by timing every shape that makes the row (labs/probe_softmax_slices.py),
and on rows of 64K columns the fastest were not the ones its plan had picked. RMSNorm's forward
is one read and one write like softmax's, and lab 02 of the C3a track has QuACK a little ahead
of rung 5 at 32768 x 32768 and 65536 bf16 and at 16384 x 65536 fp32, and ahead of rung 4 at
16384 x 131072 fp32, the one row where rung 5 runs 1024-thread blocks and loses to rung 4.

This probe compiles a copy of rmsnorm.cu with rung 5's entry instantiated for every block of
256, 512 or 1024 threads that makes each row with a cluster of 2 to 16 (SHAPES x CANDIDATES,
four vectors a thread, as rung 5 needs), checks each against the shipped rung 5 on the whole
output (the sum's order changes with the cluster, so within a tolerance), and times them with
the shipped rungs 4 and 5 and QuACK (where it is installed) in interleaved rounds, all timed
like the lab (events, a clean L2, a GPU-side lead).

On the H200 the shipped block was rung 5's fastest at every row, QuACK a little ahead of all of
ours (the fused-rmsnorm page, rung 5, says more).

A "cluster" of one is a candidate too (rung 5's static_assert lifted in the copy): a block of
1024 threads x 4 vectors holds a 64 KB row (32768 bf16 values) alone, in registers, two blocks
an SM, with no other SM to wait for, where the shipped plan splits it over two blocks of 512.
Rung 3 holds that row in one block's shared memory; no rung had held it in one block's
registers at 32 registers a thread. Byte model and prediction: the same bytes; if waiting on
the cluster's other block is what keeps 32768 bf16 behind QuACK (a side probe once timed rung 3
about 7 % faster with its exchange removed), this block should be faster than the shipped one.
On the H200 (2026-12-02, 7 rounds) it was level with the shipped rungs 4 and 5 and QuACK still a
little ahead of all three: not the cluster. It prints, it writes nothing: the course's
numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import re
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

SHAPES = [  # (rows, row length, dtype): the lab's rows where rung 4 or 5 is ours at its fastest
    (32768, 32768, "bfloat16"),
    (32768, 65536, "bfloat16"),
    (32768, 131072, "bfloat16"),
    (16384, 65536, "float32"),
    (16384, 131072, "float32"),
]
THREADS = (256, 512, 1024)
CLUSTERS = (1, 2, 4, 8, 16)  # 16 is a "non-portable" cluster size, allowed on sm_90
NO_SINGLE = re.compile(
    r'    static_assert\(CLUSTER > 1, "a row that fits one block runs kernel 3"\);\n'
)
"""Rung 5's guard against a cluster of one (kept in rung 4 too): lifted in rung 5's copy."""
ENTRIES = re.compile(
    r"(?:    RMSNORM5_ENTRY\(SUFFIX, T, W, WSUFFIX, \d+, \d+\) +\\\n)+"
    r"    RMSNORM5_ENTRY\(SUFFIX, T, W, WSUFFIX, \d+, \d+\)\n"
)
"""The entry list of RMSNORM5_WEIGHT: lines of RMSNORM5_ENTRY(..., threads, cluster), continued."""


def candidates(n: int, dtype_name: str) -> list[tuple[int, int]]:
    """(threads, cluster) of every rung-5 block that makes a row of ``n`` elements with exactly
    KERNEL4_VECS vectors a thread."""
    nvec = n // (16 // getattr(torch, dtype_name).itemsize)
    return [(t, c) for t in THREADS for c in CLUSTERS if t * rn.KERNEL4_VECS * c == nvec]


def all_shapes() -> list[tuple[int, int]]:
    """Every (threads, cluster) a shape of SHAPES needs, in order, once."""
    out: list[tuple[int, int]] = []
    for _, n, dtype_name in SHAPES:
        out += [tc for tc in candidates(n, dtype_name) if tc not in out]
    return out


def with_candidates(src: str) -> str:
    """rmsnorm.cu with RMSNORM5_WEIGHT's entries replaced by every block of ``all_shapes``: the
    shipped ones among them keep their names, and the copy is a file of its own, so no name
    collides with a shipped kernel."""
    if len(ENTRIES.findall(src)) != 1:
        raise SystemExit(f"probe_rmsnorm_forward_slices: rmsnorm.cu changed; update:\n{ENTRIES}")
    if len(NO_SINGLE.findall(src)) != 2:
        raise SystemExit(f"probe_rmsnorm_forward_slices: rmsnorm.cu changed; update:\n{NO_SINGLE}")
    entries = " \\\n".join(
        f"    RMSNORM5_ENTRY(SUFFIX, T, W, WSUFFIX, {t}, {c})" for t, c in all_shapes()
    )
    start = src.index("--8<-- [start:kernel5]")  # rung 5's guard, not rung 4's
    src = src[:start] + NO_SINGLE.sub("", src[start:], count=1)
    return ENTRIES.sub(lambda _: entries + "\n", src)


def kernel_name(t: int, c: int, dtype_name: str) -> str:
    """The name _launch_slices gives rung 5's block of ``t`` threads over ``c`` (same-dtype
    weights, as the lab's)."""
    return f"rmsnorm_kernel5_t{t}_c{c}_{rn._SUFFIX[getattr(torch, dtype_name)]}"


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    eps = rn.EPS
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    nvec = n // (16 // dtype.itemsize)
    y = torch.empty_like(x)

    def shipped(rung: int):  # type: ignore[no-untyped-def]
        launch = rn._launch_cuda5 if rung == 5 else rn._launch_cuda4
        return lambda out=y: launch(x, w, out, eps, rstd)

    def slice_(t: int, c: int):  # type: ignore[no-untyped-def]
        plan = rn.SlicePlan(c, nvec // c, t)

        def run(out: torch.Tensor = y) -> torch.Tensor:
            real, rn.CU_FILE = rn.CU_FILE, path
            try:
                return rn._launch_slices(5, plan, x, w, out, eps, rstd, 0)
            finally:
                rn.CU_FILE = real

        return run

    ref = shipped(5)(torch.empty_like(x)).clone()
    scale = float(ref.float().abs().max())
    tol = (1e-5 if dtype == torch.float32 else 2**-7) * scale  # the sum's order may differ
    p5 = rn.plan5(m, n, dtype, (9, 0), True)
    p4 = rn.plan4(m, n, dtype, (9, 0))
    print(
        f"  {m} x {n} {dtype_name}: rung 4 ships t{p4.threads} c{p4.cluster}, rung 5 "
        f"{f't{p5.threads} c{p5.cluster}' if p5 else 'hands the row to rung 4'}"
    )
    cands = {"cuda:4 (shipped)": shipped(4), "cuda:5 (shipped)": shipped(5)}
    for t, c in candidates(n, dtype_name):
        if p5 is not None and (t, c) == (p5.threads, p5.cluster):
            continue  # timed above
        run = slice_(t, c)
        nan = lambda run=run: run(torch.full_like(x, float("nan")))
        admit(cands, f"rung 5 t{t} c{c}", run, ref, tol, check=nan)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=20)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in SHAPES))
    parser.add_argument("--dtype", nargs="*", choices=("bfloat16", "float32"), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_slices")
    with tempfile.TemporaryDirectory() as tmp:
        src = with_candidates(rn.CU_FILE.read_text())
        path = write_variants({"slices": src}, Path(tmp), "rmsnorm")["slices"]
        for m, n, dtype_name in SHAPES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, path, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
