"""Timing on the GPU: one harness for every lab.

- Events around each call, after a warm-up, with L2 flushed before every call, so that a
  kernel whose data fits in the L2 cache (tens of MB on an H100/H200) is not timed reading its
  own cache. The flush *reads* a 256 MB buffer. ``triton.testing.do_bench`` writes one
  instead, which leaves L2 full of dirty lines: the timed kernel then pays for writing the
  harness's buffer back to DRAM as it evicts it: tens of MB, a few microseconds at DRAM speed,
  added to every call. Reading leaves only clean lines, which cost nothing to evict, and the
  earlier calls' dirty lines are written back during the flush, outside the events. ncu's
  cache control also starts each profiled kernel from a clean L2.
- The median and the 20th/80th percentiles of many calls, not the mean: one preempted call
  should not move the number.
- Under about 10 us a call is mostly launch overhead and event resolution, so small cases are
  captured in a CUDA graph and timed by replaying it (``do_bench_cudagraph``). Graph replay does
  not flush L2 between calls: a small case runs from L2, which is what it would do in a real
  model too. The record says which method timed it.
- Longer calls can still be paced by the host: when issuing one call from Python (argument
  checks, allocations, the launcher) takes about as long as the call runs on the GPU, the GPU
  waits for the host between the start event and the kernels, and the events measure the host.
  So the host's cost of issuing a call is measured first (``host_us``: calls issued back to
  back with no synchronisation, wall-clock time per call), and every timed call is queued
  behind a GPU-side *lead*: a spin kernel (``torch.cuda._sleep``) longer than that cost,
  enqueued after the L2 flush and before the start event. While the GPU spins, the host
  issues the start event and the whole call; the events then see the call's kernels back to
  back, the GPU's time, whatever the host costs. Every implementation is timed this way, so
  short shapes compare kernels, not Python launch paths. The record keeps ``host_us`` too;
  the site marks a time whose host cost reaches HOST_BOUND_FRAC of it
  (minikernel.site.data.is_host_bound): outside a CUDA graph, the host would set its pace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

GRAPH_BELOW_US = 10.0
"""Cases whose first estimate is shorter than this are timed with CUDA-graph replay."""


HOST_PROBE_US = 5000.0
"""About this much GPU time of back-to-back calls measures the host's cost per call."""

LEAD_MAX_US = 5000.0
"""The GPU-side lead before each timed call is twice the host's cost plus LEAD_PAD_US, at most
this (a call whose host costs milliseconds is milliseconds long on the GPU too)."""
LEAD_PAD_US = 20.0
MAX_REPEATS = 1000
"""Timed calls per case at most: enough for stable percentiles, and it bounds a lab's time."""
FLUSH_BYTES = 256 << 20
"""Read before every timed call: larger than the L2 of any GPU we time (60 MB on a H200)."""
METHOD = "events+l2clean+lead"
"""The record's ``timing`` for events timing. Older records: "events+l2flush+lead" (the flush
wrote its buffer, leaving dirty lines for the timed call to write back) and "events+l2flush"
(no lead either)."""

_cycles_per_us: dict[int, float] = {}


@dataclass(frozen=True)
class Timing:
    median_us: float
    p20_us: float
    p80_us: float
    method: str  # METHOD or "cudagraph" (older records: see METHOD)
    host_us: float | None = None  # wall-clock time to issue one call (events timing only)


def gpu_cycles_per_us() -> float:
    """Clock cycles per microsecond of ``torch.cuda._sleep``'s spin on this device, measured
    once per process (it follows the clock the GPU runs at, which we do not set)."""
    import torch

    dev = torch.cuda.current_device()
    if dev not in _cycles_per_us:
        cycles = 2_000_000
        torch.cuda._sleep(cycles // 10)  # wake the clock up before measuring it
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        _cycles_per_us[dev] = cycles / (start.elapsed_time(end) * 1e3)
    return _cycles_per_us[dev]


def events_with_lead(
    fn: Callable[[], Any], *, lead_us: float, warmup_ms: float, rep_ms: float
) -> list[float]:
    """Per-call times in ms of ``fn``, each call after an L2 flush and a GPU-side spin of
    ``lead_us`` (see the module's docstring): the GPU's time, not the host's."""
    import torch

    flush = torch.zeros(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    lead = max(1, int(lead_us * gpu_cycles_per_us()))

    def one(start: Any, end: Any) -> None:
        flush.amax()  # a read: L2 is left holding clean lines of `flush` (module docstring)
        torch.cuda._sleep(lead)
        start.record()
        fn()
        end.record()

    def events(n: int) -> list[tuple[Any, Any]]:
        return [
            (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
            for _ in range(n)
        ]

    # One iteration's wall time on the GPU (flush, lead and call) sets how many fit in rep_ms.
    probe = events(5)
    outer = events(1)[0]
    outer[0].record()
    for s, e in probe:
        one(s, e)
    outer[1].record()
    torch.cuda.synchronize()
    iter_ms = max(outer[0].elapsed_time(outer[1]) / len(probe), 1e-3)
    for s, e in events(max(1, int(warmup_ms / iter_ms))):
        one(s, e)
    timed = events(max(10, min(MAX_REPEATS, int(rep_ms / iter_ms))))
    for s, e in timed:
        one(s, e)
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in timed]


def issue_us(fn: Callable[[], Any], calls: int) -> float:
    """Wall-clock microseconds per call of ``calls`` calls of ``fn`` issued back to back: the GPU
    is synchronised before and after them, not between."""
    import time

    import torch

    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        fn()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def host_issue_us(fn: Callable[[], Any], gpu_us: float) -> float:
    """Wall-clock microseconds the host takes to issue one call of ``fn``: calls issued back to
    back, without synchronising, about HOST_PROBE_US of GPU work in all (3 to 50 calls). Where
    the GPU is the slower of the two, the host only queues work and this is its own cost."""
    return issue_us(fn, int(max(3, min(50, HOST_PROBE_US // max(gpu_us, 1.0)))))


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
    fn()  # compile / autotune outside any measurement or graph capture
    torch.cuda.synchronize()
    first = do_bench(fn, warmup=5, rep=20, quantiles=[0.5])
    first_us = (first[0] if isinstance(first, list | tuple) else first) * 1e3
    if graph is None:
        graph = first_us < GRAPH_BELOW_US
    if graph:
        with torch.cuda.stream(torch.cuda.Stream()):
            ms = do_bench_cudagraph(fn, rep=rep_ms, quantiles=q)
        med, p20, p80 = (float(x) * 1e3 for x in ms)
        return Timing(med, p20, p80, "cudagraph")
    host = host_issue_us(fn, first_us)
    lead = min(LEAD_MAX_US, 2 * host + LEAD_PAD_US)
    times = torch.tensor(events_with_lead(fn, lead_us=lead, warmup_ms=warmup_ms, rep_ms=rep_ms))
    med, p20, p80 = (float(x) * 1e3 for x in torch.quantile(times, torch.tensor(q)))
    return Timing(med, p20, p80, METHOD, host)
    # --8<-- [end:time_gpu]
