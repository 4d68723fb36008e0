"""Timing on the GPU: one harness for every lab.

- Events around each call, after a warm-up, with L2 flushed before every call
  (``triton.testing.do_bench`` writes a 256 MB buffer between calls), so that a kernel whose
  data fits in the L2 cache (tens of MB on an H100/H200) is not timed reading its own cache.
- The median and the 20th/80th percentiles of many calls, not the mean: one preempted call
  should not move the number.
- Under about 10 us a call is mostly launch overhead and event resolution, so small cases are
  captured in a CUDA graph and timed by replaying it (``do_bench_cudagraph``). Graph replay does
  not flush L2 between calls: a small case runs from L2, which is what it would do in a real
  model too. The record says which method timed it.
- Longer calls can still be paced by the host: when issuing one call from Python (argument
  checks, allocations, the launcher) takes about as long as the call runs on the GPU, the GPU
  waits between calls and the events measure the host. So after an event timing, the host's
  cost of issuing a call is measured too (``host_us``: calls issued back to back with no
  synchronisation, wall-clock time per call), and the record keeps it; the site marks a time
  whose host cost reaches HOST_BOUND_FRAC of it (minikernel.site.data.is_host_bound).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GRAPH_BELOW_US = 10.0
"""Cases whose first estimate is shorter than this are timed with CUDA-graph replay."""


HOST_PROBE_US = 5000.0
"""About this much GPU time of back-to-back calls measures the host's cost per call."""


@dataclass(frozen=True)
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    method: str  # "events+l2flush" or "cudagraph"
    host_us: float | None = None  # wall-clock time to issue one call (events timing only)


def host_issue_us(fn: Callable[[], Any], gpu_us: float) -> float:
    """Wall-clock microseconds the host takes to issue one call of ``fn``: calls issued back to
    back, without synchronising, about HOST_PROBE_US of GPU work in all (3 to 50 calls). Where
    the GPU is the slower of the two, the host only queues work and this is its own cost."""
    import time

    import torch

    calls = int(max(3, min(50, HOST_PROBE_US // max(gpu_us, 1.0))))
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


# --8<-- [start:time_gpu]
def time_gpu(
    fn: Callable[[], Any],
    *,
    graph: bool | None = None,
    warmup_ms: float = 25.0,
    rep_ms: float = 100.0,
) -> Timing:
    """Time ``fn`` (which launches GPU work) and return median and p20/p80 in microseconds.

    ``graph=None`` chooses: CUDA-graph replay for calls under GRAPH_BELOW_US, events otherwise.
    """
    import torch
    from triton.testing import do_bench, do_bench_cudagraph

    q = [0.5, 0.2, 0.8]
    if graph is None:
        fn()  # compile / autotune outside any measurement or graph capture
        torch.cuda.synchronize()
        first = do_bench(fn, warmup=5, rep=20, quantiles=[0.5])
        first_ms = first[0] if isinstance(first, list | tuple) else first
        graph = first_ms * 1e3 < GRAPH_BELOW_US
    if graph:
        fn()
        torch.cuda.synchronize()
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = do_bench_cudagraph(fn, rep=rep_ms, quantiles=q)
        method = "cudagraph"
    else:
        ms = do_bench(fn, warmup=warmup_ms, rep=rep_ms, quantiles=q)
        method = "events+l2flush"
    med, p20, p80 = (float(x) * 1e3 for x in ms)
    host = host_issue_us(fn, med) if method == "events+l2flush" else None
    return Timing(med, p20, p80, method, host)
    # --8<-- [end:time_gpu]
