"""Does rung 5 gain from plain stores, the way Triton and softmax's rung 16 write y?

    python labs/probe_rmsnorm_forward_stores.py              # the rows below, 5 rounds
    python labs/probe_rmsnorm_forward_stores.py --rounds 3 --n 32768 --dtype bfloat16

Rung 4 (rmsnorm4 in rmsnorm.cu) writes y with streaming stores (store_vec: st.global.cs,
evict-first); rung 5 wrote it the same way until this probe, and now writes it with __stwb.
Two earlier probes changed the stores alone and lost: rung 4 at its shipped blocks
(probe_rmsnorm_forward_rung4.py) and rung 6 (probe_rmsnorm_forward_staged.py, at
half the speed, with a store of the vector that may compile to four 32-bit stores). Softmax's
rung 16 went the other way: its plain stores (__stwb, one 16-byte store) are what put it ahead
of rung 14 and of QuACK on rows of 64K and 128K bf16 values (probe_softmax_stores.py). And one
kernel of ours already beats QuACK on a row of this size: triton:2 at 16384 x 32768 fp32 in
lab 02 (the same 4.3 GB as 32768 x 32768 bf16, where QuACK leads every rung), which writes y
with plain stores.

This probe compiles copies of rmsnorm.cu with rung 5 instantiated for every block of 256,
512 or 1024 threads that makes each row with a cluster of 1 to 16 (the slices of
probe_rmsnorm_forward_slices.py, four vectors a thread): one whose rung 5 streams y with
store_vec (".cs") and one whose rung 5 writes it with __stwb (st.global.wb, the default policy:
"wb"); and a third with a weak plain store ("wk": st.global.v4.b32, which compiles to
STG.E.128 where __stwb's st.global.wb compiles to STG.E.128.STRONG.SM on sm_90). One of the
copies is rung 5 as shipped, whichever store it ships; the others differ from it in that
store. How a value is stored does not change it, so every copy gives the shipped rung 5's bits
at the same slice; each candidate is checked against the shipped rung 5 on the whole output,
into a NaN-filled y. They race the shipped rungs 4 and 5, triton:2 as the lab launches it, and
QuACK (where it is installed) in interleaved rounds, all timed like the lab.

Byte model and prediction: the same bytes for every candidate (x read, y written, the weights
from L2). If the streaming hint is what keeps rung 5 about a per cent behind QuACK on these
rows, the wb copies gain about that much; if the earlier probes' verdict holds for rung 5 too,
every wb copy is slower than its .cs twin. On the H200 (2026-12-03, 5 rounds) the wb copy was
faster than the .cs one at rung 5's shipped slice of every row, by under a per cent to about
one, and no slower at any other slice; at four of the five rows it was level with QuACK or
ahead. Rung 5 has shipped the wb store since 3fc473ae817e, whose run of ``nox -s labs`` had it
ahead of QuACK at the three long bf16 rows. A second run of this probe, the same day with the
wb store shipped, had the wk copies level with wb at every slice (within a tenth of a per cent)
and the .cs copies the slowest at each shipped slice again. It prints, it writes nothing: the
course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

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

SHAPES = [  # (rows, row length, dtype): the lab's long rows where QuACK is ahead or close
    (32768, 32768, "bfloat16"),
    (32768, 65536, "bfloat16"),
    (32768, 131072, "bfloat16"),
    (16384, 32768, "float32"),
    (16384, 65536, "float32"),
]


def _load_slices():  # type: ignore[no-untyped-def]
    """labs/probe_rmsnorm_forward_slices.py as a module (labs/ is not a package), its SHAPES
    this probe's, so that its copy of rmsnorm.cu has every slice of these rows."""
    import importlib.util

    path = Path(__file__).resolve().parent / "probe_rmsnorm_forward_slices.py"
    spec = importlib.util.spec_from_file_location("probe_rmsnorm_forward_slices", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.SHAPES = SHAPES
    return module


SLICES = _load_slices()
CS_STORE = "        store_vec(yr + i, out);\n"
"""Rung 5's store of y as streaming (.cs), the store rung 4 writes with."""
WB_STORE = (
    "        __stwb(reinterpret_cast<uint4*>(yr + i), *reinterpret_cast<const uint4*>(&out));\n"
)
"""Rung 5's store of y as plain (st.global.wb, one 16-byte store)."""
WK_STORE = (
    '        asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};" ::"l"(yr + i),\n'
    '                     "r"(reinterpret_cast<const uint4&>(out).x),\n'
    '                     "r"(reinterpret_cast<const uint4&>(out).y),\n'
    '                     "r"(reinterpret_cast<const uint4&>(out).z),\n'
    '                     "r"(reinterpret_cast<const uint4&>(out).w) : "memory");\n'
)
"""Rung 5's store of y as a weak plain store (st.global.v4.b32: STG.E.128, where __stwb's
st.global.wb compiles to STG.E.128.STRONG.SM); the memory clobber keeps the weights' loads
after it, as a store's would be."""
STORES = {"cs": CS_STORE, "wb": WB_STORE, "wk": WK_STORE}
SASS_STORE = {"cs": "STG.E.EF.128", "wb": "STG.E.128.STRONG.SM", "wk": "STG.E.128"}
"""What each store compiles to on sm_90 (cuobjdump): one 16-byte store a vector, evict-first
(EF) or not, strong at SM scope or weak. The tests check each copy's rung 5 against it."""


def shipped_store(src: str) -> str:
    """Which store ("cs", "wb" or "wk") rung 5 ships in ``src`` (rmsnorm.cu, with or without the
    slices probe's entries); stops unless exactly one of the two is in rung 5's section, once."""
    body = src[src.index("--8<-- [start:kernel5]") : src.index("--8<-- [end:kernel5]")]
    found = [name for name, line in STORES.items() if body.count(line) == 1]
    if len(found) != 1 or sum(body.count(line) for line in STORES.values()) != 1:
        raise SystemExit(
            f"probe_rmsnorm_forward_stores: rmsnorm.cu changed; rung 5 should store y with one "
            f"of:\n{''.join(STORES.values())}"
        )
    return found[0]


def with_store(src: str, name: str) -> str:
    """``src`` whose rung 5 writes y with STORES[name] (``src`` itself if it ships that one)."""
    start = src.index("--8<-- [start:kernel5]")
    end = src.index("--8<-- [end:kernel5]")
    body = src[start:end].replace(STORES[shipped_store(src)], STORES[name])
    return src[:start] + body + src[end:]


SHIPPED = shipped_store(rn.CU_FILE.read_text())
"""The store rung 5 ships: its candidates in that copy include the shipped kernel."""


def probe(m: int, n: int, dtype_name: str, paths: dict[str, Path], rounds: int, gbps: float):  # type: ignore[no-untyped-def]
    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    eps = rn.EPS
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    nvec = n // (16 // dtype.itemsize)
    y = torch.empty_like(x)

    def shipped(rung: int):  # type: ignore[no-untyped-def]
        launch = rn._launch_cuda5 if rung == 5 else rn._launch_cuda4
        return lambda out=y: launch(x, w, out, eps, rstd)

    def slice_(path: Path, t: int, c: int):  # type: ignore[no-untyped-def]
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
    print(f"  {m} x {n} {dtype_name}: rung 5 ships t{p5.threads} c{p5.cluster}")
    cands = {"cuda:4 (shipped)": shipped(4), "cuda:5 (shipped)": shipped(5)}
    for t, c in SLICES.candidates(n, dtype_name):
        for name, path in paths.items():
            if name == SHIPPED and (t, c) == (p5.threads, p5.cluster):
                continue  # the shipped kernel, timed above
            run = slice_(path, t, c)
            nan = lambda run=run: run(torch.full_like(x, float("nan")))
            admit(cands, f"rung 5 t{t} c{c} {name}", run, ref, tol, check=nan)
    add_peer(cands, "triton:2", lambda: rn.make_runner("triton:2", [m, n], dtype, "fwd", seed=1))
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=22)


def variants(src: str) -> dict[str, str]:
    """The copies this probe compiles, one per store of STORES: every slice of its rows, one
    copy with rung 5 as shipped and one with each of its other stores."""
    slices = SLICES.with_candidates(src)
    return {name: with_store(slices, name) for name in STORES}


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in SHAPES))
    parser.add_argument("--dtype", nargs="*", choices=("bfloat16", "float32"), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_stores")
    with tempfile.TemporaryDirectory() as tmp:
        paths = write_variants(variants(rn.CU_FILE.read_text()), Path(tmp), "rmsnorm")
        for m, n, dtype_name in SHAPES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, paths, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
