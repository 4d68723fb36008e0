"""The program ncu profiles: ``python -m minikernel.bench.ncu_target OP IMPL SHAPE DTYPE``.

It builds the case with the op package's ``make_runner`` (the same code the lab times), warms it
up, then runs it once between cudaProfilerStart and cudaProfilerStop.

``python -m minikernel.bench.ncu_target --cases OP FILE`` does the same for each case of a JSON
list in FILE (``[IMPL, [SHAPE...], DTYPE, [EXTRA...]]``), one after the other in this process,
and launches the marker kernel (``ncu.MARKER``) in the profiled window before each case's call,
so that :func:`minikernel.bench.ncu.split_cases` can tell their rows apart.
"""

from __future__ import annotations

import gc
import importlib
import json
import sys
from pathlib import Path

import torch


def run_case(
    op: str, impl: str, shape: list[int], dtype_name: str, rest: list[str], *, marker: bool
) -> None:
    dtype = getattr(torch, dtype_name)
    module = importlib.import_module(f"minikernel.kernels.{op}")
    run = module.make_runner(impl, shape, dtype, *rest)
    for _ in range(3):  # compile, autotune, and settle the caching allocator
        run()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    if marker:
        torch.cuda._sleep(1)  # ATen's spin_kernel: where this case's rows begin
    run()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()


def main(argv: list[str]) -> int:
    if argv[:1] == ["--cases"]:
        op, spec = argv[1], argv[2]
        for impl, shape, dtype_name, rest in json.loads(Path(spec).read_text()):
            run_case(op, impl, list(shape), dtype_name, list(rest), marker=True)
            gc.collect()  # the case's tensors go before the next case allocates its own
            torch.cuda.empty_cache()
        return 0
    op, impl, shape_text, dtype_name, *rest = argv
    shape = [int(s) for s in shape_text.split(",") if s]
    run_case(op, impl, shape, dtype_name, rest, marker=False)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
