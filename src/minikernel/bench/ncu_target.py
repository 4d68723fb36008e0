"""The program ncu profiles: ``python -m minikernel.bench.ncu_target OP IMPL SHAPE DTYPE``.

It builds the case with the op package's ``make_runner`` (the same code the lab times), warms it
up, then runs it once between cudaProfilerStart and cudaProfilerStop.
"""

from __future__ import annotations

import importlib
import sys

import torch


def main(argv: list[str]) -> int:
    op, impl, shape_text, dtype_name, *rest = argv
    shape = [int(s) for s in shape_text.split(",") if s]
    dtype = getattr(torch, dtype_name)
    module = importlib.import_module(f"minikernel.kernels.{op}")
    run = module.make_runner(impl, shape, dtype, *rest)
    for _ in range(3):  # compile, autotune, and settle the caching allocator
        run()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    run()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
