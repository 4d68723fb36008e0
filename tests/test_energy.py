"""The energy of one call from NVML's energy counter (bench/energy.py): the counter read through
a stand-in for the driver library, the arithmetic over whole counter steps, and on a GPU one
real loop."""

from __future__ import annotations

import pytest

from minikernel.bench import energy
from minikernel.bench.energy import EnergyCounter, mean_power_w, steps


class FakeNVML:
    """Answers the three NVML calls EnergyCounter makes; ``values`` are the counter's readings
    (mJ) in order, ``rc`` what the energy call returns (3 = NVML_ERROR_NOT_SUPPORTED)."""

    def __init__(self, values: list[int], rc: int = 0, init_rc: int = 0) -> None:
        self.values = list(values)
        self.rc = rc
        self.init_rc = init_rc

    def nvmlInit_v2(self) -> int:
        return self.init_rc

    def nvmlDeviceGetHandleByIndex_v2(self, index: int, handle: object) -> int:
        return 0

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: object, out: object) -> int:
        if self.rc != 0:
            return self.rc
        out._obj.value = self.values.pop(0) if len(self.values) > 1 else self.values[0]  # type: ignore[attr-defined]
        return 0


def test_counter_reads_millijoules_through_nvml() -> None:
    counter = EnergyCounter(library=FakeNVML([1000, 1000, 1500]))  # the first read checks it
    assert counter.read() == 1000
    assert counter.read() == 1500


@pytest.mark.parametrize(
    "library",
    [
        FakeNVML([1], rc=3),  # a GPU without the counter: NOT_SUPPORTED
        FakeNVML([1], init_rc=9),  # NVML fails to start (no driver)
        object(),  # a library without the functions
    ],
)
def test_counter_without_nvml_reads_none(library: object) -> None:
    assert EnergyCounter(library=library).read() is None


def test_loop_energy_without_a_counter_is_none() -> None:
    """No counter, no energy fields: the lab records the rest as before (no GPU needed, since
    the function returns before it touches one)."""
    assert energy.loop_energy(lambda: None, EnergyCounter(library=object())) is None


def test_power_counts_only_whole_steps() -> None:
    """A counter that steps every 0.1 s by 50 J is 500 W, whatever the polls in between and
    however the window cuts a step: the partial steps at both ends are left out."""
    samples = []
    for i in range(40):  # polls every 10 ms over 0.4 s
        t = i * 0.01
        samples.append((t, 1_000_000 + 50_000 * int(t / 0.1 + 1e-9)))
    assert [s[0] for s in steps(samples)] == pytest.approx([0.1, 0.2, 0.3])
    assert mean_power_w(samples, 0.05, 0.39) == pytest.approx(500.0)
    assert mean_power_w(samples, 0.25, 0.39) is None  # one step inside: no span to divide by
    assert mean_power_w([], 0.0, 1.0) is None


def test_a_step_of_another_size_changes_the_mean() -> None:
    samples = [(0.0, 0), (0.1, 40_000), (0.2, 100_000), (0.3, 130_000)]
    assert mean_power_w(samples, 0.0, 0.3) == pytest.approx((130_000 - 40_000) / 1000 / 0.2)


@pytest.mark.gpu
def test_loop_energy_of_a_matrix_product_on_the_gpu() -> None:
    """On a GPU with the counter: a loop of 4096^3 products draws more than an idle board and
    the energy per call is power times time."""
    import torch

    counter = EnergyCounter(torch.cuda.current_device())
    if counter.read() is None:
        pytest.skip("this GPU has no NVML energy counter")
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    used = energy.loop_energy(lambda: a @ a, counter, seconds=1.0)
    assert used is not None
    assert used["loop_power_w"] > 50
    assert used["energy_mJ"] == pytest.approx(
        used["loop_power_w"] * used["loop_us"] / 1000, rel=1e-2
    )
