"""RMSNorm: every forward rung and the backward against the fp64 reference (and its autograd),
the drop-in module, bad input, and wrong-kernel fixtures the checker must reject."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE, HAS_GPU, INTERPRET, compiled

from minikernel.kernels.rmsnorm import (
    VARIANTS,
    RMSNorm,
    bwd_bytes,
    fwd_bytes,
    make_inputs,
    reference,
    reference_grads,
    rms_norm,
    rmsnorm_backward,
)
from minikernel.kernels.rmsnorm.triton_kernels import KERNEL1_MAX_N, MAX_REGISTER_ROW, fwd_config
from minikernel.testing import run_checked

EPS = 1e-6
DTYPES = [torch.float32, torch.float16, torch.bfloat16]

# (M, N), each there to break something:
SHAPES = [
    (3, 1),  # one element per row: rstd is 1/|x|, the block is all mask but one lane
    (5, 127),  # one short of a power of two, odd: a partial 16-byte vector, masked tail
    (37, 64),  # short rows packed 64 per program, the only program partly empty
    (130, 100),  # several packed programs, the last one with 2 rows of 32
    (9, 1000),  # a 1024 block, rows packed 2 or 4 to a program with x kept in registers
    (7, 1500),  # a 2048 block, 2 rows a program, x loaded twice (RELOAD), last program half empty
    (4, 4097),  # one past 4096: an 8192 block with the tail almost all masked
    (2, MAX_REGISTER_ROW + 1),  # a 32768 block: whole rows from the measured table, not tiles
    (2, 2 * MAX_REGISTER_ROW + 1),  # fp32: the first length walked in tiles, partial last tile
    (2, KERNEL1_MAX_N + 1),  # past what kernel1 takes: long rows, kernel2 only
]
# Forward: one rounding of a result computed in fp32 from a sum of N squares.
FWD_TOL = {
    torch.float32: (1e-5, 1e-5),
    torch.float16: (1e-3, 1e-3),
    torch.bfloat16: (1e-2, 8e-3),
}
# Backward, relative to the size of the gradient: dx = rstd * (g - xhat * mean(g * xhat))
# subtracts two terms of similar size, and dw sums M products.
BWD_RTOL = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}


def _skip_reason(impl: str, dtype: torch.dtype, n: int = 1) -> str | None:
    if impl.startswith("cuda:") and not HAS_GPU:
        return "CUDA C kernels need a GPU (they are compile-checked in test_cuda_compile.py)"
    if INTERPRET and dtype == torch.bfloat16:
        return "Triton's interpreter computes bf16 wrong (NaN); bf16 is tested on the GPU"
    if impl == "triton:1" and n > KERNEL1_MAX_N:
        return "triton:1 refuses rows this long (tested in test_kernel1_refuses_long_rows)"
    return None


def _device(impl: str) -> str:
    return "cuda" if impl.startswith("cuda:") else DEVICE


def _weights(dtype: torch.dtype) -> list[str]:
    return ["same", "fp32", "none"] if dtype != torch.float32 else ["same", "none"]


def _pick_weight(w: torch.Tensor, x_dtype: torch.dtype, kind: str) -> torch.Tensor | None:
    if kind == "none":
        return None
    return w.to(torch.float32 if kind == "fp32" else x_dtype)


# --- forward --------------------------------------------------------------------------------


@pytest.mark.parametrize("wkind", ["same", "fp32", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("impl", sorted(VARIANTS))
def test_forward_matches_reference(
    impl: str, shape: tuple[int, int], dtype: torch.dtype, wkind: str
) -> None:
    m, n = shape
    if (why := _skip_reason(impl, dtype, n)) is not None:
        pytest.skip(why)
    if wkind not in _weights(dtype):
        pytest.skip("an fp32 weight on fp32 input is the 'same' case")
    x, w = make_inputs(m, n, dtype, _device(impl), seed=m * n)
    w = _pick_weight(w, dtype, wkind)
    fn = VARIANTS[impl].fn
    inputs = [x] if w is None else [x, w]
    kernel = (lambda a, o: fn(a, None, o, EPS)) if w is None else (lambda a, b, o: fn(a, b, o, EPS))
    run_checked(
        kernel, inputs, reference(x, w, EPS), tolerances=FWD_TOL, name=impl
    ).raise_if_failed()


def test_forward_shapes_cover_every_kernel2_path() -> None:
    """kernel2 keeps a whole row in registers, loads it twice (RELOAD) or walks it in tiles,
    by row length and element size (fwd_config): SHAPES must run all three in both sizes."""
    for size in (2, 4):
        paths = {(c.tiled, c.reload) for c in (fwd_config(n, size) for _, n in SHAPES)}
        assert paths == {(False, False), (False, True), (True, False)}, (size, paths)


def test_kernel1_refuses_long_rows() -> None:
    x, w = make_inputs(1, KERNEL1_MAX_N + 1, torch.float32, DEVICE)
    with pytest.raises(ValueError, match="triton:1 keeps the whole row in one block"):
        rms_norm(x, (x.shape[1],), w, EPS, impl="triton:1")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [65536, 131072])
@pytest.mark.parametrize("impl", sorted(VARIANTS))
def test_forward_long_rows_bf16_on_gpu(impl: str, n: int) -> None:
    """The lab's longest rows, in bf16, on a real GPU (kernel2's tiled path, CUDA's fallback)."""
    if impl == "triton:1" and n > KERNEL1_MAX_N:
        pytest.skip("triton:1 refuses rows this long")
    x, w = make_inputs(8, n, torch.bfloat16, "cuda", seed=n)
    fn = VARIANTS[impl].fn
    run_checked(
        lambda a, b, o: fn(a, b, o, EPS), [x, w], reference(x, w, EPS), tolerances=FWD_TOL
    ).raise_if_failed()


# --- backward -------------------------------------------------------------------------------

BWD_SHAPES = [
    (3, 1),  # dx is tiny here (x/|x| barely depends on x): tests the cancellation
    (5, 127),
    (130, 100),  # several programs, each with its own dweight partial, and a partial last one
    (4, 4097),  # the largest tile that prefetches the next rows
    (3, 10000),  # a single tile too big to prefetch (PREFETCH off)
    (3, MAX_REGISTER_ROW + 1),  # long rows: the row-reduction + column-block kernels
]


def _close(got: torch.Tensor, want: torch.Tensor, scale: float, rtol: float, what: str) -> None:
    err = float((got.double() - want).abs().max())
    assert err <= rtol * scale, f"{what}: max abs err {err:.3g} > {rtol:g} x scale {scale:.3g}"


def _grad_scale(x: torch.Tensor, w: torch.Tensor | None, dy: torch.Tensor) -> float:
    """The natural size of dx: rstd * |dy * w| (each of its two terms is about that big)."""
    w64 = torch.ones(x.shape[-1], dtype=torch.float64) if w is None else w.double().cpu()
    rstd = torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + EPS).cpu()
    return float((dy.double().cpu().abs() * w64.abs() * rstd).max())


def _check_grads(xg, wg, x, w, dy, dtype) -> torch.Tensor:  # type: ignore[no-untyped-def]
    """xg.grad and wg.grad against autograd of the fp64 reference; returns the reference dx."""
    dx_ref, dw_ref = reference_grads(x, w, dy, EPS)
    rtol = BWD_RTOL[dtype]
    _close(xg.grad, dx_ref, _grad_scale(x, w, dy), rtol, "dx")
    assert xg.grad.dtype == dtype
    if w is not None:
        assert wg.grad.dtype == w.dtype
        # dw sums M products of size |dy * xhat|: compare against that sum's size
        _close(wg.grad, dw_ref, float(dw_ref.abs().max()) + 1.0, rtol, "dw")
    return dx_ref


@pytest.mark.parametrize("wkind", ["same", "fp32", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", BWD_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_backward_matches_autograd_of_reference(
    shape: tuple[int, int], dtype: torch.dtype, wkind: str
) -> None:
    m, n = shape
    if (why := _skip_reason("triton:2", dtype)) is not None:
        pytest.skip(why)
    if wkind not in _weights(dtype):
        pytest.skip("an fp32 weight on fp32 input is the 'same' case")
    x, w, dy = make_inputs(m, n, dtype, DEVICE, seed=7 + n, with_grad_out=True)
    w = _pick_weight(w, dtype, wkind)
    xg = x.clone().requires_grad_(True)
    wg = None if w is None else w.clone().requires_grad_(True)
    y = rms_norm(xg, (n,), wg, EPS)
    y.backward(dy)
    _check_grads(xg, wg, x, w, dy, dtype)


def test_backward_dweight_is_deterministic() -> None:
    x, w, dy = make_inputs(130, 300, torch.float32, DEVICE, seed=3, with_grad_out=True)
    y = rms_norm(x, (300,), w, EPS)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + EPS)
    first = rmsnorm_backward(dy, x, w, rstd)
    for _ in range(2):
        again = rmsnorm_backward(dy, x, w, rstd)
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert y.shape == x.shape


def test_backward_checked_for_writes_outside_dx() -> None:
    """dx through run_checked: no write past its end, no element left unwritten."""
    m, n = 37, 200
    x, w, dy = make_inputs(m, n, torch.float32, DEVICE, seed=11, with_grad_out=True)
    dx_ref, _ = reference_grads(x, w, dy, EPS)

    def backward_into(xx: torch.Tensor, ww: torch.Tensor, d: torch.Tensor, out: torch.Tensor):
        from minikernel.kernels.rmsnorm.triton_kernels import launch_backward

        rstd = torch.rsqrt(xx.pow(2).mean(-1) + EPS)
        launch_backward(d, xx, ww, rstd, out)
        return out

    run_checked(
        backward_into, [x, w, dy], dx_ref, tolerances={torch.float32: (1e-5, 1e-4)}
    ).raise_if_failed()


# --- the module -----------------------------------------------------------------------------


def test_module_is_a_drop_in_for_torch_rmsnorm() -> None:
    torch.manual_seed(0)
    ours = RMSNorm((4, 8), eps=1e-5)
    theirs = torch.nn.RMSNorm((4, 8), eps=1e-5)
    assert isinstance(ours, torch.nn.RMSNorm)
    with torch.no_grad():
        theirs.weight.uniform_(0.5, 1.5)
    ours.load_state_dict(theirs.state_dict())  # same parameter names and shapes
    assert repr(ours) == repr(theirs)
    x = torch.randn(3, 5, 4, 8, device=DEVICE) + 0.5
    ours, theirs = ours.to(DEVICE), theirs.to(DEVICE)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("affine", [True, False])
def test_module_default_eps_and_gradients(affine: bool) -> None:
    ours = RMSNorm(33, elementwise_affine=affine).to(DEVICE)
    theirs = torch.nn.RMSNorm(33, elementwise_affine=affine).to(DEVICE)
    assert ours.eps is None  # None means torch.finfo(x.dtype).eps, as in PyTorch
    x = torch.randn(6, 33, device=DEVICE)
    x1, x2 = x.clone().requires_grad_(), x.clone().requires_grad_()
    y1, y2 = ours(x1), theirs(x2)
    torch.testing.assert_close(y1, y2, atol=1e-5, rtol=1e-5)
    g = torch.randn_like(y1)
    y1.backward(g)
    y2.backward(g)
    torch.testing.assert_close(x1.grad, x2.grad, atol=1e-5, rtol=1e-4)
    if affine:
        torch.testing.assert_close(ours.weight.grad, theirs.weight.grad, atol=1e-5, rtol=1e-4)


def test_module_mixed_dtypes_follow_torch() -> None:
    """An fp16 input with the module's fp32 weight: the output keeps the input's dtype, as
    torch.nn.RMSNorm does."""
    ours = RMSNorm(64, eps=EPS).to(DEVICE)
    x = (torch.randn(4, 64) + 0.5).to(DEVICE, torch.float16)
    y = ours(x)
    assert y.dtype == torch.float16
    torch.testing.assert_close(
        y.double(), reference(x, ours.weight.detach(), EPS), atol=1e-3, rtol=1e-3
    )


def test_module_falls_back_to_torch_for_what_the_kernels_do_not_take() -> None:
    ours = RMSNorm(16, dtype=torch.float64, device=DEVICE)
    x = torch.randn(3, 16, dtype=torch.float64, device=DEVICE)
    torch.testing.assert_close(ours(x), F.rms_norm(x, (16,), ours.weight))
    x_t = torch.randn(16, 3, device=DEVICE).t()  # non-contiguous: made contiguous, then ours
    ours32 = RMSNorm(16).to(DEVICE)
    torch.testing.assert_close(ours32(x_t), F.rms_norm(x_t, (16,), ours32.weight))


# --- bad input ------------------------------------------------------------------------------


def _x(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.ones(*shape, dtype=dtype, device=DEVICE)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([1.0], (1,)), {}, TypeError, "x must be a torch.Tensor"),
        ((_x(4, 8, dtype=torch.float64), (8,)), {}, TypeError, "x has dtype float64"),
        ((torch.ones(8, 4, device=DEVICE).t(), (8,)), {}, ValueError, "x must be contiguous"),
        ((_x(4, 8), (7,)), {}, ValueError, r"normalized_shape \(7,\) must match"),
        ((_x(4, 8), (8,), _x(7)), {}, ValueError, r"weight has shape \(7,\)"),
        (
            (_x(4, 8, dtype=torch.float16), (8,), _x(8, dtype=torch.bfloat16)),
            {},
            TypeError,
            "weight has dtype bfloat16; it must be x's dtype",
        ),
        ((_x(4, 8), (8,), None, -1.0), {}, ValueError, "eps must be >= 0"),
        ((_x(4, 8), (8,)), {"impl": "triton:9"}, ValueError, "unknown impl 'triton:9'"),
    ],
    ids=[
        "not-a-tensor",
        "float64",
        "non-contiguous",
        "shape-mismatch",
        "weight-shape",
        "weight-dtype",
        "negative-eps",
        "unknown-impl",
    ],
)
def test_bad_input_raises(args, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        rms_norm(*args, **kwargs)


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_cuda_impl_on_cpu_tensors_is_refused() -> None:
    with pytest.raises(ValueError, match="impl 'cuda:2' runs on a CUDA GPU"):
        rms_norm(_x(2, 8), (8,), impl="cuda:2")


def test_empty_input_returns_empty() -> None:
    assert rms_norm(_x(0, 8), (8,)).shape == (0, 8)


def test_byte_models() -> None:
    assert fwd_bytes(4, 1024, torch.bfloat16, torch.bfloat16) == 2 * 4 * 1024 * 2 + 1024 * 2
    assert fwd_bytes(4, 1024, torch.float32) == 2 * 4 * 1024 * 4
    assert bwd_bytes(4, 1024, torch.bfloat16, torch.float32) == 3 * 4 * 1024 * 2 + 2 * 1024 * 4


# --- the checker must reject deliberately wrong kernels -------------------------------------


def test_checker_rejects_kernel_without_mask() -> None:
    from fixtures.rmsnorm_wrong import rmsnorm_nomask

    x, w = make_inputs(5, 100, torch.float32, DEVICE)  # 100: a 128 block, 28 lanes past the row
    result = run_checked(rmsnorm_nomask, [x, w], reference(x, w, EPS), tolerances=FWD_TOL)
    assert not result.ok
    assert result.wrote_outside, result.message


def test_checker_rejects_layernorm_instead_of_rmsnorm() -> None:
    from fixtures.rmsnorm_wrong import rmsnorm_as_layernorm

    x, w = make_inputs(5, 100, torch.float32, DEVICE)  # inputs centred on 0.5, not 0
    result = run_checked(rmsnorm_as_layernorm, [x, w], reference(x, w, EPS), tolerances=FWD_TOL)
    assert not result.ok and result.mismatches > 0 and not result.wrote_outside


def test_checker_rejects_rows_left_unwritten() -> None:
    from fixtures.rmsnorm_wrong import rmsnorm_rows_short

    x, w = make_inputs(7, 32, torch.float32, DEVICE)  # 7 rows, 4 per program: 3 never written
    result = run_checked(rmsnorm_rows_short, [x, w], reference(x, w, EPS), tolerances=FWD_TOL)
    assert not result.ok
    assert result.unwritten == 3 * 32, result.message


# --- cuda:3 planning, on the CPU ---------------------------------------------------------------


def test_cuda3_plan_and_kernels() -> None:
    """Rung 3 cuts rows into cluster slices (slices.py); every kernel it plans exists, and GPUs
    without clusters get None (kernel 2 runs)."""
    from minikernel.kernels.rmsnorm import CU_FILE, plan3

    sp = plan3(32768, 131072, torch.bfloat16, 232448, (9, 0))
    assert (sp.cluster, sp.per_block, sp.threads) == (8, 2048, 256)  # eight 32 KB slices
    sp = plan3(32768, 32768, torch.bfloat16, 232448, (9, 0))
    assert (sp.cluster, sp.per_block, sp.threads) == (1, 4096, 512)  # 64 KB: one block
    sp = plan3(32768, 4096, torch.bfloat16, 232448, (9, 0))
    assert (sp.cluster, sp.per_block, sp.threads) == (1, 512, 256)  # two vectors per thread
    sp = plan3(4, 131072, torch.float32, 232448, (9, 0))
    assert (sp.cluster, sp.per_block, sp.threads) == (8, 4096, 512)  # past 8 x 32 KB
    assert plan3(4, 131072, torch.bfloat16, 232448, (8, 0)) is None
    names = {n for n in compiled(CU_FILE, "sm_90").kernel_names if "kernel3" in n}
    planned = set()
    for n in (8, 1024, 2048, 4096, 8192, 24000, 32768, 40000, 65536, 131072, 262144, 400000):
        for dtype in (torch.float32, torch.bfloat16):
            sp = plan3(4, n, dtype, 232448, (9, 0))
            suffix = "f32" if dtype == torch.float32 else "bf16"
            for w in ("", "_wf32"):
                planned.add(f"rmsnorm_kernel3_t{sp.threads}_c{sp.cluster}_{suffix}{w}")
    names = {n for n in names if n.endswith(("_f32", "_bf16", "_f32_wf32", "_bf16_wf32"))}
    assert planned <= names, sorted(planned - names)
    assert planned == names, sorted(names - planned)  # none is unreachable


# --- cuda:4 planning, on the CPU; its cluster shapes on the GPU ---------------------------------


def test_cuda4_plan_and_kernels() -> None:
    """Rung 4 holds 32 KB of a row per block of 512 threads over clusters of 2 to 8, then 64 KB
    per block of 1024 over 8 or 16; rows that fit one block, rows past 1 MB and GPUs without
    clusters get None (rung 3 runs). Every kernel it plans exists, and none is unreachable."""
    from minikernel.kernels.rmsnorm import CU_FILE, plan4

    def shape(m: int, n: int, dtype: torch.dtype) -> tuple[int, int, int]:
        sp = plan4(m, n, dtype, (9, 0))
        return (sp.cluster, sp.per_block, sp.threads)

    assert shape(16384, 16384, torch.float32) == (2, 2048, 512)
    assert shape(16384, 16388, torch.float32) == (4, 1025, 512)  # one vector past two blocks
    assert shape(32768, 131072, torch.bfloat16) == (8, 2048, 512)  # eight 32 KB slices
    assert shape(16384, 65540, torch.float32) == (8, 2049, 1024)  # one past: 64 KB blocks
    assert shape(16384, 131072, torch.float32) == (8, 4096, 1024)  # eight 64 KB slices
    assert shape(4, 131076, torch.float32) == (16, 2049, 1024)  # non-portable: sixteen
    assert shape(4, 262144, torch.float32) == (16, 4096, 1024)  # 1 MB, the longest
    assert plan4(16384, 8192, torch.float32, (9, 0)) is None  # one block's 32 KB: rung 3
    assert plan4(16384, 16384, torch.bfloat16, (9, 0)) is None  # the same 32 KB in 16-bit
    assert plan4(4, 262148, torch.float32, (9, 0)) is None  # past 1 MB
    assert plan4(4, 524296, torch.float16, (9, 0)) is None
    assert plan4(4, 65536, torch.float32, (8, 0)) is None  # no clusters before sm_90
    names = {n for n in compiled(CU_FILE, "sm_90").kernel_names if "kernel4" in n}
    planned = set()
    for dtype, suffix in ((torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16")):
        for n in (16384, 16392, 32776, 65536, 131072, 131080, 262144, 262160, 524288):
            sp = plan4(4, n, dtype, (9, 0))
            if sp is not None:
                for w in ("", "_wf32"):
                    planned.add(f"rmsnorm_kernel4_t{sp.threads}_c{sp.cluster}_{suffix}{w}")
    assert planned == names, (sorted(planned - names), sorted(names - planned))


def _check_cluster_rung(
    impl: str, dtype: torch.dtype, n: int, same_bits_as: str | None = None
) -> None:
    """A cluster rung on six rows of n: against the reference through the checker (which also
    catches writes outside y), with each kind of weight, bit for bit against `same_bits_as` if
    given, and its rstd (what the backward reads)."""
    from minikernel.cuda import clusters_available

    x, w = make_inputs(6, n, dtype, "cuda", seed=n)
    if not clusters_available(x.device):
        pytest.skip(f"{impl} runs rung 3 (and its fallbacks) without clusters")
    fn = VARIANTS[impl].fn
    for wkind in _weights(dtype):
        weight = _pick_weight(w, dtype, wkind)
        inputs = [x] if weight is None else [x, weight]
        kernel = (
            (lambda a, o: fn(a, None, o, EPS))
            if weight is None
            else (lambda a, b, o: fn(a, b, o, EPS))
        )
        run_checked(
            kernel, inputs, reference(x, weight, EPS), tolerances=FWD_TOL, name=impl
        ).raise_if_failed()
        if same_bits_as is not None:
            got, want = torch.empty_like(x), torch.empty_like(x)
            fn(x, weight, got, EPS)
            VARIANTS[same_bits_as].fn(x, weight, want, EPS)
            assert torch.equal(got, want), f"{impl} and {same_bits_as} differ with weight {wkind}"
    rstd = torch.full((6,), float("nan"), device="cuda")
    fn(x, w, torch.empty_like(x), EPS, rstd)
    want = torch.rsqrt(x.double().pow(2).mean(1) + EPS)
    torch.testing.assert_close(rstd.double(), want, rtol=1e-5, atol=0)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("dtype", "n"),
    [
        (torch.float32, 8196),  # two blocks, the second one vector short
        (torch.float32, 16388),  # four blocks, the last one 1022 vectors
        (torch.float32, 65536),  # eight full blocks of 512 threads
        (torch.float32, 131072),  # eight full blocks of 1024 threads (64 KB each)
        (torch.float32, 131076),  # sixteen of 1024: the non-portable cluster size
        (torch.float32, 262148),  # past 1 MB: rung 3 runs (eight 128 KB slices)
        (torch.bfloat16, 16392),  # 16-bit: two blocks, the second one vector short
        (torch.bfloat16, 65536),  # four full blocks
        (torch.float16, 262144),  # eight of 1024 threads
        (torch.bfloat16, 262160),  # sixteen of 1024 threads
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_cuda4_long_rows_on_gpu(dtype: torch.dtype, n: int) -> None:
    """Rung 4's clusters against the reference, with each kind of weight, and its rstd."""
    _check_cluster_rung("cuda:4", dtype, n)


# --- cuda:5: rung 4 with fewer instructions, on whole slices ------------------------------------


def test_cuda5_plan_and_kernels() -> None:
    """Rung 5 runs where rung 4's slices are whole (every thread holds four vectors) and there
    is a weight; a slice cut short, no weight, a row that is not whole vectors, or no rung-4
    plan leave the row to rung 4 (None). Every kernel it plans exists, and none is unreachable."""
    from minikernel.kernels.rmsnorm import CU_FILE, plan4, plan5

    bf, f32 = torch.bfloat16, torch.float32
    for m, n, dtype in (
        (32768, 32768, bf),
        (32768, 65536, bf),
        (32768, 131072, bf),
        (16384, 65536, f32),
        (16384, 131072, f32),
        (4, 262144, f32),
    ):
        assert plan5(m, n, dtype, (9, 0), True) == plan4(m, n, dtype, (9, 0)), (n, dtype)
    assert plan5(16384, 16388, f32, (9, 0), True) is None  # the last slice 1022 vectors short
    assert plan5(16384, 65540, f32, (9, 0), True) is None  # 2049 vectors a block
    assert plan5(16384, 49152, f32, (9, 0), True) is None  # 8 blocks of 1536 vectors
    assert plan5(32768, 65536, bf, (9, 0), False) is None  # no weight: rung 4
    assert plan5(16384, 8192, f32, (9, 0), True) is None  # one block: rung 3
    assert plan5(4, 65536, f32, (8, 0), True) is None  # no clusters
    names = {n for n in compiled(CU_FILE, "sm_90").kernel_names if "kernel5" in n}
    planned = set()
    for dtype, suffix in ((f32, "f32"), (torch.float16, "f16"), (bf, "bf16")):
        for n in (16384, 32768, 65536, 131072, 262144, 524288):
            sp = plan5(4, n, dtype, (9, 0), True)
            if sp is not None:
                for w in ("", "_wf32"):
                    planned.add(f"rmsnorm_kernel5_t{sp.threads}_c{sp.cluster}_{suffix}{w}")
    assert planned == names, (sorted(planned - names), sorted(names - planned))


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("dtype", "n"),
    [
        (torch.float32, 16384),  # two whole blocks of 512
        (torch.float32, 131072),  # eight whole blocks of 1024 (64 KB each)
        (torch.float32, 262144),  # sixteen of 1024: the non-portable cluster size
        (torch.bfloat16, 65536),  # four whole blocks
        (torch.bfloat16, 131072),  # eight
        (torch.float16, 262144),  # eight of 1024
        (torch.bfloat16, 65544),  # the last slice short: rung 4 runs
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_cuda5_long_rows_on_gpu(dtype: torch.dtype, n: int) -> None:
    """Rung 5 against the reference, with each kind of weight, and bit for bit against rung 4:
    the same sums in the same order, only fewer instructions."""
    _check_cluster_rung("cuda:5", dtype, n, same_bits_as="cuda:4")


# --- cuda:6: rows past 256 KB in QuACK's order of steps -------------------------------------------


def test_cuda6_plan_and_kernels() -> None:
    """Rung 6 takes rows past 256 KB that are whole 64 KB slices (512 KB over a cluster of 8,
    1 MB over 16) and have a weight; shorter rows, other lengths, no weight or no clusters leave
    the row to rung 5 (None). Every kernel it plans exists, and none is unreachable."""
    from minikernel.kernels.rmsnorm import CU_FILE, SlicePlan, plan6

    bf, f16, f32 = torch.bfloat16, torch.float16, torch.float32
    assert plan6(16384, 131072, f32, (9, 0), True) == SlicePlan(8, 4096, 512)  # 512 KB rows
    assert plan6(4, 262144, f32, (9, 0), True) == SlicePlan(16, 4096, 512)  # 1 MB
    assert plan6(4, 262144, bf, (9, 0), True) == SlicePlan(8, 4096, 512)  # 512 KB in bf16
    assert plan6(4, 524288, f16, (9, 0), True) == SlicePlan(16, 4096, 512)
    assert plan6(32768, 131072, bf, (9, 0), True) is None  # 256 KB: rung 5's eight 32 KB slices
    assert plan6(16384, 65536, f32, (9, 0), True) is None  # 256 KB
    assert plan6(4, 196608, f32, (9, 0), True) is None  # 768 KB: twelve slices, no such cluster
    assert plan6(4, 131076, f32, (9, 0), True) is None  # not whole slices
    assert plan6(4, 524288, f32, (9, 0), True) is None  # 2 MB: past a cluster of 16
    assert plan6(16384, 131072, f32, (9, 0), False) is None  # no weight: rung 5, then rung 4
    assert plan6(16384, 131072, f32, (8, 0), True) is None  # no clusters
    assert plan6(2**28, 131072, f32, (9, 0), True) is None  # a grid past 2**31 - 1 blocks
    names = {n for n in compiled(CU_FILE, "sm_90").kernel_names if "kernel6" in n}
    planned = set()
    for dtype, suffix in ((f32, "f32"), (f16, "f16"), (bf, "bf16")):
        for n in (65536, 131072, 262144, 524288, 1048576):
            sp = plan6(4, n, dtype, (9, 0), True)
            if sp is not None:
                for w in ("", "_wf32"):
                    planned.add(f"rmsnorm_kernel6_t{sp.threads}_c{sp.cluster}_{suffix}{w}")
    assert planned == names, (sorted(planned - names), sorted(names - planned))


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("dtype", "n"),
    [
        (torch.float32, 131072),  # eight 64 KB blocks
        (torch.float32, 262144),  # sixteen: the non-portable cluster size
        (torch.bfloat16, 262144),  # eight, with bf16 and fp32 weights
        (torch.float16, 524288),  # sixteen
        (torch.bfloat16, 131072),  # 256 KB: rung 5 runs, and it must still be right
    ],
    ids=lambda v: str(v).removeprefix("torch."),
)
def test_cuda6_long_rows_on_gpu(dtype: torch.dtype, n: int) -> None:
    """Rung 6 against the reference, with each kind of weight (none: rung 5 runs), and its
    rstd. Not bit for bit against rung 5: each thread sums 8 vectors instead of 4, so the sum's
    order differs."""
    _check_cluster_rung("cuda:6", dtype, n)


# --- the default implementation -----------------------------------------------------------------


def test_default_impl_off_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from minikernel.kernels.rmsnorm import default_impl

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert default_impl(torch.zeros(2, 8)) == "triton:2"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert default_impl(torch.zeros(2, 8)) == "torch"


def test_default_impl_by_row_length(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU with clusters the default forward is triton:2 up to DEFAULT_TRITON_MAX elements
    (DEFAULT_TRITON_MAX_FP32 for fp32 rows) and the top of the CUDA ladder past it, and the
    default backward is CUDA C wherever a CUDA kernel applies; without clusters, triton:2 and
    Triton's backward at every length. (A stand-in tensor that says it is on a GPU: the rule,
    not the kernels, is under test here.)"""
    import types

    import minikernel.cuda as mc
    from minikernel.kernels.rmsnorm import (
        DEFAULT_TRITON_MAX,
        DEFAULT_TRITON_MAX_FP32,
        default_backward_is_cuda,
        default_impl,
    )

    def on_gpu(n: int, dtype: torch.dtype = torch.bfloat16) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            is_cuda=True, device=torch.device("cuda", 0), shape=(4, n), dtype=dtype
        )

    monkeypatch.setattr(mc, "clusters_available", lambda device=None: True)
    assert DEFAULT_TRITON_MAX < DEFAULT_TRITON_MAX_FP32
    for dtype in (torch.bfloat16, torch.float16, torch.float32):
        assert default_impl(on_gpu(1, dtype)) == "triton:2"
        assert default_impl(on_gpu(DEFAULT_TRITON_MAX, dtype)) == "triton:2"
        assert default_impl(on_gpu(4, dtype), n=131072) == "cuda:6"  # normalized_shape of dims
    # 16384 < n <= 32768: the one band where the choice turns on the dtype
    assert default_impl(on_gpu(DEFAULT_TRITON_MAX + 1)) == "cuda:6"
    assert default_impl(on_gpu(DEFAULT_TRITON_MAX + 1, torch.float16)) == "cuda:6"
    assert default_impl(on_gpu(DEFAULT_TRITON_MAX_FP32, torch.float32)) == "triton:2"
    assert default_impl(on_gpu(DEFAULT_TRITON_MAX_FP32 + 1, torch.float32)) == "cuda:6"
    assert default_backward_is_cuda(on_gpu(1024))
    monkeypatch.setattr(mc, "clusters_available", lambda device=None: False)
    for n in (1, DEFAULT_TRITON_MAX + 1, 131072):
        for dtype in (torch.bfloat16, torch.float32):
            assert default_impl(on_gpu(n, dtype)) == "triton:2"
    assert not default_backward_is_cuda(on_gpu(1024))
    assert not default_backward_is_cuda(torch.zeros(2, 8))  # the CPU: never


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("n", "dtype"),
    [
        (1024, torch.bfloat16),  # triton:2 forward, the warp-per-row CUDA backward
        (4097, torch.bfloat16),  # triton:2 forward, Triton's backward (no CUDA kernel takes it)
        (32768, torch.bfloat16),  # the CUDA ladder (rung 5's kernel), the fixed-length backward
        (32768, torch.float32),  # triton:2 holding the row whole, the fixed-length backward
        (32769, torch.bfloat16),  # the CUDA ladder's fallback for rows it cannot vectorise
        (131072, torch.bfloat16),  # a cluster both ways
    ],
)
def test_default_impl_on_the_gpu_runs_and_agrees(
    n: int, dtype: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sm_90+ with the bindings: the default forward by row length and dtype, the CUDA backward
    wherever it applies whichever forward ran (a spy counts the CUDA backward's launches); the
    default call, forward and backward, matches the reference."""
    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import clusters_available

    x = torch.randn(3, n, device="cuda", dtype=dtype)
    w = torch.rand(n, device="cuda", dtype=dtype) + 0.5
    clusters = clusters_available(x.device)
    limit = rn.DEFAULT_TRITON_MAX_FP32 if dtype == torch.float32 else rn.DEFAULT_TRITON_MAX
    long_row = clusters and n > limit
    expected = "cuda:6" if long_row else "triton:2"
    assert rn.default_impl(x) == expected
    ran = []
    real = rn._backward_cuda

    def spy(*args, **kwargs):
        got = real(*args, **kwargs)
        ran.append(got is not None)
        return got

    monkeypatch.setattr(rn, "_backward_cuda", spy)
    xg = x.clone().requires_grad_(True)
    y = rn.rms_norm(xg, (n,), w, 1e-6)
    torch.testing.assert_close(y.double(), rn.reference(x, w, 1e-6), rtol=1.6e-2, atol=1e-2)
    dy = torch.randn_like(x)
    y.backward(dy)
    dx, _ = rn.reference_grads(x, w, dy, 1e-6)
    torch.testing.assert_close(xg.grad.double(), dx, rtol=5e-2, atol=5e-2)
    cuda_plan = rn.backward_cuda_plan(n, x.dtype, w.dtype, torch.cuda.get_device_capability())
    assert ran == ([cuda_plan is not None] if clusters else [])


# --- the CUDA backward (rows longer than Triton's registers hold) --------------------------------


def test_cuda_backward_plan_and_kernels() -> None:
    """plan_bwd leaves rows Triton reads once to Triton, cuts longer ones over clusters of at
    most 32 KB per block, and every kernel it plans exists in rmsnorm.cu."""
    from minikernel.kernels.rmsnorm import CU_FILE, plan_bwd

    assert plan_bwd(MAX_REGISTER_ROW, torch.bfloat16, (9, 0)) is None  # Triton reads it once
    assert plan_bwd(131072, torch.bfloat16, (8, 0)) is None  # no clusters before sm_90
    sp = plan_bwd(131072, torch.bfloat16, (9, 0))
    assert (sp.cluster, sp.per_block, sp.threads, sp.k) == (8, 2048, 512, 4)  # 8 x 32 KB
    assert sp.smem(0) == 2 * 32768  # its x and dy slices
    assert sp.smem(2) == 3 * 32768  # and its slice of a bf16 weight
    assert sp.smem(4) == 4 * 32768  # or of an fp32 one
    sp = plan_bwd(32768, torch.bfloat16, (9, 0))
    assert (sp.cluster, sp.per_block) == (2, 2048)
    sp = plan_bwd(131072, torch.float32, (9, 0))
    assert (sp.cluster, sp.per_block, sp.threads, sp.k) == (8, 4096, 512, 8)  # past 8 x 32 KB
    assert sp.smem(4) == 3 * 65536  # 192 KB: one block per SM, under the 227 KB an SM gives
    assert plan_bwd(262144, torch.float32, (9, 0)) is None  # past 8 x 512 x 8 vectors
    assert plan_bwd(262144, torch.bfloat16, (9, 0)) is None  # 16-bit: 8 vectors would spill
    names = compiled(CU_FILE, "sm_90").kernel_names
    for n in (16385 * 8, 32768, 40000, 65536, 131072, 262144):
        for dtype, suffix in ((torch.float32, "f32"), (torch.bfloat16, "bf16")):
            sp = plan_bwd(n, dtype, (9, 0))
            if sp is not None:
                for w in ("", "_wf32"):
                    assert f"{sp.kernel}_{suffix}{w}" in names, (n, dtype, sp)


_SUFFIXES = ((torch.float32, "f32"), (torch.float16, "f16"), (torch.bfloat16, "bf16"))


def test_cuda_backward_rows_plan_and_kernels() -> None:
    """plan_bwd_rows takes whole-vector rows of 65 to 256 vectors (3 to 8 per lane of a warp),
    sizes the block by the registers K needs, and every kernel it plans exists in rmsnorm.cu."""
    from minikernel.kernels.rmsnorm import CU_FILE, ROWS_BWD_RING, RowsBwdPlan, plan_bwd_rows

    sp = sp_k4 = plan_bwd_rows(1024, torch.bfloat16)
    assert (sp.k, sp.threads, sp.nvec, sp.stages) == (4, 640, 128, 0)
    assert sp.smem == 2 * 1024 * 4  # two warps' dw sums at a time, 1024 floats each
    sp = plan_bwd_rows(2048, torch.bfloat16)
    assert (sp.k, sp.threads, sp.nvec) == (8, 384, 256)
    sp = plan_bwd_rows(1024, torch.float32)
    assert (sp.k, sp.threads, sp.nvec) == (8, 384, 256)
    assert plan_bwd_rows(2048, torch.float32) is None  # 512 vectors: past 8 per lane
    assert plan_bwd_rows(512, torch.bfloat16) is None  # 64 vectors: Triton's
    assert plan_bwd_rows(1028, torch.bfloat16) is None  # not whole vectors
    # On sm_90 the ring: WARPS x S stages of 2 x 32 K vectors, after room for an fp32 weight.
    ring = plan_bwd_rows(1024, torch.bfloat16, (9, 0))
    warps, stages = ROWS_BWD_RING[4]
    assert (ring.k, ring.threads, ring.stages) == (4, 32 * warps, stages)
    assert ring.smem == 1024 * 4 + warps * stages * 2 * 32 * 4 * 16
    assert ring.kernel == f"rmsnorm_bwd_ring_k4_w{warps}_s{stages}"
    assert plan_bwd_rows(1024, torch.bfloat16, (8, 0)) == sp_k4  # elsewhere: a row at a time
    with pytest.raises(ValueError, match="2 stages or more"):
        RowsBwdPlan(4, 512, 128, 2, 1)
    names = compiled(CU_FILE, "sm_90").kernel_names
    for n in range(8, 4096, 8):
        for dtype, suffix in _SUFFIXES:
            for cc in (None, (9, 0)):
                sp = plan_bwd_rows(n, dtype, cc)
                if sp is not None:
                    assert sp.smem <= 227 * 1024, (n, dtype, sp)  # the H200's opt-in limit
                    assert sp.smem >= max(2 * n, sp.threads) * 4  # room for the dw sums
                    assert bool(sp.stages) == (cc is not None), (n, dtype, cc)
                    for w in ("", "_wf32"):
                        assert f"{sp.kernel}_{suffix}{w}" in names, (n, dtype, sp)
    rings = {name for name in names if name.startswith("rmsnorm_bwd_ring_")}
    assert rings == {  # none unused
        f"rmsnorm_bwd_ring_k{k}_w{w}_s{s}_{suffix}{wf}"
        for k, (w, s) in ROWS_BWD_RING.items()
        for _, suffix in _SUFFIXES
        for wf in ("", "_wf32")
    }


def _lab_script(name: str):  # type: ignore[no-untyped-def]
    """A script of labs/ imported as a module (its main() is not run)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "labs" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_tile_probe_adds_its_candidates() -> None:
    """labs/probe_rmsnorm_backward_tile.py adds an instantiation for every launch it times
    (before rmsnorm.cu's two markers), each launch covers its row exactly, and the probe stops
    if a marker is gone."""
    from minikernel.kernels.rmsnorm import CU_FILE, TileBwdPlan

    probe = _lab_script("probe_rmsnorm_backward_tile")
    src = CU_FILE.read_text()
    out = probe.with_candidates(src)
    for (n, dtype_name), launches in probe.CANDIDATES.items():
        for t, v, wreg, *cluster in launches:
            plan = TileBwdPlan(t, v, wreg, *cluster, suffix=probe.SUFFIX[dtype_name])
            assert plan.n == n, (n, dtype_name, plan)
            if cluster:
                macro = "RMSNORM_BWD_TILE_C" if dtype_name == "float32" else "RMSNORM_BWD_TILE_C16"
                assert f"{macro}({t}, {v}, {cluster[0]})" in out, (n, dtype_name, plan)
            else:
                assert f"RMSNORM_BWD_TILE({t}, {v}, {int(wreg)})" in out, (n, dtype_name, plan)
    for marker in (probe.END, probe.END_C):
        with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
            probe.with_candidates(src.replace(marker, ""))


def test_rows_probe_adds_its_candidates() -> None:
    """labs/probe_rmsnorm_backward_rows.py builds its candidate rings by adding lines before a
    marker of rmsnorm.cu: the marker is still there, and every candidate fits an H200 block."""
    from minikernel.kernels.rmsnorm import CU_FILE, RowsBwdPlan

    probe = _lab_script("probe_rmsnorm_backward_rows")
    src = CU_FILE.read_text()
    out = probe.with_candidates(src)
    for k, launches in probe.CANDIDATES.items():
        for warps, stages in launches:
            assert f"RMSNORM_BWD_RING({k}, {warps}, {stages})" in out
            nvec = 32 * k
            assert RowsBwdPlan(k, 32 * warps, nvec, 2, stages).smem <= 227 * 1024
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
        probe.with_candidates(src.replace(probe.END, ""))


def test_forward_rung4_probe_builds_its_variants() -> None:
    """labs/probe_rmsnorm_forward_rung4.py edits rmsnorm.cu's rung 4 by text: every line it
    replaces is still there once, each variant carries its edit, and each timed launch covers
    the row exactly."""
    from minikernel.kernels.rmsnorm import CU_FILE, plan4

    probe = _lab_script("probe_rmsnorm_forward_rung4")
    src = CU_FILE.read_text()
    out = probe.variants(src)
    assert out["shipped"] == src
    assert "prefetch.global.L1" in out["wpf"] and "prefetch.global.L1" not in src
    assert "ld.global.cg" in out["cg_wb"] and "probe: a plain store" in out["cg_wb"]
    # wreg: the weights come from registers loaded with x, at 64 registers (two blocks of 512)
    assert probe.W_LOAD not in out["wreg"] and "wraw[k][c] = __ldg(" in out["wreg"]
    assert "__launch_bounds__(THREADS, 1024 / THREADS)" in out["wreg"]
    for name in ("k3w", "k3w_wb"):  # rung 3 with the weights in registers before the wait
        assert probe.K3_OUT not in out[name] and "uint4 wraw[KW][WV];" in out[name]
    assert "// probe\n" in out["k3w_wb"] and "// probe\n" not in out["k3w"]
    for name in ("v8", "v8_wpf"):
        assert "constexpr int KERNEL4_VECS = 8;" in out[name]
        for threads, cluster in probe.V8_SHAPES:
            assert f"RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, {threads}, {cluster})" in out[name]
    for _, n, dtype_name in probe.SHAPES:
        dtype = getattr(torch, dtype_name)
        nvec = n // (16 // dtype.itemsize)
        runs = probe.launches(n, dtype)
        assert runs[0][2] == plan4(1, n, dtype, (9, 0)) and len(runs) >= 4
        for _, variant, plan, smem in runs:
            assert plan.cluster * plan.per_block == nvec
            if variant.startswith("k3"):  # rung 3's plan: its slice in shared memory
                assert smem >= plan.smem and plan.cluster > 1
                assert plan.per_block <= 8 * plan.threads  # k3w holds 8 weight words a thread
            else:  # rung 4: a fixed number of vectors per thread, in registers
                per_thread = 8 if variant.startswith("v8") else 4
                assert nvec == plan.cluster * plan.threads * per_thread
                assert (smem > 0) == (variant == "cap")
            capped = variant in ("cap", "k3cap") or (variant.startswith("k3w") and smem > plan.smem)
            if capped:  # fewer blocks than would fit otherwise, and at least one
                blocks = probe.SM_SMEM // (smem + 2048)  # its static memory: under 1 KB
                assert 1 <= blocks < 2048 // plan.threads and smem <= 227 * 1024
                assert blocks < probe.SM_SMEM // (plan.smem + 2048)
    with pytest.raises(SystemExit, match=r"rmsnorm\.cu changed"):
        probe.variants(src.replace(probe.VECS, ""))


def test_cuda_backward_tile_plan_and_kernels() -> None:
    """plan_bwd_tile takes only rows of the lengths rmsnorm.cu instantiates for x's dtype, with a
    weight it is built for, on sm_90+; every launch it plans exists, covers its row exactly and
    fits the shared memory of an H200 SM, and no tile kernel is left that no plan launches."""
    from minikernel.kernels.rmsnorm import CU_FILE, TILE_BWD, TileBwdPlan, plan_bwd_tile

    f32, bf16, f16 = torch.float32, torch.bfloat16, torch.float16
    assert plan_bwd_tile(8192, bf16, bf16, (9, 0)) is None  # 16-bit: only from 32768
    assert plan_bwd_tile(8192, f32, bf16, (9, 0)) is None  # fp32 x: an fp32 weight or none
    assert plan_bwd_tile(65536, bf16, f16, (9, 0)) is None  # 16-bit x: its dtype or fp32
    assert plan_bwd_tile(8192, f32, f32, (8, 0)) is None  # measured on sm_90 only
    assert plan_bwd_tile(8196, f32, f32, (9, 0)) is None  # not a length it is compiled for
    assert plan_bwd_tile(8192, f32, None, (9, 0)).smem == 2 * 32768  # a row of x, one of dy
    assert plan_bwd_tile(16384, f32, f32, (9, 0)).smem == 3 * 65536  # and of the weights
    assert plan_bwd_tile(65536, f32, f32, (9, 0)).smem == 2 * 32768  # an eighth of each row
    assert plan_bwd_tile(65536, bf16, None, (9, 0)).smem == 2 * 16384  # 8192 bf16 a block
    assert plan_bwd_tile(65536, bf16, f32, (9, 0)).kernel.endswith("_bf16_wf32")
    assert plan_bwd_tile(65536, f16, f16, (9, 0)).kernel.endswith("_c8_f16")
    with pytest.raises(ValueError, match="weights in registers"):
        TileBwdPlan(256, 8, False, 4)  # the cluster kernel has no shared-memory weights
    with pytest.raises(ValueError, match="fp32 only"):
        TileBwdPlan(256, 4, True, 1, "bf16")
    with pytest.raises(ValueError, match="one-block kernel only"):
        TileBwdPlan(256, 4, True, 4, "bf16", per_sm=2)  # a cluster's grid is not capped
    with pytest.raises(ValueError, match="per_sm=-1"):
        TileBwdPlan(256, 4, True, 1, per_sm=-1)
    names = compiled(CU_FILE, "sm_90").kernel_names
    planned, kernels = set(), set()
    for dtype in (f32, bf16, f16):
        for n in range(1024, 131073, 1024):
            for w_dtype in {dtype, f32, None}:
                plan = plan_bwd_tile(n, dtype, w_dtype, (9, 0))
                if plan is not None:
                    planned.add((n, dtype.itemsize))
                    kernels.add(plan.kernel)
                    assert plan.n == n, (n, dtype, plan)  # no bounds checks: the row is the tile
                    assert plan.smem <= 227 * 1024, (n, dtype, plan)
                    assert plan.kernel in names, (n, dtype, plan)
                    assert plan.cluster in (1, 2, 4, 8, 16), (n, dtype, plan)
    assert planned == set(TILE_BWD)
    assert {n for n, size in TILE_BWD if size == 4} == {4096, 8192, 16384, 32768, 65536, 131072}
    assert {n for n, size in TILE_BWD if size == 2} == {32768, 65536, 131072}
    tiles = {name for name in names if name.startswith("rmsnorm_bwd_tile_")}
    assert tiles == kernels  # none unused


def test_backward_cuda_plan_picks_one_kernel_per_row_length() -> None:
    """What cuda:3's backward runs (the lab times cuda:3 only where this is not None)."""
    from minikernel.kernels.rmsnorm import (
        BwdPlan,
        RowsBwdPlan,
        TileBwdPlan,
        backward_cuda_plan,
    )

    f32, bf16, h100 = torch.float32, torch.bfloat16, (9, 0)
    assert isinstance(backward_cuda_plan(8192, f32, f32, h100), TileBwdPlan)
    assert isinstance(backward_cuda_plan(8192, f32, None, h100), TileBwdPlan)
    assert backward_cuda_plan(8192, bf16, bf16, h100) is None  # Triton's
    assert backward_cuda_plan(8192, f32, bf16, h100) is None  # the tile is fp32 weights only
    assert backward_cuda_plan(2048, f32, f32, h100) is None  # past the warp-per-row kernel
    assert isinstance(backward_cuda_plan(1024, bf16, bf16, h100), RowsBwdPlan)
    assert backward_cuda_plan(1024, bf16, bf16, h100).stages > 0  # the ring on sm_90
    assert isinstance(backward_cuda_plan(65536, f32, f32, h100), TileBwdPlan)
    assert backward_cuda_plan(131072, f32, None, h100).cluster == 16
    assert isinstance(backward_cuda_plan(65536, bf16, bf16, h100), TileBwdPlan)
    assert isinstance(backward_cuda_plan(65536, f32, bf16, h100), BwdPlan)  # a bf16 weight
    assert isinstance(backward_cuda_plan(65532, f32, f32, h100), BwdPlan)  # not a tile length
    assert isinstance(backward_cuda_plan(65528, bf16, bf16, h100), BwdPlan)
    assert backward_cuda_plan(65537, bf16, bf16, h100) is None  # not whole 16-byte vectors
    assert backward_cuda_plan(65536, bf16, bf16, (8, 0)) is None  # no clusters
    # knobs (tuning experiments) skip the other two kernels: plan_bwd leaves 8192 to Triton
    assert backward_cuda_plan(8192, f32, f32, h100, cluster=2) is None
    assert backward_cuda_plan(65528, bf16, bf16, h100).cluster == 4  # 32 KB a block
    assert backward_cuda_plan(65536, bf16, bf16, h100, cluster=8).cluster == 8


CUDA_BWD_SHAPES = [
    # Two blocks per row (bf16; fp32: four), fewer rows than clusters, the last block a vector
    # short (32768 itself runs the fixed-length kernel: TILE_SHAPES).
    (5, 32760),
    (33, 40008),  # a row that does not split evenly: the last block owns fewer vectors
    # Eight blocks per row, several rows per cluster, the last block a vector short; fp32: 8
    # vectors a thread (131072 itself runs the fixed-length kernel in fp32: TILE_SHAPES).
    (300, 131064),
    # The warp-per-row kernel (plan_bwd_rows):
    (3, 1024),  # fewer rows than a block has warps
    (7001, 1024),  # several rows per warp, not evenly (fp32: 8 vectors a lane, 16-bit: 4)
    (130, 520),  # 65 vectors of 16-bit (lanes past the first hold 2 or 3), 130 of fp32
]


@pytest.mark.gpu
@pytest.mark.parametrize("wkind", ["same", "fp32", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", CUDA_BWD_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_cuda_backward_matches_reference(
    shape: tuple[int, int], dtype: torch.dtype, wkind: str
) -> None:
    """Through autograd after cuda:3, and the kernel itself (it must not hand back None here)."""
    from minikernel.cuda import clusters_available
    from minikernel.kernels.rmsnorm import _backward_cuda

    m, n = shape
    if wkind not in _weights(dtype):
        pytest.skip("an fp32 weight on fp32 input is the 'same' case")
    if not clusters_available(torch.device("cuda")):
        pytest.skip("the CUDA backward needs clusters (sm_90+) and NVIDIA's bindings")
    x, w, dy = make_inputs(m, n, dtype, "cuda", seed=5 + m, with_grad_out=True)
    w = _pick_weight(w, dtype, wkind)
    xg = x.clone().requires_grad_(True)
    wg = None if w is None else w.clone().requires_grad_(True)
    rms_norm(xg, (n,), wg, EPS, impl="cuda:3").backward(dy)
    dx_ref = _check_grads(xg, wg, x, w, dy, dtype)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    got = _backward_cuda(dy, x, w, rstd)
    assert got is not None, "the CUDA backward refused a case it plans"
    _close(got[0], dx_ref, _grad_scale(x, w, dy), BWD_RTOL[dtype], "dx (kernel)")


TILE_SHAPES = [
    (1, 4096),  # one row: one block, the rest of the grid has nothing
    # more rows than blocks (on an H200 two per SM, TILE_BWD's cap: 264), not a multiple of
    # them: blocks take 3 or 4 rows
    (1000, 4096),
    (1, 8192),
    (263, 8192),
    (1, 16384),  # 512 threads x 8 vectors, the weights in shared memory
    (263, 16384),
    # The cluster kernel, two rows in flight: a cluster's rows come in pairs, then maybe one.
    (1, 32768),  # one row: taken, then given with nothing taken after it
    (150, 32768),  # clusters of 4 with 4 or 5 rows each (both parities)
    (41, 65536),  # clusters of 8, one or two rows each
    (37, 131072),  # clusters of 16, a "non-portable" size the launch opts in to
]


@pytest.mark.gpu
@pytest.mark.parametrize("wkind", ["same", "fp32", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", TILE_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_cuda_backward_tile_matches_reference(
    shape: tuple[int, int], dtype: torch.dtype, wkind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fixed-length backward, through autograd after cuda:3 (which must launch it) and
    launched itself: dx and dw against the fp64 reference, and without dw the same dx bits."""
    import minikernel.kernels.rmsnorm as rn
    from minikernel.cuda import clusters_available

    m, n = shape
    if wkind not in _weights(dtype):
        pytest.skip("an fp32 weight on fp32 input is the 'same' case")
    if dtype != torch.float32 and n < 32768:
        pytest.skip("16-bit rows run the fixed-length kernel from 32768 elements")
    if not clusters_available(torch.device("cuda")):
        pytest.skip("the CUDA backward needs clusters (sm_90+) and NVIDIA's bindings")
    launched = []
    real = rn._backward_tile
    monkeypatch.setattr(rn, "_backward_tile", lambda *a: launched.append(a[4]) or real(*a))
    x, w, dy = make_inputs(m, n, dtype, "cuda", seed=11 + m, with_grad_out=True)
    w = _pick_weight(w, dtype, wkind)
    xg = x.clone().requires_grad_(True)
    wg = None if w is None else w.clone().requires_grad_(True)
    rms_norm(xg, (n,), wg, EPS, impl="cuda:3").backward(dy)
    dx_ref = _check_grads(xg, wg, x, w, dy, dtype)
    plan = rn.plan_bwd_tile(n, dtype, None if w is None else w.dtype, (9, 0))
    assert launched == [plan], "autograd after cuda:3 did not run the fixed-length kernel"
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    grids = []
    launch = rn._launch_bwd
    monkeypatch.setattr(
        rn, "_launch_bwd", lambda *a, **k: grids.append(k["groups"]) or launch(*a, **k)
    )
    dx, dw = real(dy, x, w, rstd, plan, torch.empty_like(x), True)
    _close(dx, dx_ref, _grad_scale(x, w, dy), BWD_RTOL[dtype], "dx (kernel)")
    assert (dw is None) == (w is None)
    if plan.per_sm:  # the grid TILE_BWD caps: no more blocks than that per SM, nor than rows
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        assert grids == [min(m, plan.per_sm * sms)], (grids, plan)
    dx2, dw2 = real(dy, x, w, rstd, plan, torch.empty_like(x), False)
    assert dw2 is None and torch.equal(dx2, dx)


@pytest.mark.gpu
def test_cuda_backward_with_exactly_48_kb_of_dynamic_shared_memory() -> None:
    """Clusters of 8 on 32768 fp32 columns: 1024 vectors per block, x, dy and w slices of 16 KB
    each, 48 KB of dynamic shared memory on top of the kernel's static memory. Without opting
    in that launch fails (the loader once assumed 48 KB were free of static memory)."""
    from minikernel.cuda import clusters_available
    from minikernel.kernels.rmsnorm import _backward_cuda, plan_bwd

    if not clusters_available(torch.device("cuda")):
        pytest.skip("the CUDA backward needs clusters (sm_90+) and NVIDIA's bindings")
    m, n = 40, 32768
    sp = plan_bwd(n, torch.float32, (9, 0), cluster=8)
    assert sp is not None and sp.smem(4) == 48 * 1024
    x, w, dy = make_inputs(m, n, torch.float32, "cuda", seed=3, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    got = _backward_cuda(dy, x, w, rstd, cluster=8)
    assert got is not None
    dx_ref, dw_ref = reference_grads(x, w, dy, EPS)
    scale = _grad_scale(x, w, dy)
    _close(got[0], dx_ref, scale, BWD_RTOL[torch.float32], "dx (clusters of 8)")
    torch.testing.assert_close(got[1].double(), dw_ref, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_cuda_backward_as_the_first_cuda_call_of_autograds_thread() -> None:
    """In a fresh process, the first CUDA C call of the backward (the cluster occupancy query)
    runs on autograd's own thread, where no context was current: it failed there with
    CUDA_ERROR_INVALID_CONTEXT until the loader made the context current itself."""
    import subprocess
    import sys
    from pathlib import Path

    from minikernel.cuda import clusters_available

    if not clusters_available(torch.device("cuda")):
        pytest.skip("the CUDA backward needs clusters (sm_90+) and NVIDIA's bindings")
    code = (
        "import torch\n"
        "from minikernel.kernels.rmsnorm import rms_norm, reference_grads\n"
        "x = torch.randn(8, 32768, device='cuda', requires_grad=True)\n"
        "w = torch.randn(32768, device='cuda')\n"
        "dy = torch.randn_like(x)\n"
        "rms_norm(x, (32768,), w, 1e-6, impl='cuda:3').backward(dy)\n"
        "dx, _ = reference_grads(x.detach(), w, dy, 1e-6)\n"
        "err = (x.grad.double() - dx).abs().max().item()\n"
        "print('max_err', err)\n"
        "assert err < 1e-3, err\n"
    )
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = dict(__import__("os").environ)
    env["PYTHONPATH"] = src + ":" + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "max_err" in proc.stdout


@pytest.mark.gpu
# fp32: the cluster kernel; the fixed-length kernel over a cluster, then in one block; warp-per-row
@pytest.mark.parametrize("n", [131064, 65536, 8192, 1024])
def test_cuda_backward_is_deterministic_and_writes_only_dx(n: int) -> None:
    from minikernel.cuda import clusters_available
    from minikernel.kernels.rmsnorm import _backward_cuda

    if not clusters_available(torch.device("cuda")):
        pytest.skip("the CUDA backward needs clusters (sm_90+) and NVIDIA's bindings")
    m = 77 if n > 16384 else 5003
    x, w, dy = make_inputs(m, n, torch.float32, "cuda", seed=2, with_grad_out=True)
    rstd = torch.rsqrt(x.pow(2).mean(-1) + EPS)
    first = _backward_cuda(dy, x, w, rstd)
    for _ in range(2):
        again = _backward_cuda(dy, x, w, rstd)
        assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    dx_ref, _ = reference_grads(x, w, dy, EPS)

    def backward_into(xx: torch.Tensor, ww: torch.Tensor, d: torch.Tensor, out: torch.Tensor):
        r = torch.rsqrt(xx.pow(2).mean(-1) + EPS)
        assert _backward_cuda(d, xx, ww, r, dx=out) is not None
        return out

    run_checked(
        backward_into, [x, w, dy], dx_ref, tolerances={torch.float32: (1e-5, 1e-4)}
    ).raise_if_failed()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [32768, 1024])  # the cluster kernel; the warp-per-row kernel
def test_cuda_backward_leaves_unaligned_rows_to_triton(n: int) -> None:
    """A dy that starts off a 16-byte boundary, or rows that are not whole vectors: None from
    the kernel, and the autograd result still right (Triton's backward ran)."""
    from minikernel.kernels.rmsnorm import _backward_cuda

    m = 4
    x, w, dy = make_inputs(m, n + 1, torch.bfloat16, "cuda", seed=9, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    assert _backward_cuda(dy, x, w, rstd) is None  # n + 1 is not a whole number of vectors
    flat = torch.randn(m * n + 1, device="cuda", dtype=torch.bfloat16)
    dy_off = flat[1:].view(m, n)  # 2 bytes past an aligned address
    x2, w2 = x[:, :n].contiguous(), w[:n].contiguous()
    assert _backward_cuda(dy_off, x2, w2, rstd) is None
    xg = x2.clone().requires_grad_(True)
    rms_norm(xg, (n,), w2, EPS, impl="cuda:3").backward(dy_off)
    dx_ref, _ = reference_grads(x2, w2, dy_off, EPS)
    w64 = w2.double().cpu()
    r64 = torch.rsqrt(x2.double().pow(2).mean(-1, keepdim=True) + EPS).cpu()
    scale = float((dy_off.double().cpu().abs() * w64.abs() * r64).max())
    _close(xg.grad, dx_ref, scale, BWD_RTOL[torch.bfloat16], "dx")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_cuda_backward_rows_folded_dw(dtype: torch.dtype) -> None:
    """The warp-per-row backward that sums dw in the same launch (a grid-wide barrier, then a
    slice of columns per block) agrees with the one that leaves the sum to reduce_dw, gives the
    same bits on every call, and keeps doing so call after call: the barrier's word must come
    back ready for the next launch."""
    from minikernel.kernels.rmsnorm import _backward_rows, plan_bwd_rows

    m, n = 9001, 1024
    x, w, dy = make_inputs(m, n, dtype, "cuda", seed=21, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    plan = plan_bwd_rows(n, dtype)
    dx0, dw0 = _backward_rows(dy, x, w, rstd, plan, torch.empty_like(x), True, fold_dw=False)
    first = _backward_rows(dy, x, w, rstd, plan, torch.empty_like(x), True)
    assert torch.equal(first[0], dx0)
    _close(first[1], dw0.double(), float(dw0.double().abs().max()), BWD_RTOL[dtype], "dw folded")
    for _ in range(20):
        again = _backward_rows(dy, x, w, rstd, plan, torch.empty_like(x), True)
        assert torch.equal(first[1], again[1]) and torch.equal(first[0], again[0])
    _, dw_ref = reference_grads(x, w, dy, EPS)
    _close(first[1], dw_ref, float(dw_ref.abs().max()), BWD_RTOL[dtype], "dw against fp64")


RING_SHAPES = [
    (1, 1024),  # one row: one warp works, every other warp's ring stays empty
    (5, 2048),  # fewer rows than a block has warps (16-bit: 8 vectors a lane)
    (2 * 132 * 16 + 7, 1024),  # a few rows per warp, some warps one more than others
    (7001, 520),  # 65 vectors of 16-bit (lanes past the first hold 2 or 3), 130 of fp32
    (30011, 1000),  # many rows per warp: the ring wraps around many times
]


@pytest.mark.gpu
@pytest.mark.parametrize("wkind", ["same", "fp32", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", RING_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_cuda_backward_ring_matches_rows(
    shape: tuple[int, int], dtype: torch.dtype, wkind: str
) -> None:
    """The ring kernel does each row's arithmetic as the row-at-a-time kernel does: dx has the
    same bits (rows it skipped or wrote twice would show), dw agrees to its rounding (the warps
    sum other rows) and against the fp64 reference, and no dw is asked for without a weight."""
    from minikernel.kernels.rmsnorm import _backward_rows, plan_bwd_rows

    m, n = shape
    if wkind not in _weights(dtype):
        pytest.skip("an fp32 weight on fp32 input is the 'same' case")
    x, w, dy = make_inputs(m, n, dtype, "cuda", seed=31 + m, with_grad_out=True)
    w = _pick_weight(w, dtype, wkind)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    rows, ring = plan_bwd_rows(n, dtype), plan_bwd_rows(n, dtype, (9, 0))
    if rows is None:
        pytest.skip("fp32 rows of 2048 are past the warp-per-row kernels (512 vectors)")
    assert ring.stages >= 2 and not rows.stages
    want_dx, want_dw = _backward_rows(dy, x, w, rstd, rows, torch.empty_like(x), True)
    dx = torch.full_like(x, float("nan"))  # a row left unwritten stays NaN
    got_dx, got_dw = _backward_rows(dy, x, w, rstd, ring, dx, True)
    assert got_dx is dx and torch.equal(got_dx, want_dx)
    if w is None:
        assert got_dw is None
        return
    _close(got_dw, want_dw.double(), float(want_dw.double().abs().max()), BWD_RTOL[dtype], "dw")
    _, dw_ref = reference_grads(x, w, dy, EPS)
    _close(got_dw, dw_ref, float(dw_ref.abs().max()), BWD_RTOL[dtype], "dw against fp64")


@pytest.mark.gpu
def test_cuda_backward_rows_folded_dw_in_a_cuda_graph() -> None:
    """A training step captured in a CUDA graph captures the folded backward's cooperative
    launch and its barrier word too. Two graphs captured one after the other on the same
    capture stream, replayed in the other order and again and again, must give the eager
    call's bits: each graph's word must be zeroed inside that graph, not in whichever graph
    happened to make it first."""
    from minikernel.kernels.rmsnorm import _backward_rows, plan_bwd_rows

    m, n, dtype = 4099, 1024, torch.bfloat16
    x, w, dy = make_inputs(m, n, dtype, "cuda", seed=23, with_grad_out=True)
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + EPS)
    plan = plan_bwd_rows(n, dtype)
    eager_dx, eager_dw = _backward_rows(dy, x, w, rstd, plan, torch.empty_like(x), True)
    graphs, outs = [], []
    for _ in range(2):
        dx = torch.empty_like(x)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            _, dw = _backward_rows(dy, x, w, rstd, plan, dx, True)
        graphs.append(graph)
        outs.append((dx, dw))
    for i in [1, 0, 1, 1, 0]:
        outs[i][0].zero_()
        outs[i][1].zero_()
        graphs[i].replay()
        torch.cuda.synchronize()
        assert torch.equal(outs[i][0], eager_dx) and torch.equal(outs[i][1], eager_dw)


def test_quack_backward_runner_and_its_refusal(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The lab times QuACK's backward through its autograd function (quack.rmsnorm, then
    torch.autograd.grad). A stand-in package with that entry point: the bwd runner returns
    (dx, dweight) of the reference. fp32 rows past 131072 elements, which QuACK 0.6.5's backward
    refuses, are reported as unavailable before anything is imported or allocated."""
    import sys

    from minikernel.kernels._peers import PeerUnavailable
    from minikernel.kernels.rmsnorm import make_runner, reference_grads

    with pytest.raises(PeerUnavailable, match="past 131072"):
        make_runner("quack", [1, 131072 + 8], torch.float32, "bwd", device="cpu")
    pkg = tmp_path / "quack"
    pkg.mkdir()
    (pkg / "__init__.py").write_text(
        "import torch\n\n"
        "def rmsnorm(x, weight=None, eps=1e-6):\n"
        "    r = torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)\n"
        "    return (x.float() * r * weight.float()).to(x.dtype)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "quack" or m.startswith("quack.")]:
        monkeypatch.delitem(sys.modules, name)
    run = make_runner("quack", [3, 40], torch.float32, "bwd", device="cpu", seed=4)
    x, w, dy = run.inputs
    want_dx, want_dw = reference_grads(x.detach(), w.detach(), dy, EPS)
    dx, dw = run()
    torch.testing.assert_close(dx.double(), want_dx, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(dw.double(), want_dw, rtol=1e-5, atol=1e-6)
    for name in [m for m in sys.modules if m == "quack" or m.startswith("quack.")]:
        monkeypatch.delitem(sys.modules, name)
