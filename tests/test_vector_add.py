"""Vector add: each variant against the fp64 reference, bad inputs, and wrong-kernel fixtures."""

from __future__ import annotations

import pytest
import torch
from conftest import DEVICE, HAS_GPU, INTERPRET

from minikernel import vector_add
from minikernel.kernels.vector_add import VARIANTS, bytes_moved, make_inputs, reference
from minikernel.testing import run_checked

# 1: a single element, all tail. 127/129: one short of and one past a power of two, so the
# masked tail is partial. 128: exactly one 128-block, no tail. 1000003: a prime, many blocks,
# and not a multiple of any vector width.
SIZES = [1, 127, 128, 129, 1000003]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _runnable(impl: str, dtype: torch.dtype) -> str | None:
    """Why (impl, dtype) cannot run in this session, or None if it can."""
    if impl.startswith("cuda:") and not HAS_GPU:
        return "CUDA C kernels need a GPU (they are compile-checked in test_cuda_compile.py)"
    if impl.startswith("triton:") and INTERPRET and dtype == torch.bfloat16:
        return "Triton's interpreter computes bf16 wrong (NaN); bf16 is tested on the GPU"
    return None


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("impl", sorted(VARIANTS))
def test_variant_matches_reference(impl: str, n: int, dtype: torch.dtype) -> None:
    if (why := _runnable(impl, dtype)) is not None:
        pytest.skip(why)
    device = "cuda" if impl.startswith("cuda:") else DEVICE
    a, b = make_inputs(n, dtype, device, seed=n)
    result = run_checked(
        lambda x, y, out: vector_add(x, y, out=out, impl=impl),
        [a, b],
        reference(a, b),
        name=impl,
    )
    result.raise_if_failed()


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_numpy_fallback_matches_reference(dtype: torch.dtype) -> None:
    a, b = make_inputs(1000, dtype, "cpu")
    run_checked(
        lambda x, y, out: vector_add(x, y, out=out, impl="numpy"), [a, b], reference(a, b)
    ).raise_if_failed()


def test_default_impl_runs_and_agrees_with_torch() -> None:
    a, b = make_inputs(4099, torch.float32, DEVICE)
    assert torch.equal(vector_add(a, b), a + b)


def test_empty_input_returns_empty() -> None:
    a = torch.empty(0, device=DEVICE)
    assert vector_add(a, a).numel() == 0


def test_byte_model() -> None:
    assert bytes_moved(1000, torch.float32) == 12000
    assert bytes_moved(1000, torch.bfloat16) == 6000


# --- bad input: each raises its documented error, naming the problem ------------------------


def _cpu(n: int = 8, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(n, dtype=dtype)


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "error", "match"),
    [
        ([1.0, 2.0], _cpu(2), {}, TypeError, "a must be a torch.Tensor"),
        (_cpu(dtype=torch.int32), _cpu(dtype=torch.int32), {}, TypeError, "dtype int32"),
        (_cpu(dtype=torch.float64), _cpu(dtype=torch.float64), {}, TypeError, "dtype float64"),
        (_cpu(), _cpu(dtype=torch.float16), {}, TypeError, "b has float16"),
        (_cpu(8), _cpu(9), {}, ValueError, r"shape \(8,\) but b has \(9,\)"),
        (torch.ones(4, 4).t(), torch.ones(4, 4), {}, ValueError, "a must be contiguous"),
        (_cpu(), torch.ones(8, device="meta"), {}, ValueError, "a is on cpu but b is on meta"),
        (_cpu(), _cpu(), {"impl": "cuda:9"}, ValueError, "unknown impl 'cuda:9'"),
        (_cpu(), _cpu(), {"out": _cpu(7)}, ValueError, "out has"),
    ],
    ids=[
        "not-a-tensor",
        "int32",
        "float64",
        "dtype-mismatch",
        "shape-mismatch",
        "non-contiguous",
        "device-mismatch",
        "unknown-impl",
        "bad-out",
    ],
)
def test_bad_input_raises(a, b, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        vector_add(a, b, **kwargs)


def test_cuda_impl_on_cpu_tensors_is_refused() -> None:
    with pytest.raises(ValueError, match="impl 'cuda:1' runs on a CUDA GPU; got a tensor on cpu"):
        vector_add(_cpu(), _cpu(), impl="cuda:1")


@pytest.mark.gpu
def test_triton_on_cpu_tensors_without_interpreter_is_refused() -> None:
    if INTERPRET:
        pytest.skip("the interpreter is on in this session")
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        vector_add(_cpu(), _cpu(), impl="triton:1")


# --- the checker must reject deliberately wrong kernels -------------------------------------


def test_checker_rejects_kernel_without_mask() -> None:
    from fixtures.wrong_kernels import vector_add_nomask

    a, b = make_inputs(129, torch.float32, DEVICE)  # 129 = one element past a 128-block
    result = run_checked(vector_add_nomask, [a, b], reference(a, b))
    assert not result.ok
    assert result.wrote_outside, result.message


def test_checker_rejects_unwritten_tail() -> None:
    from fixtures.wrong_kernels import vector_add_one_block_short

    a, b = make_inputs(200, torch.float32, DEVICE)
    result = run_checked(vector_add_one_block_short, [a, b], reference(a, b))
    assert not result.ok
    assert result.unwritten == 200 - 128, result.message


def test_checker_rejects_wrong_values() -> None:
    a, b = make_inputs(300, torch.float32, DEVICE)
    result = run_checked(lambda x, y, out: torch.sub(x, y, out=out), [a, b], reference(a, b))
    assert not result.ok and result.mismatches > 0 and not result.wrote_outside


@pytest.mark.gpu
def test_checker_rejects_cuda_kernel_without_bounds_check() -> None:
    from fixtures.wrong_kernels import vector_add_nomask_cuda

    a, b = make_inputs(129, torch.float32, "cuda")
    result = run_checked(vector_add_nomask_cuda, [a, b], reference(a, b))
    assert result.wrote_outside, result.message
