"""Does cuda:3's fixed-length backward gain from plain stores of dx, as rung 5's forward did?

    python labs/probe_rmsnorm_backward_stores.py              # the rows below, 5 rounds
    python labs/probe_rmsnorm_backward_stores.py --rounds 3 --n 8192 --dtype float32

The fixed-length backwards (rmsnorm_bwd_tile and rmsnorm_bwd_tile_cluster in rmsnorm.cu:
cuda:3's backward for fp32 rows of 4096 to 131072 elements and 16-bit rows of 32768 to 131072,
plan_bwd_tile) write dx in tile_give. Rung 5's forward gained up to about a per cent at its long
rows when its stores of y went from streaming (.cs, evict-first: STG.E.EF.128) to plain
(__stwb: STG.E.128.STRONG.SM on sm_90), level with or ahead of QuACK, which writes with plain
stores too (probe_rmsnorm_forward_stores.py). This probe compiles a copy of rmsnorm.cu whose
tile_give writes dx with the other of the two stores (STORES), so that one copy is the shipped
kernel and the other differs from it in that line only, and races the two at TILE_BWD's launch
of each row, with QuACK's backward where it is installed, in interleaved rounds, timed like the
lab. How a value is stored does not change it: the copy's dx and dw must equal the shipped
kernel's bit for bit (into a NaN-filled dx), or it is not timed.

Byte model and prediction: the same bytes either way (x and dy read, dx written, the weights
and the dw partial rows). dx is a third of the traffic, where y was half of the forward's, so
if the hint costs the backward what it cost the forward, the plain stores gain a little under
a per cent; if the backward's dx stores wait on nothing (its rows are read through cp.async into
shared memory, not the registers the forward streams from), they gain nothing. On the H200
(2026-12-03, 5 rounds, streaming stores shipped) the plain stores were faster at eight of the
nine rows, from a third of a per cent to about two (32768 fp32), and level at 8192 fp32, where
both ran at the copy ceiling. tile_give has written dx with the plain stores since c208d0e9d67c,
so the probe now races them against the streaming ones they replaced. It prints, it writes
nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.probe import add_peer, gpu_ceiling, probe_parser, race, report, write_variants

SHAPES = [  # (rows, row length, dtype): every row the lab gives the fixed-length backward
    (16384, 4096, "float32"),
    (16384, 8192, "float32"),
    (16384, 16384, "float32"),
    (16384, 32768, "float32"),
    (16384, 65536, "float32"),
    (16384, 131072, "float32"),
    (32768, 32768, "bfloat16"),
    (32768, 65536, "bfloat16"),
    (32768, 131072, "bfloat16"),
]
CS_STORE = "        store_vec(dxr + k * THREADS * VN, o);\n"
"""tile_give's store of a vector of dx as streaming (.cs), as rung 4's forward writes y."""
WB_STORE = (
    "        __stwb(reinterpret_cast<uint4*>(dxr + k * THREADS * VN),\n"
    "               *reinterpret_cast<const uint4*>(&o));\n"
)
"""tile_give's store of a vector of dx as plain (st.global.wb, one 16-byte store)."""
STORES = {"cs": CS_STORE, "wb": WB_STORE}
SASS_STORE = {"cs": "STG.E.EF.128", "wb": "STG.E.128.STRONG.SM"}
"""What each store compiles to on sm_90 (cuobjdump); the tests check the copies against it."""
START, END = "--8<-- [start:backward_tile_parts]", "--8<-- [end:backward_tile_parts]"


def _give(src: str) -> tuple[int, int]:
    """Where tile_give's body is in ``src``: from its signature to the next function."""
    parts = src.index(START), src.index(END)
    start = src.index("void tile_give(", *parts)
    return start, src.index("\n}\n", start, parts[1])


def shipped_store(src: str) -> str:
    """Which store ("cs" or "wb") tile_give ships in ``src``; stops unless exactly one of them
    is in its body, once."""
    start, end = _give(src)
    body = src[start:end]
    found = [name for name, line in STORES.items() if body.count(line) == 1]
    if len(found) != 1 or sum(body.count(line) for line in STORES.values()) != 1:
        raise SystemExit(
            "probe_rmsnorm_backward_stores: rmsnorm.cu changed; tile_give should store dx with "
            f"one of:\n{''.join(STORES.values())}"
        )
    return found[0]


def with_store(src: str, name: str) -> str:
    """``src`` whose tile_give writes dx with STORES[name] (``src`` itself if it ships that)."""
    start, end = _give(src)
    body = src[start:end].replace(STORES[shipped_store(src)], STORES[name])
    return src[:start] + body + src[end:]


SHIPPED = shipped_store(rn.CU_FILE.read_text())
"""The store tile_give ships."""
OTHER = next(name for name in STORES if name != SHIPPED)
"""The store of the copy this probe compiles."""


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w, dy = rn.make_inputs(m, n, dtype, "cuda", 1, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + rn.EPS)
    plan = rn.plan_bwd_tile(n, dtype, w.dtype, torch.cuda.get_device_capability())
    if plan is None:
        print(f"  {m} x {n} {dtype_name}: no fixed-length backward on this GPU, skipped")
        return
    dx = torch.empty_like(x)

    def shipped(out: torch.Tensor = dx):  # type: ignore[no-untyped-def]
        return rn._backward_tile(dy, x, w, rstd, plan, out, True)

    def copy(out: torch.Tensor = dx):  # type: ignore[no-untyped-def]
        real, rn.CU_FILE = rn.CU_FILE, path
        try:
            return rn._backward_tile(dy, x, w, rstd, plan, out, True)
        finally:
            rn.CU_FILE = real

    ref_dx, ref_dw = (t.clone() for t in shipped(torch.empty_like(x)))
    got_dx, got_dw = copy(torch.full_like(x, float("nan")))
    same = torch.equal(got_dx, ref_dx) and torch.equal(got_dw, ref_dw)
    print(
        f"  {m} x {n} {dtype_name}: {plan.kernel}, dx and dw of {OTHER} "
        f"{'the same bits: ok' if same else 'DIFFERENT: WRONG, not timed'}"
    )
    cands = {f"cuda:3 {SHIPPED} (shipped)": shipped}
    if same:
        cands[f"cuda:3 {OTHER}"] = copy
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "bwd", seed=1))
    ideal = rn.bwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name} backward", ideal, race(cands, rounds), width=22)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in SHAPES))
    parser.add_argument("--dtype", nargs="*", choices=("bfloat16", "float32"), help="x's dtypes")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_backward_stores")
    with tempfile.TemporaryDirectory() as tmp:
        text = with_store(rn.CU_FILE.read_text(), OTHER)
        path = write_variants({OTHER: text}, Path(tmp), "rmsnorm")[OTHER]
        for m, n, dtype_name in SHAPES:
            if (not args.n or n in args.n) and (not args.dtype or dtype_name in args.dtype):
                probe(m, n, dtype_name, path, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
