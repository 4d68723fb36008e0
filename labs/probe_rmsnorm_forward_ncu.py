"""How rung 4, rung 5 and QuACK spend one RMSNorm forward call on the row where QuACK leads most.

    python labs/probe_rmsnorm_forward_ncu.py                   # 16384 x 131072 fp32
    python labs/probe_rmsnorm_forward_ncu.py --shape 32768 32768 --dtype bfloat16

Lab 02 of the C3a track profiles the forward at 32768 x 131072 bf16 only. Its steadiest gap to
QuACK is at 16384 x 131072 fp32, where rung 4 (1024-thread blocks over a cluster of 8) is the
fastest of ours and rung 5, on the same blocks, is slower than both (the slice probe,
probe_rmsnorm_forward_slices.py, ruled the block shape out). This probe runs Nsight Compute
(``--clock-control none``, the lab's metric set, minikernel.bench.ncu) on one call of each at
that shape and prints the three excerpts against the byte model. On the H200, QuACK moved the
same bytes with about a third of rung 4's warp instructions, 8 warps resident per SM and over
160 registers a thread (the fused-rmsnorm page, rung 5). It prints, it writes nothing: the
course's numbers come from ``nox -s labs``.
"""

from __future__ import annotations

import argparse

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.ncu import NcuUnavailable, format_excerpt, profile

IMPLS = ("cuda:4", "cuda:5", "quack")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=int, nargs=2, default=[16384, 131072])
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    parser.add_argument("--impls", nargs="*", default=list(IMPLS))
    args = parser.parse_args()
    m, n = args.shape
    dtype = getattr(torch, args.dtype)
    model = rn.fwd_bytes(m, n, dtype, dtype)
    for impl in args.impls:
        print(f"== {impl} forward, {m} x {n} {args.dtype}", flush=True)
        try:
            rec = profile(
                "rmsnorm", impl, [m, n], args.dtype, model_bytes=model, extra_args=["fwd"]
            )
        except NcuUnavailable as exc:
            raise SystemExit(f"probe_rmsnorm_forward_ncu: {exc}") from None
        except Exception as exc:  # a probe: say why one profile failed and go on
            print(f"  {type(exc).__name__}: {exc}")
            continue
        print(rec.get("excerpt") or format_excerpt(rec["metrics"], model), flush=True)


if __name__ == "__main__":
    main()
