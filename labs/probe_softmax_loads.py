"""Do our softmax rungs lose their last per cent to QuACK in how they load x?

    python labs/probe_softmax_loads.py              # the four shapes below, 5 rounds
    python labs/probe_softmax_loads.py --rounds 3 --n 600

Where lab 02's last run left QuACK ahead of every rung of ours, by a per cent or so, ours loads
x with plain 16-byte loads that allocate lines in L1 (load_vec_plain): rung 15 at 32768 x 600
bf16, rung 14 at 32768 x 65536 and 131072 bf16 (and at 8192 x 65536 fp32, where rung 12 is the
fastest of ours). QuACK copies x into shared memory with cp.async, which does not pass through
L1. This probe builds variants of softmax.cu whose kernels 14 and 15 load x with a cache hint
instead (minikernel.bench.probe.LOAD_HINTS):

    cg   cached in L2 only, not L1
    na   read-only, no L1 line, 256-byte L2 fetches
    lu   last use: the line is not wanted again
    ef   an L2 policy of evict-first (each x is read once)

checks that each gives the shipped kernel's bits (the arithmetic is the same), and times them
with the shipped rungs and QuACK (where it is installed) in interleaved rounds. It prints, it
writes nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import minikernel.kernels.softmax as sm
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.probe import (
    LOAD_HINTS,
    add_peer,
    gpu_ceiling,
    launch_from,
    probe_parser,
    race,
    report,
    with_load_hint,
    write_variants,
)

SHAPES = [  # (rows, row length, dtype, the rungs of ours to time)
    (32768, 600, "bfloat16", (15,)),
    (32768, 65536, "bfloat16", (14,)),
    (32768, 131072, "bfloat16", (14,)),
    # fp32 rows of 256 KB: rung 14 runs rung 13's kernel here (staged through cp.async), so its
    # hinted copies are the same kernel: a control for the probe's own spread.
    (8192, 65536, "float32", (12, 14)),
]
LOADS = [  # kernel 14's slice loads and kernel 15's row loads
    "        if (FULL || i < s.count) v[k] = "
    "load_vec_plain(xb + static_cast<long long>(i) * VN);\n",
    "            const Vec<T> v = load_vec_plain(x + (first + i) * VN);\n",
]
HINTED = (14, 15)  # the rungs whose loads the variants change


def variants(src: str) -> dict[str, str]:
    """softmax.cu and one copy per load hint. Fails if softmax.cu no longer has the lines the
    edits replace (each exactly once)."""
    try:
        return {"shipped": src, **{h: with_load_hint(src, h, LOADS) for h in LOAD_HINTS}}
    except ValueError as exc:
        raise SystemExit(f"probe_softmax_loads: softmax.cu changed; update: {exc}") from exc


def runner(rung: int, path: Path, x: torch.Tensor, y: torch.Tensor):  # type: ignore[no-untyped-def]
    """Rung ``rung`` from the kernel file ``path``."""
    return launch_from(ck, path, lambda: ck.launch(rung, x, y))


def probe(
    m: int,
    n: int,
    dtype_name: str,
    rungs: tuple[int, ...],
    files: dict[str, Path],
    rounds: int,
    gbps: float,
) -> None:
    dtype = getattr(torch, dtype_name)
    x = sm.make_inputs(m, n, dtype, "cuda", 1)
    y = torch.empty_like(x)
    cands = {}
    for rung in rungs:
        want = runner(rung, files["shipped"], x, torch.empty_like(x))().clone()
        cands[f"cuda:{rung}"] = runner(rung, files["shipped"], x, y)
        if rung not in HINTED:
            continue
        for hint in LOAD_HINTS:
            got = runner(rung, files[hint], x, torch.empty_like(x))()
            same = torch.equal(got, want)
            print(f"  {n} {dtype_name} cuda:{rung} {hint}: {'same bits' if same else 'DIFFERS'}")
            if same:
                cands[f"cuda:{rung} {hint}"] = runner(rung, files[hint], x, y)
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=16)


def main() -> None:
    args = probe_parser(__doc__, (s[1] for s in SHAPES)).parse_args()
    gbps = gpu_ceiling("probe_softmax_loads")
    with tempfile.TemporaryDirectory() as tmp:
        files = write_variants(variants(ck.CU_FILE.read_text()), Path(tmp), "softmax")
        for m, n, dtype_name, rungs in SHAPES:
            if not args.n or n in args.n:
                probe(m, n, dtype_name, rungs, files, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
