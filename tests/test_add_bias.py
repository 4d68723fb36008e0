"""Add bias: the variant on odd shapes, on non-contiguous x, bias and out, bad input, and
wrong-kernel fixtures the checker must reject."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from conftest import DEVICE, INTERPRET

from minikernel.kernels.add_bias import (
    VARIANTS,
    add_bias,
    bytes_moved,
    make_inputs,
    make_runner,
    reference,
)
from minikernel.testing import run_checked

# (1, 1): one element. (1, 257): one row, one past the 256-wide tile. (17, 256): one row past
# the 16-row tile, exactly one tile wide. (33, 300): partial tiles on both edges. (200, 7):
# narrow rows, most of every tile masked.
SHAPES = [(1, 1), (1, 257), (17, 256), (33, 300), (200, 7)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
IMPLS = sorted(VARIANTS)


def _skip_bf16_in_interpreter(dtype: torch.dtype) -> None:
    if INTERPRET and dtype == torch.bfloat16:
        pytest.skip("Triton's interpreter rounds bf16 arithmetic wrong; bf16 is tested on the GPU")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("impl", IMPLS)
def test_variant_matches_reference(impl: str, shape: tuple[int, int], dtype: torch.dtype) -> None:
    _skip_bf16_in_interpreter(dtype)
    x, bias = make_inputs(*shape, dtype, DEVICE, seed=sum(shape))
    run_checked(
        lambda a, b, out: add_bias(a, b, out=out, impl=impl),
        [x, bias],
        reference(x, bias),
        name=impl,
    ).raise_if_failed()


# Non-contiguous x and bias, made inside run_checked's guarded copies of contiguous bases.
X_VIEWS: dict[str, tuple[tuple[int, int], Callable[[torch.Tensor], torch.Tensor]]] = {
    "contiguous": ((33, 70), lambda b: b),
    "transposed": ((70, 33), lambda b: b.t()),  # strides (1, 33)
    "step-slice": ((66, 140), lambda b: b[::2, 1::2]),  # strides (280, 2), offset 1
    "column-window": ((33, 100), lambda b: b[:, 10:80]),  # row stride 100 > 70 columns
}
B_VIEWS: dict[str, tuple[int, Callable[[torch.Tensor], torch.Tensor]]] = {
    "contiguous": (70, lambda b: b),
    "step-slice": (210, lambda b: b[2::3]),  # stride 3
    "expanded": (1, lambda b: b.expand(70)),  # stride 0: one value for every column
}


@pytest.mark.parametrize("b_view", sorted(B_VIEWS))
@pytest.mark.parametrize("x_view", sorted(X_VIEWS))
def test_non_contiguous_x_and_bias(x_view: str, b_view: str) -> None:
    x_shape, make_x = X_VIEWS[x_view]
    b_len, make_b = B_VIEWS[b_view]
    xb, _ = make_inputs(*x_shape, torch.float32, DEVICE, seed=1)
    _, bb = make_inputs(1, b_len, torch.float32, DEVICE, seed=2)
    run_checked(
        lambda a, b, out: add_bias(make_x(a), make_b(b), out=out),
        [xb, bb],
        reference(make_x(xb), make_b(bb)),
        name=f"add_bias x={x_view} bias={b_view}",
    ).raise_if_failed()


def test_strided_output_is_written_and_nothing_else() -> None:
    x, bias = make_inputs(21, 30, torch.float32, DEVICE, seed=4)
    buf = torch.full((30, 2 * 21), float("nan"), device=DEVICE)
    out = buf[:, ::2].t()  # strides (2, 42)
    add_bias(x, bias, out=out)
    assert torch.allclose(out, x + bias)
    assert int((~torch.isnan(buf)).sum()) == x.numel()


def test_empty_and_byte_model() -> None:
    assert add_bias(torch.empty(0, 4, device=DEVICE), torch.ones(4, device=DEVICE)).shape == (0, 4)
    assert bytes_moved(1024, 512, torch.float32) == (2 * 1024 * 512 + 512) * 4


def test_make_runner_runs_each_impl() -> None:
    x, bias = make_inputs(40, 24, torch.float32, DEVICE, seed=9)
    for impl in [*VARIANTS, "torch:eager"]:
        got = make_runner(impl, [40, 24], torch.float32, DEVICE, seed=9)()
        assert torch.allclose(got, x + bias)


# --- bad input: each raises its documented error, naming the problem ------------------------


def _m(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype, device=DEVICE)


_X, _B = _m(4, 6), _m(6)


@pytest.mark.parametrize(
    ("x", "bias", "kwargs", "error", "match"),
    [
        (_m(6), _B, {}, ValueError, r"x must have 2 dimension\(s\)"),
        (_X, _m(1, 6), {}, ValueError, r"bias must have 1 dimension\(s\)"),
        (_X, _m(4), {}, ValueError, "bias has 4 values but x has 6 columns"),
        (_X, _m(6, dtype=torch.float16), {}, TypeError, "bias has float16"),
        (_m(4, 6, dtype=torch.int32), _B, {}, TypeError, "x has dtype int32"),
        (_X, torch.ones(6, device="meta"), {}, ValueError, "bias is on meta"),
        (_X, _B, {"out": _m(6, 4)}, ValueError, r"out must be a \(4, 6\) float32"),
        (_X, _B, {"out": _m(1, 6).expand(4, 6)}, ValueError, "out has overlapping elements"),
        (_X, _B, {"out": _X}, ValueError, "out shares memory with x"),
        (_X, _B, {"impl": "cuda:1"}, ValueError, "unknown impl 'cuda:1'"),
    ],
    ids=[
        "x-1d",
        "bias-2d",
        "bias-length",
        "bias-dtype",
        "x-int32",
        "bias-device",
        "out-shape",
        "out-overlapping",
        "out-aliases-x",
        "unknown-impl",
    ],
)
def test_bad_input_raises(x, bias, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        add_bias(x, bias, **kwargs)


# --- the checker must reject deliberately wrong kernels -------------------------------------


def test_checker_rejects_bias_broadcast_the_wrong_way() -> None:
    from fixtures.add_bias_wrong import add_bias_by_row

    x, bias = make_inputs(20, 20, torch.float32, DEVICE)
    result = run_checked(add_bias_by_row, [x, bias], reference(x, bias))
    assert not result.ok and result.mismatches > 0, result.message


def test_checker_rejects_kernel_that_ignores_the_bias_stride() -> None:
    from fixtures.add_bias_wrong import add_bias_ignores_bias_stride

    x, _ = make_inputs(20, 30, torch.float32, DEVICE)
    _, bb = make_inputs(1, 60, torch.float32, DEVICE)
    result = run_checked(
        lambda a, b, out: add_bias_ignores_bias_stride(a, b[::2], out),
        [x, bb],
        reference(x, bb[::2]),
    )
    assert not result.ok and result.mismatches > 0, result.message


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_gpu_large(dtype: torch.dtype) -> None:
    x, bias = make_inputs(4097, 1025, dtype, "cuda")
    run_checked(
        lambda a, b, out: add_bias(a, b, out=out), [x, bias], reference(x, bias)
    ).raise_if_failed()
