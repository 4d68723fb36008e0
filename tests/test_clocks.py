"""The clock sampler behind each lab record (bench/clocks.py), on the CPU: a stand-in for
nvidia-smi prints samples, and the sampler must place them in the right timing windows."""

from __future__ import annotations

import sys
import time

import pytest

from minikernel.bench.clocks import ClockSampler, parse_line


def test_parse_line() -> None:
    s = parse_line("1980, 673.12, 0x0000000000000004\n", 1.0)
    assert s is not None and (s.sm_mhz, s.power_w, s.reasons, s.t) == (1980.0, 673.12, 4, 1.0)
    assert parse_line("1980, [N/A], 0x0\n", 1.0) is None  # power not reported
    assert parse_line("Failed to initialize NVML\n", 1.0) is None
    assert parse_line("\n", 1.0) is None


STAND_IN = """
import sys, time
print("1500, 700.5, 0x0000000000000004", flush=True)   # capped
print("garbage line", flush=True)
print("1700, 690.0, 0x0000000000000000", flush=True)
time.sleep(0.6)
print("1980, 500.0, 0x0000000000000000", flush=True)
time.sleep(30)
"""


def _wait_for(sampler: ClockSampler, n: int) -> None:
    deadline = time.monotonic() + 10
    while len(sampler.samples) < n and time.monotonic() < deadline:
        time.sleep(0.02)


def test_window_summarises_the_samples_inside_it() -> None:
    t0 = time.monotonic()
    sampler = ClockSampler(command=[sys.executable, "-c", STAND_IN])
    try:
        _wait_for(sampler, 2)
        t1 = time.monotonic()
        _wait_for(sampler, 3)
        first = sampler.window(t0, t1)
        assert first == {"sm_mhz": 1600, "power_w": 700.5, "power_capped": True}
        second = sampler.window(t1, time.monotonic())
        assert second == {"sm_mhz": 1980, "power_w": 500.0, "power_capped": False}
        assert sampler.window(t0 - 10, t0 - 5) is None  # nothing arrived then
        # a loop's window: its mean clock and the share of samples under the power cap
        assert sampler.loop_window(t0, time.monotonic()) == {
            "loop_sm_mhz": round((1500 + 1700 + 1980) / 3),
            "loop_capped_frac": round(1 / 3, 3),
        }
        assert sampler.loop_window(t1, time.monotonic()) == {
            "loop_sm_mhz": 1980,
            "loop_capped_frac": 0.0,
        }
        assert sampler.loop_window(t0 - 10, t0 - 5) is None
    finally:
        sampler.close()
    assert sampler._proc is not None and sampler._proc.poll() is not None  # stopped


def test_no_nvidia_smi_means_no_clock_fields() -> None:
    sampler = ClockSampler(command=["/nonexistent/nvidia-smi"])
    assert sampler.window(0.0, time.monotonic()) is None
    assert sampler.loop_window(0.0, time.monotonic()) is None
    sampler.close()


@pytest.mark.parametrize(
    ("stdout", "expected"),
    [
        ("700.00\n", 700.0),  # what an H200 answers
        ("[N/A]\n", None),  # a board that does not report it
        ("\n", None),
        ("not a number\n", None),
    ],
)
def test_power_limit_from_nvidia_smi(
    stdout: str, expected: float | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The env block's power_limit_w: nvidia-smi's power.limit, or nothing when it has none."""
    import subprocess

    from minikernel.bench import env

    monkeypatch.setattr(env.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(
        env.subprocess,
        "run",
        lambda *a, **k: subprocess.CompletedProcess(a[0], 0, stdout=stdout, stderr=""),
    )
    assert env._power_limit_w() == expected
    monkeypatch.setattr(env.shutil, "which", lambda name: None)
    assert env._power_limit_w() is None


def test_cooldown_before_heavy_cases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lab idles before cases of 1 GB and more, or of a 4096^3 product's flops and more
    (lab.py says why), never before smaller ones; MINIKERNEL_COOLDOWN_S sets the idle and bad
    values are refused by name."""
    from minikernel.bench import lab

    monkeypatch.delenv("MINIKERNEL_COOLDOWN_S", raising=False)
    assert lab.cooldown_seconds(None) == 0.0
    assert lab.cooldown_seconds(lab.COOLDOWN_BYTES - 1) == 0.0
    assert lab.cooldown_seconds(lab.COOLDOWN_BYTES) == lab.COOLDOWN_S > 0
    assert lab.cooldown_seconds(None, 2 * 4096**3) == lab.COOLDOWN_S
    assert lab.cooldown_seconds(None, 2 * 128 * 4096 * 4096) == 0.0  # the tall-skinny product
    assert lab.cooldown_seconds(1 << 20, 2 * 8192**3) == lab.COOLDOWN_S
    monkeypatch.setenv("MINIKERNEL_COOLDOWN_S", "0")
    assert lab.cooldown_seconds(8 << 30) == 0.0
    monkeypatch.setenv("MINIKERNEL_COOLDOWN_S", "2.5")
    assert lab.cooldown_seconds(8 << 30) == 2.5
    assert lab.cooldown_seconds(1 << 20) == 0.0
    assert lab.cooldown_seconds(None, 2 * 8192**3) == 2.5
    for bad in ("soon", "-1"):
        monkeypatch.setenv("MINIKERNEL_COOLDOWN_S", bad)
        with pytest.raises(ValueError, match="MINIKERNEL_COOLDOWN_S"):
            lab.cooldown_seconds(8 << 30)
