"""The SM clock and the board power while a lab times a call.

A memory-bound kernel's time is set by DRAM, yet it is not free of the SM clock: its
arithmetic, its barriers and its address math still run on the SMs. When a long run of heavy
kernels pushes the GPU to its power limit, the driver lowers the SM clock (on an H200 with
``--clock-control none`` nothing pins it), and a kernel with more instructions per byte slows
down with it. The same kernel can then measure two different times in one run.

:class:`ClockSampler` runs ``nvidia-smi`` in the background for the whole lab, one sample every
``period_ms``, and :meth:`ClockSampler.window` summarises the samples taken while one call was
timed: the mean SM clock, the highest board power, and whether the driver's software power cap
was among the active clock-event reasons. Where ``nvidia-smi`` is missing or fails, the sampler
holds no samples and the records simply carry no clock fields.
"""

from __future__ import annotations

import atexit
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

SW_POWER_CAP = 0x4
"""nvidia-smi's clock-event reason bit for the software power cap (clocks lowered to keep the
board under its power limit)."""

QUERY = "clocks.sm,power.draw,clocks_throttle_reasons.active"


@dataclass(frozen=True)
class Sample:
    t: float  # time.monotonic() when the line arrived
    sm_mhz: float
    power_w: float
    reasons: int


def parse_line(line: str, t: float) -> Sample | None:
    """One line of ``nvidia-smi --query-gpu=QUERY --format=csv,noheader,nounits``, or None for
    a line that is not three readable fields (``[N/A]``, a warning, a blank line)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 3:
        return None
    try:
        return Sample(t, float(parts[0]), float(parts[1]), int(parts[2], 16))
    except ValueError:
        return None


class ClockSampler:
    """Background samples of the SM clock and board power of GPU ``index``. ``command``
    replaces the nvidia-smi command line (tests)."""

    def __init__(
        self, index: int = 0, period_ms: int = 50, command: list[str] | None = None
    ) -> None:
        self.samples: list[Sample] = []
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[str] | None = None
        if command is None:
            exe = shutil.which("nvidia-smi")
            if exe is None:
                return
            command = [
                exe,
                f"--id={index}",
                f"--query-gpu={QUERY}",
                "--format=csv,noheader,nounits",
                "-lms",
                str(period_ms),
            ]
        try:
            self._proc = subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
            )
        except OSError:
            return
        threading.Thread(target=self._read, daemon=True).start()
        atexit.register(self.close)

    def _read(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for line in self._proc.stdout:
            s = parse_line(line, time.monotonic())
            if s is not None:
                with self._lock:
                    self.samples.append(s)

    def window(self, t0: float, t1: float) -> dict[str, Any] | None:
        """The samples that arrived between ``t0`` and ``t1`` (``time.monotonic()``): mean SM
        clock (MHz), highest power (W), and whether the software power cap was active in any
        of them; None when no sample arrived in the window."""
        with self._lock:
            got = [s for s in self.samples if t0 <= s.t <= t1]
        if not got:
            return None
        return {
            "sm_mhz": round(sum(s.sm_mhz for s in got) / len(got)),
            "power_w": round(max(s.power_w for s in got), 1),
            "power_capped": any(s.reasons & SW_POWER_CAP for s in got),
        }

    def loop_window(self, t0: float, t1: float) -> dict[str, Any] | None:
        """The samples of a two-second loop (energy.py) between ``t0`` and ``t1``: its mean SM
        clock (``loop_sm_mhz``) and the fraction of samples in which the software power cap was
        active (``loop_capped_frac``): near 1, the board held the loop at its power limit the
        whole time; near 0, it never had to. None when no sample arrived in the window."""
        with self._lock:
            got = [s for s in self.samples if t0 <= s.t <= t1]
        if not got:
            return None
        capped = sum(bool(s.reasons & SW_POWER_CAP) for s in got)
        return {
            "loop_sm_mhz": round(sum(s.sm_mhz for s in got) / len(got)),
            "loop_capped_frac": round(capped / len(got), 3),
        }

    def close(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._proc.kill()
