"""What does one call of a CUDA C rung cost the host, layer by layer?

    python labs/probe_host_cost.py            # softmax rung 15 on 64 x 600 bf16
    python labs/probe_host_cost.py --calls 5000 --profile 30

Lab 02 records ``host_us`` beside every time: the wall-clock cost of issuing one call from
Python, calls back to back. At 32768 x 600 bf16 it has the CUDA C rungs at about twice the GPU
time of their own call, where torch.softmax and QuACK issue theirs faster, so outside a CUDA
graph our short rows would run at the host's pace. This probe peels the path of one call apart
on a shape small enough that the GPU never makes the host wait: the public function
(``minikernel.softmax(x, impl=..., out=...)``), ``cuda_kernels.launch``, the loader's
``Kernel.__call__`` with the arguments built once, and the driver's ``cuLaunchKernel`` alone,
with torch.softmax beside them; then it prints cProfile's heaviest functions for the public
call. Each layer's time includes the layers under it. It prints, it writes nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import ctypes
import pstats
from collections.abc import Callable
from typing import Any

import torch

import minikernel.kernels.softmax as sm
import minikernel.kernels.softmax.cuda_kernels as ck
from minikernel.bench.timing import issue_us


def per_call_us(fn: Callable[[], Any], calls: int, repeats: int = 5) -> float:
    """The best of ``repeats`` runs of ``calls`` calls issued back to back, wall-clock µs per
    call (minikernel.bench.timing.issue_us, the lab's measure of host_us)."""
    return min(issue_us(fn, calls) for _ in range(repeats))


def layers(rung: int, x: torch.Tensor, y: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """The call at each depth, outermost first."""
    index = x.device.index or 0
    p = ck.plan(rung, *x.shape, x.dtype, ck.device_facts(index))
    kernel = ck._kernel(p.kernel, index)
    m = x.shape[0]
    args = (x, y, ctypes.c_int64(m), ctypes.c_int32(p.per_block))  # rung 15's arguments
    if rung != 15:
        raise SystemExit("probe_host_cost: the raw layers are written for rung 15's arguments")
    holders = [ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(y.data_ptr()), args[2], args[3]]
    pointers = (ctypes.c_void_p * 4)(*[ctypes.addressof(h) for h in holders])
    driver = kernel.module.driver
    stream = torch.cuda.current_stream().cuda_stream

    def raw() -> None:
        # pointers holds the addresses of holders' values: the closure keeps both alive
        assert len(holders) == len(pointers)
        driver.cuLaunchKernel(
            kernel._function, p.grid, 1, 1, p.block, 1, 1, 0, stream, ctypes.addressof(pointers), 0
        )

    return {
        f"minikernel.softmax(impl='cuda:{rung}', out=y)": lambda: sm.softmax(
            x, impl=f"cuda:{rung}", out=y
        ),
        f"cuda_kernels.launch({rung}, x, y)": lambda: ck.launch(rung, x, y),
        "Kernel.__call__, arguments built once": lambda: kernel(p.grid, p.block, args),
        "cuLaunchKernel alone": raw,
        "torch.cuda.current_stream()": lambda: torch.cuda.current_stream().cuda_stream,
        "torch.softmax(x, -1)": lambda: torch.softmax(x, -1),
        "torch.empty_like(x)": lambda: torch.empty_like(x),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--n", type=int, default=600)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--profile", type=int, default=25, help="cProfile lines to print")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("probe_host_cost: needs a CUDA GPU")
    x = sm.make_inputs(args.rows, args.n, torch.bfloat16, "cuda", 1)
    y = torch.empty_like(x)
    cands = layers(15, x, y)
    for fn in cands.values():  # compile, load and plan outside the timing
        fn()
    torch.cuda.synchronize()
    print(f"softmax rung 15, {args.rows} x {args.n} bf16, {args.calls} calls back to back")
    for name, fn in cands.items():
        print(f"  {name:48} {per_call_us(fn, args.calls):7.2f} us per call")
    prof = cProfile.Profile()
    public = next(iter(cands.values()))
    torch.cuda.synchronize()
    prof.enable()
    for _ in range(args.calls):
        public()
    prof.disable()
    torch.cuda.synchronize()
    pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)


if __name__ == "__main__":
    main()
