"""Do cuda:3's backwards gain from plain stores of dx, as rung 5's forward did?

    python labs/probe_rmsnorm_backward_stores.py              # the rows below, 5 rounds
    python labs/probe_rmsnorm_backward_stores.py --rounds 3 --n 8192 --dtype float32

Two of cuda:3's backwards write dx in a line of their own: the fixed-length ones
(rmsnorm_bwd_tile and rmsnorm_bwd_tile_cluster: fp32 rows of 4096 to 131072 elements and 16-bit
rows of 32768 to 131072, plan_bwd_tile) in tile_give, and the warp-per-row ring on sm_90
(rmsnorm_bwd_ring: 16-bit rows of 520 to 2048 elements and fp32 rows of 260 to 1024,
plan_bwd_rows) in its loop over a lane's vectors. Rung 5's forward gained up to about a per
cent at its long rows when its stores of y went from streaming (.cs, evict-first: STG.E.EF.128)
to plain (__stwb: STG.E.128.STRONG.SM on sm_90), level with or ahead of QuACK, which writes with
plain stores too (probe_rmsnorm_forward_stores.py). This probe compiles a copy of rmsnorm.cu
whose two sites write dx with the other of the two stores (STORES; both sites ship the same
one), so that one copy is the shipped source and the other differs from it in those lines
only, and races the two at the shipped launch of each row (TILE_BWD, ROWS_BWD_RING), with
QuACK's backward where it is installed, in interleaved rounds, timed like the lab. How a value
is stored does not change it: the copy's dx and dw must equal the shipped kernel's bit for bit
(into a NaN-filled dx), or it is not timed.

Byte model and prediction: the same bytes either way (x and dy read, dx written, the weights
and the dw partial rows). dx is a third of the traffic, where y was half of the forward's, so
if the hint costs the backward what it cost the forward, the plain stores gain a little under
a per cent; if the backward's dx stores wait on nothing (its rows are read through cp.async into
shared memory, not the registers the forward streams from), they gain nothing. On the H200
(2026-12-03, 5 rounds, streaming stores shipped, the fixed-length rows only) the plain stores
were faster at eight of the nine rows, from a third of a per cent to about two (32768 fp32),
and level at 8192 fp32, where both ran at the copy ceiling. tile_give has written dx with the
plain stores since c208d0e9d67c. The ring's rows were added after that run: on the H200
(2026-12-03, 7 rounds, plain stores shipped at both sites) the two stores were level at all
three (1024 fp32: plain 53.6 us, streaming 53.8; 1024 and 2048 bf16: the same to 0.1 us), and
the ring has shipped the plain stores since 741444b02985 all the same, so that every sm_90
backward writes dx one way. It prints, it writes nothing: the course's numbers come from
``nox -s labs``.
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
    # ... and the ring (on sm_90)
    (16384, 1024, "float32"),
    (32768, 1024, "bfloat16"),
    (32768, 2048, "bfloat16"),
]
WB = "__stwb(reinterpret_cast<uint4*>({at}),\n{pad}*reinterpret_cast<const uint4*>(&{v}));\n"
STORES = {
    "tile": {  # tile_give's store of a vector o of dx
        "cs": "        store_vec(dxr + k * THREADS * VN, o);\n",
        "wb": "        " + WB.format(at="dxr + k * THREADS * VN", pad=" " * 15, v="o"),
    },
    "ring": {  # the ring's store of lane vector i of dx, as it is computed
        "cs": (
            "                store_vec(dxr + static_cast<long long>(i) * V,\n"
            "                          dx_and_dw<T, V>(xv, dv, wf, r, coef, acc[k]));\n"
        ),
        "wb": (
            "                const Vec<T> o = dx_and_dw<T, V>(xv, dv, wf, r, coef, acc[k]);\n"
            "                "
            + WB.format(at="dxr + static_cast<long long>(i) * V", pad=" " * 23, v="o")
        ),
    },
}
"""Each site's store of dx, as streaming (.cs, as rung 4's forward writes y) or plain
(st.global.wb, one 16-byte store)."""
SASS_STORE = {"cs": "STG.E.EF.128", "wb": "STG.E.128.STRONG.SM"}
"""What each store compiles to on sm_90 (cuobjdump); the tests check the copies against it."""
SITES = {
    "tile": ("backward_tile_parts", "void tile_give("),
    "ring": ("backward_ring", "void rmsnorm_bwd_ring("),
}
"""Where each site is: its snippet section of rmsnorm.cu and the function that stores."""


def _body(src: str, site: str) -> tuple[int, int]:
    """Where the storing function of ``site`` is in ``src``: from its signature to its end."""
    section, signature = SITES[site]
    parts = src.index(f"--8<-- [start:{section}]"), src.index(f"--8<-- [end:{section}]")
    start = src.index(signature, *parts)
    return start, src.index("\n}\n", start, parts[1])


def shipped_store(src: str) -> str:
    """Which store ("cs" or "wb") both sites ship in ``src``; stops unless each site has
    exactly one of its two lines, once, and both sites the same kind."""
    found = set()
    for site, lines in STORES.items():
        start, end = _body(src, site)
        body = src[start:end]
        kinds = [name for name, line in lines.items() if body.count(line) == 1]
        if len(kinds) != 1 or sum(body.count(line) for line in lines.values()) != 1:
            raise SystemExit(
                f"probe_rmsnorm_backward_stores: rmsnorm.cu changed; the {site} site should "
                f"store dx with one of:\n{''.join(lines.values())}"
            )
        found.add(kinds[0])
    if len(found) != 1:
        raise SystemExit(
            "probe_rmsnorm_backward_stores: rmsnorm.cu changed; the tile and ring sites store "
            f"dx differently ({', '.join(sorted(found))}): give both the same store"
        )
    return found.pop()


def with_store(src: str, name: str) -> str:
    """``src`` whose two sites write dx with STORES[site][name] (``src`` itself if it ships
    that)."""
    shipped = shipped_store(src)
    for site, lines in STORES.items():
        start, end = _body(src, site)
        src = src[:start] + src[start:end].replace(lines[shipped], lines[name]) + src[end:]
    return src


SHIPPED = shipped_store(rn.CU_FILE.read_text())
"""The store the two sites ship."""
OTHER = next(name for name in SASS_STORE if name != SHIPPED)
"""The store of the copy this probe compiles."""


def plan_for(n: int, dtype: torch.dtype, cc: tuple[int, int]) -> object | None:
    """The plan of the backward with a site at rows of ``n``: fixed-length or ring."""
    return rn.plan_bwd_tile(n, dtype, dtype, cc) or rn.plan_bwd_rows(n, dtype, cc)


def probe(m: int, n: int, dtype_name: str, path: Path, rounds: int, gbps: float) -> None:
    dtype = getattr(torch, dtype_name)
    x, w, dy = rn.make_inputs(m, n, dtype, "cuda", 1, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + rn.EPS)
    plan = plan_for(n, dtype, torch.cuda.get_device_capability())
    if plan is None or (isinstance(plan, rn.RowsBwdPlan) and not plan.stages):
        print(f"  {m} x {n} {dtype_name}: neither site's backward runs here on this GPU, skipped")
        return
    launch = rn._backward_tile if isinstance(plan, rn.TileBwdPlan) else rn._backward_rows
    dx = torch.empty_like(x)

    def shipped(out: torch.Tensor = dx):  # type: ignore[no-untyped-def]
        return launch(dy, x, w, rstd, plan, out, True)

    def copy(out: torch.Tensor = dx):  # type: ignore[no-untyped-def]
        real, rn.CU_FILE = rn.CU_FILE, path
        try:
            return launch(dy, x, w, rstd, plan, out, True)
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
