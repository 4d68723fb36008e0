"""Where the long-row CUDA backward of RMSNorm spends its time: time it with parts taken out.

    python labs/probe_rmsnorm_backward.py             # the four long shapes below, 3 rounds
    python labs/probe_rmsnorm_backward.py --rounds 5

The cluster backward (rmsnorm_bwd_kernel_*, `cuda:3`'s backward for rows past 16384 elements)
does, for every row: copy its slice of x and dy in, sum g * x, exchange that sum with the other
blocks of its cluster, write dx. This probe builds three variants of rmsnorm.cu by editing its
text, each giving a WRONG result and timed only:

    noxch          each block uses its own partial sum: no exchange with the cluster
    nostore        dx is computed but not written
    noxch_nostore  both

and times them against the real kernel, in interleaved rounds, on the lab's long shapes. A part
that costs nothing would leave the time unchanged. The fused-rmsnorm page (section 8) says
what an H200 showed. It prints, it writes nothing: the course's numbers come from
``nox -s labs``.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.probe import gpu_ceiling, probe_parser, race

SHAPES = [
    (16384, 131072, torch.float32),
    (16384, 65536, torch.float32),
    (32768, 131072, torch.bfloat16),
    (32768, 32768, torch.bfloat16),
]
EXCHANGE = (
    "row_exchange(xch, visit, v, total, [](float (&a)[1], const float (&b)[1]) { a[0] += b[0]; });"
)
NO_EXCHANGE = "total[0] = v[0] * CLUSTER;  // probe: this block's sum only (wrong)"
# The cluster backward's dx store (the warp-per-row kernel has the same two lines: the comment
# after them tells the two apart).
STORE = """                store_vec(dxr + static_cast<long long>(i) * V,
                          dx_and_dw<T, V>(xv[k], dv[k], wf, r, coef, acc[k]));
            }
        }
    }
    if (dw_part) {  // row g of dw_part"""
NO_STORE = """                const Vec<T> out = dx_and_dw<T, V>(xv[k], dv[k], wf, r, coef, acc[k]);
                if (coef == 1234.5f) store_vec(dxr + static_cast<long long>(i) * V, out);
            }
        }
    }
    if (dw_part) {  // row g of dw_part"""


def variants(src: str) -> dict[str, str]:
    """The kernel source, and the three edited copies. Fails if rmsnorm.cu no longer has the
    lines the edits replace (exactly once in the cluster backward)."""
    for text in (EXCHANGE, STORE):
        if src.count(text) != 1:
            raise SystemExit(f"probe_rmsnorm_backward: rmsnorm.cu changed; update:\n{text}")
    noxch = src.replace(EXCHANGE, NO_EXCHANGE)
    return {
        "base": src,
        "noxch": noxch,
        "nostore": src.replace(STORE, NO_STORE),
        "noxch_nostore": noxch.replace(STORE, NO_STORE),
    }


def probe_shape(
    m: int, n: int, dtype: torch.dtype, files: dict[str, Path], gbps: float, rounds: int
) -> None:
    x, w, dy = rn.make_inputs(m, n, dtype, "cuda", 1, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + rn.EPS)
    dx = torch.empty_like(x)

    def run_with(path: Path):  # type: ignore[no-untyped-def]
        def run() -> None:
            rn.CU_FILE = path  # _backward_cuda loads its kernel from CU_FILE
            rn._backward_cuda(dy, x, w, rstd, dx=dx)

        return run

    best = race({name: run_with(path) for name, path in files.items()}, rounds)
    ideal = rn.bwd_bytes(m, n, dtype, w.dtype) / (gbps * 1e3)
    print(
        f"\n{m} x {n} {str(dtype).removeprefix('torch.')}: the model at the ceiling {ideal:.0f} us"
    )
    for name, us in best.items():
        print(
            f"  {name:14s} {us:9.1f} us  {us / best['base']:.3f} of base  "
            f"{ideal / us:.3f} of the ceiling (by the full model)"
        )


def main() -> None:
    args = probe_parser(__doc__, rounds=3).parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_backward")
    real = rn.CU_FILE
    with tempfile.TemporaryDirectory() as tmp:
        files = {}
        for name, text in variants(real.read_text()).items():
            files[name] = Path(tmp) / f"rmsnorm_{name}.cu"  # the headers come from CUDA_DIR
            files[name].write_text(text)
        try:
            for m, n, dtype in SHAPES:
                probe_shape(m, n, dtype, files, gbps, args.rounds)
                torch.cuda.empty_cache()
        finally:
            rn.CU_FILE = real


if __name__ == "__main__":
    main()
