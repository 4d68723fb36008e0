"""Did rung 16 gain on rung 14 from its trims or from its plain stores?

    python labs/probe_softmax_stores.py              # the four shapes below, 5 rounds
    python labs/probe_softmax_stores.py --rounds 3 --n 65536

Rung 16 (softmax.cu) is rung 14 with fewer instructions per thread and one change that is not
an instruction: it writes y with plain 16-byte stores (__stwb) where rung 14 writes with .cs
(evict-first) stores. Lab 02 times the two side by side, so their difference mixes both
changes. This probe builds a copy of softmax.cu whose rung 14 stores plainly too ("wb"), checks
that it gives the shipped kernel's bits (a store hint does not change a value), and a second
copy whose rung 14 also reduces its (max, sum) pairs max first, as rung 16 does ("wb_mf",
checked against the fp64 reference on three rows: the order of the sums changes its rounding).
It times rung 14 as shipped, both copies and rung 16, with QuACK where it is installed, in
interleaved rounds:

    rung 14 wb against rung 14        what the plain stores bought
    rung 14 wb_mf against rung 14 wb  what the max-first exchange bought
    rung 16 against rung 14 wb_mf     what the folded exponent and rcp.approx bought

It prints, it writes nothing: the course's numbers come from ``nox -s labs``.
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

SHAPES = [  # (rows, row length, dtype): where rung 16 and rung 14 both run their own kernels
    (32768, 65536, "bfloat16"),
    (32768, 131072, "bfloat16"),
    (8192, 131072, "float32"),
    (32768, 16384, "bfloat16"),  # the one row where lab 02 timed rung 16 behind rung 14
    (32768, 262144, "bfloat16"),  # clusters of 16 (128 exchange slots), rung 16's widest lead
    (8192, 262144, "float32"),
]
CS_STORE = "                store_vec(yb + static_cast<long long>(i) * VN, o);\n"
"""Rung 14's store in softmax14_slice (the branch rung 16 does not take)."""
EXCHANGE = (
    "    const MaxSum t = TRIM ? cluster_ms_maxfirst(xch, {m, sum}) : cluster_ms(xch, {m, sum});\n"
)
"""softmax14_slice's exchange: rung 16 (TRIM) reduces max first, rung 14 with ms_merge."""
WB_STORE = (
    "                __stwb(reinterpret_cast<uint4*>(yb + static_cast<long long>(i) * VN),\n"
    "                       *reinterpret_cast<const uint4*>(&o));\n"
)


def variants(src: str) -> dict[str, str]:
    """softmax.cu; a copy whose rung 14 writes with rung 16's plain stores; and one that also
    takes rung 16's max-first exchange. Fails if softmax.cu no longer has the lines the edits
    replace exactly once."""
    for name, line in (("CS_STORE", CS_STORE), ("EXCHANGE", EXCHANGE)):
        if src.count(line) != 1:
            raise SystemExit(f"probe_softmax_stores: softmax.cu changed; update {name}")
    wb = src.replace(CS_STORE, WB_STORE)
    maxfirst = EXCHANGE.replace("TRIM ? cluster_ms_maxfirst", "cluster_ms_maxfirst").replace(
        " : cluster_ms(xch, {m, sum})", ""
    )
    return {"shipped": src, "wb": wb, "wb_mf": wb.replace(EXCHANGE, maxfirst)}


def runner(rung: int, path: Path, x: torch.Tensor, y: torch.Tensor):  # type: ignore[no-untyped-def]
    """Rung ``rung`` from the kernel file ``path``."""
    return launch_from(ck, path, lambda: ck.launch(rung, x, y))


def probe(
    m: int, n: int, dtype_name: str, files: dict[str, Path], rounds: int, gbps: float
) -> None:
    dtype = getattr(torch, dtype_name)
    x = sm.make_inputs(m, n, dtype, "cuda", 1)
    y = torch.empty_like(x)
    want = runner(14, files["shipped"], x, torch.empty_like(x))().clone()
    got = runner(14, files["wb"], x, torch.empty_like(x))()
    same = torch.equal(got, want)
    del want, got
    print(f"  {m} x {n} {dtype_name} cuda:14 wb: {'same bits' if same else 'DIFFERS'}")
    rows = [0, m // 2, m - 1]
    got = runner(14, files["wb_mf"], x, torch.empty_like(x))()[rows].double()
    atol, rtol = sm.tolerances("cuda:14", n)[dtype]
    close = torch.allclose(got, sm.reference(x[rows]), atol=atol, rtol=rtol)
    del got
    print(f"  {m} x {n} {dtype_name} cuda:14 wb_mf: {'within tolerance' if close else 'WRONG'}")
    cands = {
        "cuda:14": runner(14, files["shipped"], x, y),
        "cuda:16": runner(16, files["shipped"], x, y),
    }
    if same:
        cands["cuda:14 wb"] = runner(14, files["wb"], x, y)
    if close:
        cands["cuda:14 wb_mf"] = runner(14, files["wb_mf"], x, y)
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=16)


def main() -> None:
    args = probe_parser(__doc__, (s[1] for s in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_softmax_stores")
    with tempfile.TemporaryDirectory() as tmp:
        files = write_variants(variants(ck.CU_FILE.read_text()), Path(tmp), "softmax")
        for m, n, dtype_name in SHAPES:
            if not args.n or n in args.n:
                probe(m, n, dtype_name, files, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
