"""Did rung 16 gain on rung 14 from its trims or from its plain stores?

    python labs/probe_softmax_stores.py              # the four shapes below, 5 rounds
    python labs/probe_softmax_stores.py --rounds 3 --n 65536

Rung 16 (softmax.cu) is rung 14 with fewer instructions per thread and one change that is not
an instruction: it writes y with plain 16-byte stores (__stwb) where rung 14 writes with .cs
(evict-first) stores. Lab 02 times the two side by side, so their difference mixes both
changes. This probe builds a copy of softmax.cu whose rung 14 stores plainly too ("wb"), checks
that it gives the shipped kernel's bits (a store hint does not change a value), and times rung 14
as shipped, rung 14 wb and rung 16, with QuACK where it is installed, in interleaved rounds:

    rung 14 wb against rung 14    what the plain stores bought
    rung 16 against rung 14 wb    what the trims bought

It prints, it writes nothing: the course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import torch

import minikernel.kernels.softmax as sm
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.probe import add_peer, gpu_ceiling, launch_from, race, report

SHAPES = [  # (rows, row length, dtype): where rung 16 and rung 14 both run their own kernels
    (32768, 65536, "bfloat16"),
    (32768, 131072, "bfloat16"),
    (8192, 131072, "float32"),
    (32768, 16384, "bfloat16"),  # the one row where lab 02 timed rung 16 behind rung 14
]
CS_STORE = "                store_vec(yb + static_cast<long long>(i) * VN, o);\n"
"""Rung 14's store in softmax14_slice (the branch rung 16 does not take)."""
WB_STORE = (
    "                __stwb(reinterpret_cast<uint4*>(yb + static_cast<long long>(i) * VN),\n"
    "                       *reinterpret_cast<const uint4*>(&o));\n"
)


def variants(src: str) -> dict[str, str]:
    """softmax.cu, and a copy whose rung 14 writes with rung 16's plain stores. Fails if
    softmax.cu no longer has rung 14's store line exactly once."""
    if src.count(CS_STORE) != 1:
        raise SystemExit("probe_softmax_stores: softmax.cu changed; update CS_STORE")
    return {"shipped": src, "wb": src.replace(CS_STORE, WB_STORE)}


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
    print(f"  {m} x {n} {dtype_name} cuda:14 wb: {'same bits' if same else 'DIFFERS'}")
    cands = {
        "cuda:14": runner(14, files["shipped"], x, y),
        "cuda:16": runner(16, files["shipped"], x, y),
    }
    if same:
        cands["cuda:14 wb"] = runner(14, files["wb"], x, y)
    add_peer(cands, "quack", lambda: sm.make_runner("quack", [m, n], dtype, inputs=x))
    ideal = sm.bytes_moved(m, n, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=16)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per shape")
    parser.add_argument("--n", type=int, nargs="*", choices=sorted({s[1] for s in SHAPES}))
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_softmax_stores")
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in variants(ck.CU_FILE.read_text()).items():
            files[name] = Path(tmp) / f"softmax_{name}.cu"  # headers come from CUDA_DIR
            files[name].write_text(text)
        for m, n, dtype_name in SHAPES:
            if not args.n or n in args.n:
                probe(m, n, dtype_name, files, args.rounds, gbps)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
