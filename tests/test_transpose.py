"""Transpose and 2-D copy: every variant on odd shapes and dtypes, on non-contiguous inputs
(transposed views, slices with steps, expanded rows), into strided outputs, bad input, and
wrong-kernel fixtures the checker must reject."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from conftest import DEVICE

from minikernel.kernels.transpose import (
    EXACT,
    VARIANTS,
    bytes_moved,
    copy2d,
    make_input,
    make_runner,
    reference,
    reference_copy,
    transpose,
)
from minikernel.testing import run_checked

# (1, 1): one element, every tile all edge. (1, 1025) and (1025, 1): one row / one column, one
# past the naive kernel's 1024-element run. (63, 65): one short of / one past the 64 x 64
# tile on each side. (64, 64): exactly one tile, no edge. (130, 7): more rows than columns,
# three partial tile rows.
SHAPES = [(1, 1), (1, 1025), (1025, 1), (63, 65), (64, 64), (130, 7)]
# A transpose only moves values, so every dtype (bf16 too, even in the interpreter) is exact.
DTYPES = [torch.float32, torch.float16, torch.bfloat16]
IMPLS = sorted(VARIANTS)


def _dt(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
@pytest.mark.parametrize("impl", IMPLS)
def test_variant_matches_reference(impl: str, shape: tuple[int, int], dtype: torch.dtype) -> None:
    x = make_input(*shape, dtype, DEVICE, seed=shape[0] * 7 + shape[1])
    run_checked(
        lambda src, out: transpose(src, out=out, impl=impl),
        [x],
        reference(x),
        tolerances=EXACT,
        name=impl,
    ).raise_if_failed()


# Non-contiguous inputs. Each case takes a contiguous base (which run_checked surrounds with
# guard margins) and makes the view the kernel sees from it, so a kernel that ignores the
# strides reads the wrong elements or the margins.
VIEWS: dict[str, tuple[tuple[int, int], Callable[[torch.Tensor], torch.Tensor]]] = {
    # x.t(): strides (1, M); the load is the strided side now
    "transposed": ((70, 45), lambda b: b.t()),
    # every second row and every third column: strides (2N, 3)
    "step-slice": ((90, 100), lambda b: b[::2, ::3]),
    # a window of a wider matrix: row stride larger than the row
    "column-window": ((40, 100), lambda b: b[3:, 17:83]),
    # a step slice of a transposed view: strides (3, 2N), storage offset != 0
    "transposed-step": ((66, 90), lambda b: b.t()[1::3, ::2]),
    # one row repeated: stride 0 along the rows (reading the same address is fine)
    "expanded-row": ((1, 77), lambda b: b.expand(33, 77)),
}


@pytest.mark.parametrize("view", sorted(VIEWS))
@pytest.mark.parametrize("impl", IMPLS)
def test_variant_on_non_contiguous_input(impl: str, view: str) -> None:
    shape, make_view = VIEWS[view]
    base = make_input(*shape, torch.float32, DEVICE, seed=len(view))
    run_checked(
        lambda b, out: transpose(make_view(b), out=out, impl=impl),
        [base],
        reference(make_view(base)),
        tolerances=EXACT,
        name=f"{impl} on {view}",
    ).raise_if_failed()


@pytest.mark.parametrize("view", sorted(VIEWS))
def test_copy2d_on_non_contiguous_input(view: str) -> None:
    shape, make_view = VIEWS[view]
    base = make_input(*shape, torch.float16, DEVICE, seed=len(view))
    run_checked(
        lambda b, out: copy2d(make_view(b), out=out),
        [base],
        reference_copy(make_view(base)),
        tolerances=EXACT,
        name=f"copy2d on {view}",
    ).raise_if_failed()


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_copy2d_matches_reference(shape: tuple[int, int]) -> None:
    x = make_input(*shape, torch.float32, DEVICE, seed=1)
    run_checked(copy2d_into, [x], reference_copy(x), tolerances=EXACT).raise_if_failed()


def copy2d_into(x: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    return copy2d(x, out=out)


def _strided_outputs(shape: tuple[int, int]) -> dict[str, tuple[torch.Tensor, torch.Tensor]]:
    """(buffer, view of it with ``shape``): outputs whose strides are not (N, 1)."""
    m, n = shape
    nan = float("nan")
    t = torch.full((n, m), nan, device=DEVICE)
    s = torch.full((2 * m + 1, 3 * n), nan, device=DEVICE)
    return {"transposed": (t, t.t()), "step-slice": (s, s[1::2, ::3])}


@pytest.mark.parametrize("target", ["transposed", "step-slice"])
@pytest.mark.parametrize("impl", [*IMPLS, "copy2d"])
def test_strided_output_is_written_and_nothing_else(impl: str, target: str) -> None:
    x = make_input(37, 70, torch.float32, DEVICE, seed=5)
    want = x if impl == "copy2d" else x.t()
    buf, out = _strided_outputs(tuple(want.shape))[target]
    got = copy2d(x, out=out) if impl == "copy2d" else transpose(x, out=out, impl=impl)
    assert got is out and torch.equal(out, want)
    # every element of the buffer outside the view is still NaN: no stray writes
    assert int((~torch.isnan(buf)).sum()) == want.numel()


def test_copy2d_into_transposed_view_is_a_transpose() -> None:
    x = make_input(50, 30, torch.float32, DEVICE)
    out = torch.empty(30, 50, device=DEVICE)
    copy2d(x, out=out.t())
    assert torch.equal(out, transpose(x))


def test_default_impl_and_empty_input() -> None:
    x = make_input(20, 30, torch.float32, DEVICE)
    y = transpose(x)
    assert y.is_contiguous() and torch.equal(y, x.t())
    assert transpose(torch.empty(0, 5, device=DEVICE)).shape == (5, 0)
    assert copy2d(torch.empty(3, 0, device=DEVICE)).shape == (3, 0)


def test_byte_model() -> None:
    assert bytes_moved(4096, 4096, torch.float32) == 2 * 4096 * 4096 * 4
    assert bytes_moved(3, 5, torch.bfloat16) == 60


def test_make_runner_runs_each_impl() -> None:
    x = make_input(40, 24, torch.float32, DEVICE, seed=9)
    for impl in [*VARIANTS, "torch:eager"]:
        assert torch.equal(make_runner(impl, [40, 24], torch.float32, DEVICE, seed=9)(), x.t())


# --- bad input: each raises its documented error, naming the problem ------------------------


def _m(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype, device=DEVICE)


_X = _m(4, 6)


@pytest.mark.parametrize(
    ("x", "kwargs", "error", "match"),
    [
        (_X.tolist(), {}, TypeError, "x must be a torch.Tensor"),
        (_m(8), {}, ValueError, r"x must have 2 dimension\(s\), got shape \(8,\)"),
        (_m(2, 3, 4), {}, ValueError, "x must have 2 dimension"),
        (_m(4, 6, dtype=torch.int64), {}, TypeError, "dtype int64"),
        (_X, {"out": _m(4, 6)}, ValueError, r"out must have shape \(6, 4\), got \(4, 6\)"),
        (_X, {"out": _m(6, 4, dtype=torch.float16)}, TypeError, "out has float16"),
        (_X, {"out": torch.ones(6, 4, device="meta")}, ValueError, "out is on meta"),
        (_X, {"out": _m(1, 4).expand(6, 4)}, ValueError, "out has overlapping elements"),
        (_X, {"out": _X.view(6, 4)}, ValueError, "out shares memory with x"),
        (_X, {"impl": "triton:7"}, ValueError, "unknown impl 'triton:7'"),
    ],
    ids=[
        "not-a-tensor",
        "1-d",
        "3-d",
        "int64",
        "out-shape",
        "out-dtype",
        "out-device",
        "out-overlapping",
        "out-aliases-x",
        "unknown-impl",
    ],
)
def test_bad_input_raises(x, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        transpose(x, **kwargs)


def test_copy2d_bad_input_names_copy2d() -> None:
    with pytest.raises(ValueError, match=r"copy2d: out must have shape \(4, 6\)"):
        copy2d(_X, out=_m(6, 4))


def test_triton_needs_cuda_tensor_without_interpreter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="needs a CUDA tensor"):
        transpose(torch.ones(3, 3))


# --- the checker must reject deliberately wrong kernels -------------------------------------


def test_checker_rejects_transpose_that_ignores_input_strides() -> None:
    from fixtures.transpose_wrong import transpose_ignores_strides

    # It passes on a contiguous input: that is why the tests also feed it views.
    x = make_input(40, 24, torch.float32, DEVICE)
    assert run_checked(transpose_ignores_strides, [x], reference(x), tolerances=EXACT).ok
    base = make_input(24, 40, torch.float32, DEVICE)
    result = run_checked(
        lambda b, out: transpose_ignores_strides(b.t(), out),
        [base],
        reference(base.t()),
        tolerances=EXACT,
    )
    assert not result.ok and result.mismatches > 0, result.message


def test_checker_rejects_2d_kernel_without_column_mask() -> None:
    from fixtures.transpose_wrong import transpose_no_column_mask

    x = make_input(20, 21, torch.float32, DEVICE)  # 21 columns: 11 past the last 16-wide tile
    result = run_checked(transpose_no_column_mask, [x], reference(x), tolerances=EXACT)
    assert result.wrote_outside, result.message


def test_checker_rejects_grid_one_tile_row_short() -> None:
    from fixtures.transpose_wrong import transpose_one_tile_row_short

    x = make_input(20, 24, torch.float32, DEVICE)  # 20 rows: tile row 2 (rows 16..19) dropped
    result = run_checked(transpose_one_tile_row_short, [x], reference(x), tolerances=EXACT)
    assert result.unwritten == 4 * 24, result.message


@pytest.mark.gpu
@pytest.mark.parametrize("impl", IMPLS)
def test_gpu_large_bf16(impl: str) -> None:
    x = make_input(4097, 2049, torch.bfloat16, "cuda")
    assert torch.equal(transpose(x, impl=impl), x.t())
    assert torch.equal(transpose(x.t(), impl=impl), x)
