"""Lesson 6 (performance from first principles): solutions.

Exercise 1: the roofline: the best TFLOP/s a kernel of a given arithmetic intensity can reach.
Exercise 2: latency hiding: how many bytes must be in flight to keep memory busy (Little's
law), and how many warps per SM that takes; what occupancy a launch gets.
Exercise 3: a benchmarking protocol: warm up, synchronise, repeat, report percentiles.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any


# --8<-- [start:ex1]
def attainable_tflops(intensity: float, *, peak_tflops: float, peak_GBps: float) -> float:
    """The roofline: ``min(peak compute, intensity x bandwidth)``; intensity in FLOP/byte."""
    return min(peak_tflops, intensity * peak_GBps / 1e3)


def ridge_point(*, peak_tflops: float, peak_GBps: float) -> float:
    """The intensity (FLOP/byte) above which a kernel can be compute-bound."""
    return peak_tflops * 1e3 / peak_GBps


# --8<-- [end:ex1]


# --8<-- [start:ex2]
def bytes_in_flight(peak_GBps: float, latency_ns: float) -> float:
    """Little's law: to sustain ``peak_GBps`` when each access takes ``latency_ns``, this many
    bytes must be on their way at every moment."""
    return peak_GBps * latency_ns  # GB/s x ns = bytes


def warps_to_hide_latency(
    peak_GBps: float, latency_ns: float, *, sms: int, bytes_per_lane: int = 16, loads: int = 1
) -> float:
    """Warps per SM needed when each warp has ``loads`` loads of ``bytes_per_lane`` per lane in
    flight (a 16-byte vector per lane, one load at a time, by default)."""
    per_warp = 32 * bytes_per_lane * loads
    return bytes_in_flight(peak_GBps, latency_ns) / sms / per_warp


# Per-SM limits of compute capability 9.0 (H100 / H200).
SM90_LIMITS = {
    "max_warps": 64,
    "max_blocks": 32,
    "registers": 65536,
    "register_unit": 256,  # registers are given to a warp in units of 256
    "shared_bytes": 228 * 1024,
}


def occupancy(
    num_warps: int,
    registers_per_thread: int,
    shared_bytes_per_block: int = 0,
    limits: dict[str, int] = SM90_LIMITS,
) -> dict[str, Any]:
    """Blocks (programs) per SM, resident warps per SM, the fraction of the maximum, and
    which resource limits it."""
    unit = limits["register_unit"]
    regs_per_warp = -(-registers_per_thread * 32 // unit) * unit  # round up to the unit
    by = {
        "blocks": limits["max_blocks"],
        "warps": limits["max_warps"] // num_warps,
        "registers": limits["registers"] // (regs_per_warp * num_warps),
    }
    if shared_bytes_per_block:
        by["shared memory"] = limits["shared_bytes"] // shared_bytes_per_block
    blocks = min(by.values())
    limiter = min(by, key=lambda k: by[k])
    warps = blocks * num_warps
    return {
        "blocks_per_sm": blocks,
        "warps_per_sm": warps,
        "occupancy": warps / limits["max_warps"],
        "limited_by": limiter,
    }


# --8<-- [end:ex2]


# --8<-- [start:ex3]
def bench(
    fn: Callable[[], Any],
    *,
    sync: Callable[[], None],
    warmup: int = 10,
    rep: int = 50,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, float]:
    """Median and 20th/80th percentiles of ``rep`` timed calls of ``fn``, in seconds.

    ``sync`` waits for the device (``torch.cuda.synchronize`` on a GPU): GPU calls return as
    soon as the work is queued, so a clock read without a sync times the launch, not the
    kernel. Warm-up calls (compilation, caches, clocks ramping up) are not timed.
    """
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(rep):
        start = clock()
        fn()
        sync()  # the work must be finished before the clock is read again
        times.append(clock() - start)
    q = statistics.quantiles(times, n=10, method="inclusive")  # deciles
    return {"median": statistics.median(times), "p20": q[1], "p80": q[7]}


# --8<-- [end:ex3]
