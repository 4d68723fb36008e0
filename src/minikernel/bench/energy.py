"""The energy one call takes, from the GPU's own energy counter.

Where a board runs at its power limit, the clock a kernel gets depends on the power it draws,
so two kernels that are equally fast clock for clock can time differently in a long loop
(E3's large matrix products). The records' ``power_w`` cannot tell them apart: it is the highest
of samples that the board averages over about a second. NVML's total-energy counter can, with
care: on the H200 it moves in steps about every 100 ms, so a reading taken at an arbitrary
moment is up to one step stale.

:func:`loop_energy` therefore runs the call back to back for about ``seconds`` and counts only
whole steps: from the first change of the counter after a settling time to the last change
before the loop stops, with the host polling the counter (every ``poll_ms``) from a thread so
that each change is timed to within a poll. Energy over that span divided by the span is the
mean board power; times the loop's time per call, the energy of one call (the board's, idle
parts included, which is what a power limit sees).

No NVML (no driver library, a GPU without the counter): :class:`EnergyCounter` reads None and
the records simply carry no energy fields.
"""

from __future__ import annotations

import ctypes
import threading
import time
from collections.abc import Callable
from typing import Any

NVML_SUCCESS = 0
BATCH_S = 0.02
"""About how much GPU time :func:`loop_energy` queues between two synchronisations."""


class EnergyCounter:
    """NVML's total energy of GPU ``index`` since the driver loaded, in millijoules.
    ``read()`` is None where NVML or the counter is missing. ``library`` replaces the
    ``libnvidia-ml.so.1`` it loads (tests)."""

    def __init__(self, index: int = 0, library: Any = None) -> None:
        self._nvml: Any = None
        self._handle = ctypes.c_void_p()
        try:
            nvml = library if library is not None else ctypes.CDLL("libnvidia-ml.so.1")
            if nvml.nvmlInit_v2() != NVML_SUCCESS:
                return
            if nvml.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self._handle)) != 0:
                return
        except (OSError, AttributeError):
            return
        self._nvml = nvml
        if self.read() is None:  # a GPU without the counter answers NOT_SUPPORTED
            self._nvml = None

    def read(self) -> int | None:
        if self._nvml is None:
            return None
        value = ctypes.c_ulonglong()
        rc = self._nvml.nvmlDeviceGetTotalEnergyConsumption(self._handle, ctypes.byref(value))
        return int(value.value) if rc == NVML_SUCCESS else None


def steps(samples: list[tuple[float, int]]) -> list[tuple[float, int]]:
    """The samples (time, mJ) at which the counter changed: each is the first reading of a new
    value, so its time is when the step happened, to within one poll."""
    return [samples[i] for i in range(1, len(samples)) if samples[i][1] != samples[i - 1][1]]


def mean_power_w(samples: list[tuple[float, int]], t0: float, t1: float) -> float | None:
    """Mean power (W) over the whole counter steps inside [t0, t1]: energy from the first step
    at or after t0 to the last at or before t1, over the time between them; None with fewer
    than two steps in the window."""
    inside = [s for s in steps(samples) if t0 <= s[0] <= t1]
    if len(inside) < 2:
        return None
    (ta, ea), (tb, eb) = inside[0], inside[-1]
    if tb <= ta:
        return None
    return (eb - ea) / 1000.0 / (tb - ta)


def loop_energy(
    fn: Callable[[], Any],
    counter: EnergyCounter,
    *,
    seconds: float = 2.0,
    settle_s: float = 0.3,
    poll_ms: float = 0.5,
) -> dict[str, float] | None:
    """Run ``fn`` back to back for ``settle_s + seconds`` and return the loop's time per call
    (``loop_us``), the mean board power over whole counter steps after the settling time
    (``loop_power_w``) and their product, the energy of one call (``energy_mJ``); None when the
    counter cannot be read or stepped fewer than twice."""
    import torch

    if counter.read() is None:
        return None
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            value = counter.read()
            if value is not None:
                samples.append((time.perf_counter(), value))
            time.sleep(poll_ms / 1000.0)

    thread = threading.Thread(target=poll, daemon=True)
    torch.cuda.synchronize()
    thread.start()
    try:
        start = time.perf_counter()
        settled = 0
        while time.perf_counter() - start < settle_s:  # the clock settles under the loop
            fn()
            torch.cuda.synchronize()
            settled += 1
        # Calls per batch: about BATCH_S of GPU work between the host's checks, so that the
        # gap at each synchronisation is a small part of the loop.
        batch = max(1, int(BATCH_S / ((time.perf_counter() - start) / settled)))
        t0 = time.perf_counter()
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        calls = 0
        while time.perf_counter() - t0 < seconds:
            for _ in range(batch):
                fn()
            calls += batch
            torch.cuda.synchronize()
        end.record()
        torch.cuda.synchronize()
        t1 = time.perf_counter()
    finally:
        stop.set()
        thread.join()
    power = mean_power_w(samples, t0, t1)
    if power is None or calls == 0:
        return None
    loop_us = begin.elapsed_time(end) * 1e3 / calls
    return {
        "loop_us": round(loop_us, 3),
        "loop_power_w": round(power, 1),
        "energy_mJ": round(power * loop_us / 1000.0, 3),
    }
