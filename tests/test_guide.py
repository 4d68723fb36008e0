"""The Triton guide's teaching kernels and exercise solutions, lesson by lesson, with
wrong versions that the checks must reject."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
import triton
from conftest import DEVICE, INTERPRET

from minikernel.guide import LESSON_CODE, teaching
from minikernel.guide.solutions import (
    lesson01,
    lesson02,
    lesson03,
    lesson04,
    lesson05,
    lesson06,
    lesson07,
    lesson08,
    lesson09,
    lesson10,
)
from minikernel.testing import run_checked

ROOT = Path(__file__).resolve().parents[1]
EXACT = {d: (0.0, 0.0) for d in (torch.float32, torch.float16, torch.bfloat16)}


def _randn(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g).to(dtype).to(DEVICE)


# --- every snippet a lesson includes exists -------------------------------------------------


@pytest.mark.parametrize("lesson", sorted(LESSON_CODE))
def test_lesson_snippets_exist(lesson: int) -> None:
    for path, section in LESSON_CODE[lesson]:
        text = (ROOT / path).read_text()
        for mark in ("start", "end"):
            pattern = rf"^\s*(#|//) --8<-- \[{mark}:{re.escape(section)}\]\s*$"
            assert re.search(pattern, text, re.M), f"{path} has no [{mark}:{section}]"


# --- teaching kernels -----------------------------------------------------------------------


# 10 in blocks of 4: three programs, the last with two live lanes; 8 in 4s: no tail.
@pytest.mark.parametrize(("n", "block"), [(10, 4), (8, 4), (1, 16), (1000, 128)])
def test_program_ids_show_the_grid(n: int, block: int) -> None:
    ids = teaching.program_ids(n, block, DEVICE)
    assert torch.equal(ids.cpu(), torch.arange(n, dtype=torch.int32) // block)


def test_tensor_metadata_and_addresses() -> None:
    base = torch.arange(24.0, device=DEVICE).view(4, 6)
    view = base.t()[1:, ::2]  # shape (5, 2), strides (1, 12), storage offset 1
    meta = teaching.tensor_metadata(view)
    assert meta["shape"] == (5, 2) and meta["strides"] == (1, 12)
    assert meta["storage_offset"] == 1 and not meta["contiguous"]
    assert meta["data_ptr"] == base.data_ptr() + 1 * 4
    # the address of view[i, j] holds the value base[2 j, i + 1]
    assert teaching.element_address(view, 3, 1) == base.data_ptr() + (2 * 6 + 4) * 4
    with pytest.raises(ValueError, match="need 2 indices, got 1"):
        teaching.element_address(view, 3)


def test_masked_load_fills_masked_lanes_with_other() -> None:
    x = _randn(10)
    out = teaching.masked_load(x, 4, other=-7.0)
    assert out.numel() == 12
    assert torch.equal(out[:10], x) and torch.equal(out[10:].cpu(), torch.tensor([-7.0, -7.0]))


def test_tile_ids_cover_every_element_once() -> None:
    ids = teaching.tile_ids(5, 7, 2, 4, DEVICE).cpu()
    want = (torch.arange(5)[:, None] // 2) * 2 + torch.arange(7)[None, :] // 4
    assert torch.equal(ids, want.to(torch.int32))


def test_non_power_of_two_block_is_refused_by_triton() -> None:
    with pytest.raises(Exception, match="power of 2"):
        teaching.program_ids(10, 6, DEVICE)


# --- lesson 1 ---------------------------------------------------------------------------------


def test_l1_silu_traffic() -> None:
    t = lesson01.silu_traffic(1000, torch.bfloat16)
    assert t["eager"] == {"kernels": 2, "bytes": 10000}
    assert t["fused"] == {"kernels": 1, "bytes": 4000}


@pytest.mark.parametrize("n", [1, 1025, 5000])
def test_l1_fused_silu(n: int) -> None:
    x = _randn(n, seed=n)
    ref = x.double() * torch.sigmoid(x.double())
    tol = {torch.float32: (1e-6, 1e-5)}
    run_checked(
        lambda a, out: out.copy_(lesson01.silu(a)), [x], ref, tolerances=tol
    ).raise_if_failed()


# --- lesson 2 ---------------------------------------------------------------------------------


def test_l2_environment_report() -> None:
    r = lesson02.environment_report()
    assert r["triton"] == triton.__version__ and r["torch"] == torch.__version__
    assert r["interpreter"] == INTERPRET and r["gpu_visible"] == torch.cuda.is_available()
    assert ("gpu" in r) == r["gpu_visible"]


# Round numbers for a GPU with 1000 TFLOP/s and 4000 GB/s (no real GPU's numbers).
@pytest.mark.parametrize(
    ("flops", "nbytes", "kind"),
    [
        (1000, 12_000, "launch-bound"),  # add of 1000 floats: ns of work, us of launch
        (2**28, 3 * 4 * 2**28, "memory-bound"),  # add of 2^28 floats: 3 GB, 0.27 FLOP/byte
        (2 * 8192**3, 3 * 2 * 8192**2, "compute-bound"),  # bf16 8192^3 GEMM
    ],
)
def test_l2_classify_bottleneck(flops: int, nbytes: int, kind: str) -> None:
    got = lesson02.classify_bottleneck(flops, nbytes, peak_tflops=1000, peak_GBps=4000)
    assert got == kind


# --- lesson 3 ---------------------------------------------------------------------------------


def test_l3_grid_for() -> None:
    assert lesson03.grid_for(1000003, 1024) == (977, 1000003 - 976 * 1024)
    assert lesson03.grid_for(2048, 1024) == (2, 1024)
    assert lesson03.grid_for(0, 1024) == (0, 0)
    assert lesson03.grid_for(1000003, 1024)[0] == triton.cdiv(1000003, 1024)


@pytest.mark.parametrize("n", [1, 255, 256, 257, 3001])
def test_l3_reverse(n: int) -> None:
    x = _randn(n, seed=n)
    run_checked(
        lambda a, out: out.copy_(lesson03.reverse(a)), [x], x.double().flip(0), tolerances=EXACT
    ).raise_if_failed()
    # run the kernel itself inside the guards too
    from minikernel.guide.solutions.lesson03 import reverse_kernel

    def direct(a: torch.Tensor, out: torch.Tensor) -> None:
        reverse_kernel[(triton.cdiv(n, 256),)](a, out, n, BLOCK_SIZE=256)

    run_checked(direct, [x], x.double().flip(0), tolerances=EXACT).raise_if_failed()


def test_l3_reverse_off_by_one_is_rejected() -> None:
    from fixtures.guide_wrong import reverse_off_by_one

    x = _randn(200)
    result = run_checked(reverse_off_by_one, [x], x.double().flip(0), tolerances=EXACT)
    assert result.wrote_outside and result.unwritten == 1, result.message


@pytest.mark.parametrize(("n", "k"), [(1, 1), (10, 3), (1000, 7), (513, 2)])
def test_l3_every_kth(n: int, k: int) -> None:
    x = _randn(n, seed=k)
    assert torch.equal(lesson03.every_kth(x, k), x[::k])


def test_l3_every_kth_rejects_bad_k() -> None:
    with pytest.raises(ValueError, match="k must be >= 1"):
        lesson03.every_kth(_randn(4), 0)


# --- lesson 4 ---------------------------------------------------------------------------------


@pytest.mark.parametrize("relu", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=str)
@pytest.mark.parametrize("n", [1, 1023, 1025, 4099])
def test_l4_scale_shift(n: int, dtype: torch.dtype, relu: bool) -> None:
    x = _randn(n, dtype=dtype, seed=n)
    ref = x.double() * 1.5 - 0.25
    if relu:
        ref = ref.clamp_min(0)
    run_checked(
        lambda a, out: out.copy_(lesson04.scale_shift(a, 1.5, -0.25, relu=relu)), [x], ref
    ).raise_if_failed()


def test_l4_scale_shift_without_mask_is_rejected() -> None:
    from fixtures.guide_wrong import scale_shift_nomask

    x = _randn(130)
    result = run_checked(scale_shift_nomask, [x], x.double() * 2 + 1)
    assert result.wrote_outside, result.message


@pytest.mark.parametrize(("n", "m"), [(5, 5), (5, 300), (1000, 1001), (1, 256)])
def test_l4_pad_to(n: int, m: int) -> None:
    x = _randn(n, seed=m)
    got = lesson04.pad_to(x, m, value=3.5)
    assert torch.equal(got[:n], x) and bool((got[n:] == 3.5).all()) and got.numel() == m


def test_l4_pad_to_rejects_shorter() -> None:
    with pytest.raises(ValueError, match="m=3 is shorter than x"):
        lesson04.pad_to(_randn(5), 3)


@pytest.mark.parametrize("n", [1, 3, 1000, 16384])
def test_l4_sum_one_block(n: int) -> None:
    x = _randn(n, seed=n)
    assert torch.allclose(lesson04.sum_one_block(x).double(), x.double().sum(), atol=1e-3)


def test_l4_sum_one_block_rejects_long_input() -> None:
    with pytest.raises(ValueError, match="need 1 to 16384 elements, got 16385"):
        lesson04.sum_one_block(torch.zeros(16385, device=DEVICE))


# --- lesson 5 ---------------------------------------------------------------------------------


def _axpy_inputs(n: int, dtype: torch.dtype) -> list[torch.Tensor]:
    return [_randn(n, dtype=dtype, seed=n), _randn(n, dtype=dtype, seed=n + 1)]


def _axpy_ref(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return 0.5 * x.double() + y.double()


def test_l5_axpy_passes_the_validation_protocol() -> None:
    failures = lesson05.validate(
        lambda x, y, out: out.copy_(lesson05.axpy(0.5, x, y)), _axpy_ref, _axpy_inputs
    )
    assert failures == []


def test_l5_validation_protocol_catches_a_missing_mask() -> None:
    from fixtures.wrong_kernels import vector_add_nomask

    def add_ref(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x.double() + y.double()

    failures = lesson05.validate(
        vector_add_nomask, add_ref, _axpy_inputs, dtypes=(torch.float32,), sizes=(1, 128, 129)
    )
    # 128 is a whole block and passes; 1 and 129 write past the end
    assert len(failures) == 2 and all("wrote outside" in f for f in failures)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("2", _randn(4), _randn(4)), TypeError, "alpha must be a Python number"),
        ((2.0, _randn(4), _randn(5)), ValueError, r"x has shape \(4,\) but y has \(5,\)"),
        ((2.0, _randn(4), _randn(4, dtype=torch.float16)), TypeError, "y has float16"),
        ((2.0, _randn(4, 4).t(), _randn(4, 4)), ValueError, "x must be contiguous"),
        ((2.0, _randn(4).long(), _randn(4)), TypeError, "x has dtype int64"),
    ],
    ids=["alpha-str", "shape", "dtype", "non-contiguous", "int64"],
)
def test_l5_axpy_bad_input(args: tuple, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        lesson05.axpy(*args)


# --- lesson 6 ---------------------------------------------------------------------------------


def test_l6_roofline() -> None:
    ridge = lesson06.ridge_point(peak_tflops=1000, peak_GBps=4000)
    assert ridge == pytest.approx(250.0)
    assert lesson06.attainable_tflops(1 / 12, peak_tflops=1000, peak_GBps=4000) == pytest.approx(
        4000 / 12 / 1000
    )
    assert lesson06.attainable_tflops(1000, peak_tflops=1000, peak_GBps=4000) == 1000


def test_l6_latency_hiding() -> None:
    assert lesson06.bytes_in_flight(4000, 600) == pytest.approx(2.4e6)
    warps = lesson06.warps_to_hide_latency(4000, 600, sms=100, bytes_per_lane=16)
    assert warps == pytest.approx(2.4e6 / 100 / 512)
    # two loads in flight per warp halve the warps needed
    assert lesson06.warps_to_hide_latency(4000, 600, sms=100, loads=2) == pytest.approx(warps / 2)


@pytest.mark.parametrize(
    ("warps", "regs", "smem", "blocks", "limiter"),
    [
        (4, 32, 0, 16, "warps"),  # 64 warps / 4
        (4, 128, 0, 4, "registers"),  # 128 x 32 = 4096 per warp, 16 warps fit
        (1, 16, 0, 32, "blocks"),  # tiny blocks: the 32-block cap binds first
        (4, 32, 64 * 1024, 3, "shared memory"),  # 228 KB / 64 KB
        # 33 x 32 = 1056 registers per warp, allocated as 1280; 65536 / (1280 x 8) = 6.4 blocks
        (8, 33, 0, 6, "registers"),
    ],
)
def test_l6_occupancy(warps: int, regs: int, smem: int, blocks: int, limiter: str) -> None:
    occ = lesson06.occupancy(warps, regs, smem)
    assert occ["blocks_per_sm"] == blocks and occ["limited_by"] == limiter
    assert occ["warps_per_sm"] == blocks * warps
    assert occ["occupancy"] == pytest.approx(blocks * warps / 64)


def test_l6_bench_protocol_warms_up_syncs_and_times() -> None:
    calls = {"fn": 0, "sync": 0}
    now = [0.0]

    def fn() -> None:
        calls["fn"] += 1

    def sync() -> None:
        calls["sync"] += 1
        now[0] += 1e-3 * calls["fn"]  # "work" finishes at sync; later calls take longer

    stats = lesson06.bench(fn, sync=sync, warmup=3, rep=10, clock=lambda: now[0])
    assert calls == {"fn": 13, "sync": 11}  # one sync after warm-up, one per timed call
    # timed call i (1-based) took (3 + i) ms: 4 ... 13 ms
    assert stats["median"] == pytest.approx(8.5e-3)
    assert stats["p20"] <= stats["median"] <= stats["p80"]


# --- lesson 7 ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "make_view",
    [
        lambda b: b,
        lambda b: b.t(),
        lambda b: b[1::2, ::3],
        lambda b: b.t()[2:, 1::2],
        lambda b: b[3:4, :].expand(5, 12),
    ],
    ids=["contiguous", "transposed", "step-slice", "transposed-step", "expanded"],
)
def test_l7_view_offsets(make_view) -> None:  # type: ignore[no-untyped-def]
    base = torch.arange(96.0).view(8, 12)
    view = make_view(base)
    offsets = lesson07.view_offsets(view)
    assert torch.equal(base.flatten()[offsets], view)


@pytest.mark.parametrize("target", ["contiguous", "transposed", "step-slice"])
def test_l7_scale2d_into_strided_output(target: str) -> None:
    x = _randn(37, 70, seed=3)
    nan = float("nan")
    buffers = {
        "contiguous": torch.full((37, 70), nan, device=DEVICE),
        "transposed": torch.full((70, 37), nan, device=DEVICE),
        "step-slice": torch.full((75, 210), nan, device=DEVICE),
    }
    buf = buffers[target]
    out = {"contiguous": buf, "transposed": buf.t(), "step-slice": buf[1::2, ::3]}[target]
    lesson07.scale2d(x, -2.0, out)
    assert torch.equal(out, x * -2.0)
    assert int((~torch.isnan(buf)).sum()) == x.numel()


def test_l7_scale2d_on_transposed_input_and_bad_shapes() -> None:
    base = _randn(70, 37)
    run_checked(
        lambda b, out: lesson07.scale2d(b.t(), 3.0, out), [base], base.double().t() * 3.0
    ).raise_if_failed()
    with pytest.raises(ValueError, match="need 2-D x and out of one shape"):
        lesson07.scale2d(base, 1.0, base.t())


def test_l7_2d_kernel_without_column_mask_is_rejected() -> None:
    from fixtures.guide_wrong import scale2d_no_column_mask

    x = _randn(20, 40)  # 40 columns: 24 past the last 32-wide tile
    result = run_checked(scale2d_no_column_mask, [x], x.double() * 2.0)
    assert result.wrote_outside, result.message


@pytest.mark.parametrize("shape", [(1, 1), (17, 65), (40, 3)], ids=str)
def test_l7_add_row_bias(shape: tuple[int, int]) -> None:
    m, n = shape
    base, b = _randn(n, m, seed=m), _randn(3 * m, seed=n)
    x, bias = base.t(), b[::3]  # strided on both
    ref = x.double() + bias.double()[:, None]
    run_checked(
        lambda xb, bb, out: out.copy_(lesson07.add_row_bias(xb.t(), bb[::3])), [base, b], ref
    ).raise_if_failed()
    with pytest.raises(ValueError, match="need x"):
        lesson07.add_row_bias(x, bias[:-1] if m > 1 else _randn(2))


# --- lesson 8 ---------------------------------------------------------------------------------


# (3, 1): one column. (5, 1000): a row fits one 1024 block with a masked tail. (4, 17):
# narrow. Rows are shifted negative so a wrong `other=0` would win.
@pytest.mark.parametrize("shape", [(3, 1), (5, 1000), (4, 17)], ids=str)
@pytest.mark.parametrize("fn", ["row_max", "row_max_looped"])
def test_l8_row_max(fn: str, shape: tuple[int, int]) -> None:
    m, n = shape
    base = _randn(m, 2 * n, seed=n) - 10.0  # every value negative
    x = base[:, ::2]  # strided columns
    got = getattr(lesson08, fn)(x)
    assert torch.equal(got, x.max(dim=1).values)


def test_l8_row_max_looped_over_several_chunks() -> None:
    x = _randn(3, 3 * 64 + 1, seed=2) - 5.0
    assert torch.equal(lesson08.row_max_looped(x, block_n=64), x.max(dim=1).values)


def test_l8_row_max_refuses_rows_too_wide() -> None:
    with pytest.raises(ValueError, match="use row_max_looped"):
        lesson08.row_max(torch.zeros(1, 16385, device=DEVICE))


def test_l8_row_max_padding_with_zero_is_rejected() -> None:
    from fixtures.guide_wrong import row_max_pad_zero

    x = _randn(4, 100) - 10.0
    result = run_checked(row_max_pad_zero, [x], x.double().max(dim=1).values, tolerances=EXACT)
    assert result.mismatches == 4, result.message


def test_l8_softmax_overflow_demo() -> None:
    d = lesson08.softmax_overflow_demo(torch.float16)
    assert torch.isnan(d["naive"]).any()
    want = torch.softmax(torch.tensor([10.0, 11.0, 12.0], dtype=torch.float64), 0)
    assert torch.allclose(d["stable"].double(), want, atol=1e-3)
    d32 = lesson08.softmax_overflow_demo(torch.float32)
    assert not torch.isnan(d32["naive"]).any()  # 12 is harmless in fp32 (limit: ~88.7)


# --- lesson 9 ---------------------------------------------------------------------------------


def test_l9_gemm_tile_traffic() -> None:
    small = lesson09.gemm_tile_traffic(4096, 4096, 4096, 32, 32)
    big = lesson09.gemm_tile_traffic(4096, 4096, 4096, 128, 256)
    assert small["programs"] == 128 * 128 and big["programs"] == 32 * 16
    # A re-read 4096/32 = 128 times with 32-wide tiles, 16 times with 256-wide ones
    assert small["bytes"] == (4096**2 * 128 + 4096**2 * 128 + 4096**2) * 2
    assert big["intensity"] > small["intensity"] * 5


# (1, 1, 1): everything masked but one element. (33, 40, 50): partial tiles on every side,
# four K steps. (16, 16, 16): exactly one tile.
@pytest.mark.parametrize("mnk", [(1, 1, 1), (33, 40, 50), (16, 16, 16)], ids=str)
def test_l9_linear_bias_relu(mnk: tuple[int, int, int]) -> None:
    m, n, k = mnk
    x, w, b = _randn(m, k, seed=1), _randn(k, n, seed=2), _randn(n, seed=3)
    ref = torch.relu(x.double() @ w.double() + b.double())
    run_checked(
        lambda xx, ww, bb, out: out.copy_(lesson09.linear_bias_relu(xx, ww, bb)),
        [x, w, b],
        ref,
        tolerances={torch.float32: (1e-5, 1e-4)},  # a K-long fp32 sum
    ).raise_if_failed()


def test_l9_linear_bias_relu_strided_weight_and_bad_input() -> None:
    x, wt, b = _randn(20, 30, seed=1), _randn(24, 30, seed=2), _randn(24, seed=3)
    got = lesson09.linear_bias_relu(x, wt.t(), b)  # w as a transposed view
    assert torch.allclose(got, torch.relu(x @ wt.t() + b), atol=1e-5)
    with pytest.raises(ValueError, match="mismatch"):
        lesson09.linear_bias_relu(x, wt, b)
    with pytest.raises(TypeError, match="float32"):
        lesson09.linear_bias_relu(x.half(), wt.t().half(), b.half())


def test_l9_epilogue_fusion_savings() -> None:
    s = lesson09.epilogue_fusion_savings(4096, 4096, element_size=2)
    assert s["unfused"] == (4 * 4096 * 4096 + 4096) * 2 and s["fused"] == 4096 * 2
    assert s["saved"] == 4 * 4096 * 4096 * 2


# --- lesson 10 --------------------------------------------------------------------------------


def test_l10_autotune_search_space() -> None:
    configs = lesson10.copy_autotune_configs(interpret=False)
    pairs = [(c.kwargs["BLOCK_SIZE"], c.num_warps) for c in configs]
    assert len(pairs) == len(set(pairs)) > 1
    for block, warps in pairs:
        assert block & (block - 1) == 0
        assert 4 <= block // (32 * warps) <= 64
    assert len(lesson10.copy_autotune_configs(interpret=True)) == 1


@pytest.mark.parametrize("n", [1, 1000, 5001])
def test_l10_autotuned_copy(n: int) -> None:
    x = _randn(n, seed=n)
    run_checked(
        lambda a, out: lesson10.autotuned_copy(a, out), [x], x.double(), tolerances=EXACT
    ).raise_if_failed()


def test_l10_debug_ladder_passes_a_right_kernel() -> None:
    from minikernel.kernels.copy import copy

    rungs = lesson10.debug_ladder(lambda x, out: copy(x, out=out), 1024, device=DEVICE)
    assert [ok for _, ok, _ in rungs] == [True] * 4


def test_l10_debug_ladder_stops_at_the_first_failing_rung() -> None:
    from fixtures.copy_wrong import copy_nomask, copy_one_block_short

    rungs = lesson10.debug_ladder(copy_nomask, 128, device=DEVICE)
    assert [(name, ok) for name, ok, _ in rungs] == [("one element", False)]
    rungs = lesson10.debug_ladder(copy_one_block_short, 128, device=DEVICE)
    assert [(name, ok) for name, ok, _ in rungs] == [
        ("one element", True),
        ("one block", True),
        ("one past a block", False),
    ]
    assert "unwritten" in rungs[-1][2]
