"""Copy: the kernel against its input, the launch knobs, bad input, environment faults told
from kernel faults, and wrong-kernel fixtures the checker must reject."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE, INTERPRET

import minikernel.kernels.copy as cp
from minikernel.kernels.copy import (
    EXACT,
    EnvironmentFault,
    KernelFault,
    bytes_moved,
    classify_fault,
    copy,
    make_input,
    reference,
    sanity_check,
)
from minikernel.testing import run_checked

# 1: a single element, all tail. 1023/1025: one short of and one past the 1024-element block.
# 1024: exactly one block, no tail. 100003: a prime, ~100 blocks, no vector width divides it.
SIZES = [1, 1023, 1024, 1025, 100003]
# A copy does no arithmetic, so even bf16 is exact under the interpreter.
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("n", SIZES)
def test_copy_is_exact(n: int, dtype: torch.dtype) -> None:
    x = make_input(n, dtype, DEVICE, seed=n)
    run_checked(
        lambda src, out: copy(src, out=out), [x], reference(x), tolerances=EXACT, name="copy"
    ).raise_if_failed()


# Lesson 6's sweep launches the same kernel with other blocks and warps: the smallest block,
# blocks smaller than the warps that run them (threads hold duplicates), and a large block.
@pytest.mark.parametrize(
    ("block_size", "num_warps"), [(16, 1), (64, 16), (128, 2), (4096, 8), (16384, 4)]
)
def test_launch_knobs_do_not_change_the_answer(block_size: int, num_warps: int) -> None:
    x = make_input(5000, torch.float32, DEVICE, seed=block_size)
    run_checked(
        lambda src, out: copy(src, out=out, block_size=block_size, num_warps=num_warps),
        [x],
        reference(x),
        tolerances=EXACT,
    ).raise_if_failed()


def test_any_contiguous_shape_is_copied_flat() -> None:
    x = make_input(3 * 5 * 7, torch.float16, DEVICE).view(3, 5, 7)
    y = copy(x)
    assert y.shape == x.shape and torch.equal(y, x)


def test_empty_input_returns_empty() -> None:
    assert copy(torch.empty(0, device=DEVICE)).numel() == 0


def test_byte_model() -> None:
    assert bytes_moved(1000, torch.float32) == 8000
    assert bytes_moved(1000, torch.bfloat16) == 4000


def test_make_runner_runs_each_impl() -> None:
    for impl in [*cp.VARIANTS, *cp.PEERS]:
        run = cp.make_runner(impl, [3000], torch.float32, device=DEVICE, seed=3)
        assert torch.equal(run(), make_input(3000, torch.float32, DEVICE, seed=3))
    run = cp.make_runner("triton:1", [3000], torch.float16, "256", "2", device=DEVICE)
    assert run().dtype == torch.float16


def test_resources_are_none_under_the_interpreter() -> None:
    from minikernel.kernels.copy.triton_kernels import kernel1_resources, launch_kernel1

    x = make_input(100, torch.float32, DEVICE)
    res = kernel1_resources(launch_kernel1(x, torch.empty_like(x), 128, 4))
    if INTERPRET:
        assert res == {"registers": None, "spills": None}
    else:
        assert res["registers"] > 0 and res["spills"] >= 0


# --- bad input: each raises its documented error, naming the problem ------------------------


def _x(n: int = 8, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(n, dtype=dtype, device=DEVICE)


@pytest.mark.parametrize(
    ("x", "kwargs", "error", "match"),
    [
        ([1.0, 2.0], {}, TypeError, "x must be a torch.Tensor"),
        (_x(dtype=torch.int32), {}, TypeError, "dtype int32"),
        (_x(dtype=torch.float64), {}, TypeError, "dtype float64"),
        (torch.ones(4, 4, device=DEVICE).t(), {}, ValueError, "x must be contiguous"),
        (_x(), {"out": _x(7)}, ValueError, r"shape \(8,\) but out has \(7,\)"),
        (_x(), {"out": _x(dtype=torch.float16)}, TypeError, "out has float16"),
        (_x(), {"impl": "triton:9"}, ValueError, "unknown impl 'triton:9'"),
        (_x(), {"block_size": 1000}, ValueError, "block_size must be a power of two"),
        (_x(), {"block_size": 8}, ValueError, "from 16 to 65536, got 8"),
        (_x(), {"block_size": "1024"}, TypeError, "block_size must be an int"),
        (_x(), {"num_warps": 3}, ValueError, "num_warps must be a power of two"),
        (_x(), {"num_warps": 64}, ValueError, "from 1 to 32, got 64"),
    ],
    ids=[
        "not-a-tensor",
        "int32",
        "float64",
        "non-contiguous",
        "out-shape",
        "out-dtype",
        "unknown-impl",
        "block-not-pow2",
        "block-too-small",
        "block-not-int",
        "warps-not-pow2",
        "warps-too-many",
    ],
)
def test_bad_input_raises(x, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        copy(x, **kwargs)


# --- environment faults: the machine's problem, told apart from the kernel's ----------------


def test_tensor_on_another_device_is_an_environment_fault() -> None:
    with pytest.raises(EnvironmentFault, match="x is on meta"):
        copy(torch.ones(8, device="meta"))


@pytest.mark.skipif(not INTERPRET, reason="needs the interpreter on")
def test_interpreter_unset_after_import_is_an_environment_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TRITON_INTERPRET")
    with pytest.raises(EnvironmentFault, match="Triton reads it once, at import"):
        copy(_x())
    with pytest.raises(EnvironmentFault, match="at import"):
        sanity_check()


def test_no_gpu_and_no_interpreter_is_an_environment_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cp, "_interpreted", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EnvironmentFault, match=r"no CUDA GPU is visible.*TRITON_INTERPRET=1"):
        copy(torch.ones(8))
    with pytest.raises(EnvironmentFault, match="no CUDA GPU is visible"):
        sanity_check()


def test_cpu_tensor_with_a_gpu_present_is_an_environment_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cp, "_interpreted", lambda: False)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(EnvironmentFault, match=r"x is on the CPU.*x\.cuda\(\)"):
        copy(torch.ones(8))


@pytest.mark.gpu
def test_gpu_tensor_under_the_interpreter_is_an_environment_fault(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cp, "_interpreted", lambda: True)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with pytest.raises(EnvironmentFault, match="CPU interpreter"):
        copy(torch.ones(8, device="cuda"))


def test_sanity_check_passes_with_the_real_kernel() -> None:
    report = sanity_check()
    assert report.startswith("sanity check passed: 3073 float32 values copied bit for bit")


def test_sanity_check_blames_a_kernel_without_mask() -> None:
    from fixtures.copy_wrong import copy_nomask

    with pytest.raises(KernelFault, match="wrote outside its output"):
        sanity_check(copy_nomask)


def test_sanity_check_blames_a_kernel_that_does_not_compile() -> None:
    from fixtures.copy_wrong import copy_runtime_block

    with pytest.raises(KernelFault, match="the kernel failed") as info:
        sanity_check(copy_runtime_block)
    assert classify_fault(info.value) == "kernel"
    assert classify_fault(info.value.__cause__) == "kernel"


def test_sanity_check_blames_the_machine_for_a_driver_error() -> None:
    def broken_driver(x: torch.Tensor, out: torch.Tensor) -> None:
        raise RuntimeError("CUDA driver version is insufficient for CUDA runtime version")

    with pytest.raises(EnvironmentFault, match="driver version is insufficient"):
        sanity_check(broken_driver)


@pytest.mark.parametrize(
    ("exc", "kind"),
    [
        (EnvironmentFault("no GPU"), "environment"),
        (ModuleNotFoundError("No module named 'triton'"), "environment"),
        (RuntimeError("Found no NVIDIA driver on your system."), "environment"),
        (RuntimeError("CUDA error: no kernel image is available for execution"), "environment"),
        (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB"), "environment"),
        (RuntimeError("CUDA error: an illegal memory access was encountered"), "kernel"),
        (KernelFault("wrote outside its output"), "kernel"),
        (TypeError("copy: x has dtype int32"), "input"),
        (ValueError("copy: x must be contiguous"), "input"),
        (RuntimeError("something else"), "unknown"),
    ],
)
def test_classify_fault(exc: BaseException, kind: str) -> None:
    assert classify_fault(exc) == kind


# --- the checker must reject deliberately wrong kernels -------------------------------------


def test_checker_rejects_kernel_without_mask() -> None:
    from fixtures.copy_wrong import copy_nomask

    x = make_input(129, torch.float32, DEVICE)  # one element past a 128-block
    result = run_checked(copy_nomask, [x], reference(x), tolerances=EXACT)
    assert result.wrote_outside, result.message


def test_checker_rejects_unwritten_tail() -> None:
    from fixtures.copy_wrong import copy_one_block_short

    x = make_input(300, torch.float32, DEVICE)
    result = run_checked(copy_one_block_short, [x], reference(x), tolerances=EXACT)
    assert result.unwritten == 300 - 256, result.message


def test_checker_rejects_off_by_one_pointer() -> None:
    from fixtures.copy_wrong import copy_shifted

    x = make_input(300, torch.float32, DEVICE)
    result = run_checked(copy_shifted, [x], reference(x), tolerances=EXACT)
    assert not result.ok and result.mismatches == 300 and not result.wrote_outside


@pytest.mark.gpu
def test_copy_on_gpu_large() -> None:
    x = make_input(2**24 + 3, torch.bfloat16, "cuda")
    assert torch.equal(copy(x), x)
