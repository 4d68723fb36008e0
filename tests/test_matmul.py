"""Matrix product: every variant against the fp64 reference, bad inputs, wrong-kernel fixtures."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import DEVICE, HAS_GPU, INTERPRET

from minikernel import cuda as mkcuda
from minikernel.kernels.matmul import VARIANTS, make_inputs, matmul, matmul_flops, reference
from minikernel.testing import run_checked

# Sizes (M, N, K). 1x1x1: one element, every tile all tail. 17x33x65: every dimension one past a
# multiple of 16/32/64, so every edge of every tile is partial, and K*2 bytes is not a multiple
# of 16 (triton:2 falls back to triton:1). 127x129x255: one short of / one past the 128-wide
# tiles of cuda:4-5 and the Triton GPU configs. 64x96x128 and 100x136x72: rows 16-byte aligned in
# every dtype, so triton:2-3 run their TMA path, the second with partial tiles in M, N and K
# (and, in the interpreter's 4 persistent programs of triton:3, several tiles per program).
SIZES = [(1, 1, 1), (17, 33, 65), (127, 129, 255), (64, 96, 128), (100, 136, 72)]
# GPU only: one past the 128 x 256 tiles in every direction, and a tall-skinny product.
GPU_SIZES = [(257, 385, 129), (1000, 64, 4097)]


DTYPES = [torch.float32, torch.float16, torch.bfloat16]


def _ids(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def tolerances(impl: str, k: int) -> dict[torch.dtype, tuple[float, float]]:
    """(atol, rtol) per dtype for one output of a length-k dot product of N(0, 1) entries.

    Outputs are about sqrt(k) in size, so absolute errors are scaled by sqrt(k). fp16 / bf16:
    exact products, fp32 sums, one rounding of the output (rtol covers it). fp32: exact in the
    CUDA C rungs (only the order of the fp32 sums differs from the reference); through TF32 in
    the Triton kernels on a GPU, where each input keeps 10 mantissa bits (errors ~1e-3 sqrt(k)).
    """
    s = math.sqrt(k)
    fp32 = (2e-5 * s, 1e-5) if impl.startswith("cuda:") or impl == "torch" else (1e-2 * s, 1e-2)
    return {
        torch.float32: fp32,
        torch.float16: (2e-4 * s, 2e-3),
        torch.bfloat16: (1e-3 * s, 1e-2),
    }


def _runnable(impl: str, dtype: torch.dtype) -> str | None:
    """Why (impl, dtype) cannot run in this session, or None if it can."""
    if dtype not in VARIANTS[impl].dtypes:
        return f"{impl} takes {VARIANTS[impl].dtypes} only"
    if impl.startswith("cuda:") and not HAS_GPU:
        return "CUDA C kernels need a GPU (they are compile-checked in test_cuda_compile.py)"
    if impl.startswith("triton:") and INTERPRET and dtype == torch.bfloat16:
        return "Triton's interpreter computes bf16 wrong (NaN); bf16 is tested on the GPU"
    return None


def _check(impl, m, n, k, dtype, bias=False, activation=None) -> None:  # type: ignore[no-untyped-def]
    device = "cuda" if impl.startswith("cuda:") else DEVICE
    a, b, bias_t = make_inputs(m, n, k, dtype, device, seed=m + n + k)
    inputs = [a, b, bias_t] if bias else [a, b]

    def kernel(*args: torch.Tensor) -> torch.Tensor:
        *ins, out = args
        x, y = ins[0], ins[1]
        return matmul(x, y, ins[2] if bias else None, activation, out=out, impl=impl)

    run_checked(
        kernel,
        inputs,
        reference(a, b, bias_t if bias else None, activation),
        tolerances=tolerances(impl, k),
        name=impl,
    ).raise_if_failed()


# Every (impl, dtype) pair a variant supports: the CUDA C rungs are fp32 only.
IMPL_DTYPES = [(i, d) for i in sorted(VARIANTS) for d in DTYPES if d in VARIANTS[i].dtypes]
IMPL_DTYPE_IDS = [f"{i}-{_ids(d)}" for i, d in IMPL_DTYPES]


@pytest.mark.parametrize(("m", "n", "k"), SIZES, ids=["x".join(map(str, s)) for s in SIZES])
@pytest.mark.parametrize(("impl", "dtype"), IMPL_DTYPES, ids=IMPL_DTYPE_IDS)
def test_variant_matches_reference(impl: str, m: int, n: int, k: int, dtype: torch.dtype) -> None:
    if (why := _runnable(impl, dtype)) is not None:
        pytest.skip(why)
    _check(impl, m, n, k, dtype)


@pytest.mark.parametrize("activation", [None, "relu", "gelu"])
@pytest.mark.parametrize("dtype", DTYPES, ids=_ids)
@pytest.mark.parametrize("impl", ["triton:1", "triton:2", "triton:3"])
def test_fused_bias_and_activation(impl: str, dtype: torch.dtype, activation: str | None) -> None:
    if (why := _runnable(impl, dtype)) is not None:
        pytest.skip(why)
    _check(impl, 100, 136, 72, dtype, bias=True, activation=activation)


@pytest.mark.gpu
@pytest.mark.parametrize(("m", "n", "k"), GPU_SIZES, ids=["x".join(map(str, s)) for s in GPU_SIZES])
@pytest.mark.parametrize(("impl", "dtype"), IMPL_DTYPES, ids=IMPL_DTYPE_IDS)
def test_variant_on_larger_sizes(impl: str, m: int, n: int, k: int, dtype: torch.dtype) -> None:
    if INTERPRET:
        pytest.skip("needs compiled kernels (TRITON_INTERPRET=1 is set)")
    if (why := _runnable(impl, dtype)) is not None:
        pytest.skip(why)
    _check(impl, m, n, k, dtype)


@pytest.mark.gpu
def test_cuda5_without_float4_path() -> None:
    # K and N odd: rows are not 16-byte aligned, so cuda:5 takes its scalar loads and stores.
    _check("cuda:5", 130, 131, 133, torch.float32)


@pytest.mark.parametrize("activation", [None, "gelu"])
def test_torch_fallback_matches_reference(activation: str | None) -> None:
    a, b, bias = make_inputs(33, 17, 40, torch.float32, "cpu")
    out = matmul(a, b, bias, activation, impl="torch")
    ref = reference(a, b, bias, activation)
    assert torch.allclose(out.double(), ref, atol=1e-4, rtol=1e-5)


def test_default_impl_runs() -> None:
    a, b, _ = make_inputs(40, 48, 56, torch.float16, DEVICE)
    assert torch.allclose(matmul(a, b).float(), a.float() @ b.float(), atol=1e-2, rtol=1e-2)


def test_flop_model() -> None:
    assert matmul_flops(2, 3, 5) == 60


# --- bad input: each raises its documented error, naming the problem ------------------------


def _t(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype)


A, B = _t(4, 8), _t(8, 6)


@pytest.mark.parametrize(
    ("a", "b", "kwargs", "error", "match"),
    [
        ([[1.0]], B, {}, TypeError, "a must be a torch.Tensor"),
        (_t(4, 8, dtype=torch.float64), B, {}, TypeError, "a has dtype float64"),
        (_t(4, 8, dtype=torch.int32), B, {}, TypeError, "a has dtype int32"),
        (A, _t(8, 6, dtype=torch.float16), {}, TypeError, "a has dtype float32 but b has"),
        (_t(4, 8, 1), B, {}, ValueError, "a must have 2 dimension"),
        (A, _t(7, 6), {}, ValueError, "inner dimensions differ"),
        (A, _t(6, 8).t(), {}, ValueError, "b must be contiguous"),
        (_t(0, 8), B, {}, ValueError, "a is empty"),
        (A, B, {"bias": _t(5)}, ValueError, "bias must have N=6"),
        (A, B, {"bias": _t(6, dtype=torch.float16)}, TypeError, "bias has dtype float16"),
        (A, B, {"activation": "tanh"}, ValueError, "activation must be one of"),
        (A, B, {"impl": "cuda:9"}, ValueError, "unknown impl 'cuda:9'"),
        (A, B, {"out": _t(4, 5)}, ValueError, r"out must be \(4, 6\)"),
        (A.half(), B.half(), {"impl": "cuda:4"}, TypeError, "takes float32 only"),
        (A, B, {"impl": "cuda:4", "activation": "relu"}, ValueError, "fused in the triton"),
        (A, B.to("meta"), {}, ValueError, "a is on cpu but b is on meta"),
    ],
    ids=[
        "not-a-tensor",
        "float64",
        "int32",
        "dtype-mismatch",
        "rank-3",
        "inner-mismatch",
        "non-contiguous",
        "empty",
        "bias-length",
        "bias-dtype",
        "activation",
        "unknown-impl",
        "bad-out",
        "cuda-fp16",
        "cuda-epilogue",
        "device-mismatch",
    ],
)
def test_bad_input_raises(a, b, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        matmul(a, b, **kwargs)


def test_cuda_impl_on_cpu_tensors_is_refused() -> None:
    with pytest.raises(ValueError, match="impl 'cuda:5' runs on a CUDA GPU; got a tensor on cpu"):
        matmul(A, B, impl="cuda:5")


# --- the checker must reject deliberately wrong kernels -------------------------------------


def test_checker_rejects_triton_tile_without_masks() -> None:
    from fixtures.matmul_wrong import matmul_nomask

    a, b, _ = make_inputs(17, 33, 65, torch.float32, DEVICE)
    result = run_checked(matmul_nomask, [a, b], reference(a, b), tolerances=tolerances("t", 65))
    assert not result.ok
    assert result.wrote_outside and result.mismatches > 0, result.message


def test_wrong_cuda_fixture_compiles() -> None:
    from fixtures.matmul_wrong import MATMUL_NOMASK_CU

    assert "matmul_tile_nomask_f32" in mkcuda.compile_file(MATMUL_NOMASK_CU, "sm_90").usage


@pytest.mark.gpu
def test_checker_rejects_cuda_tile_without_edge_guards() -> None:
    from fixtures.matmul_wrong import matmul_nomask_cuda

    # 40 = 32 + 8: partial tiles in every direction, and the out-of-bounds reads stay inside the
    # checker's 1024-element margins (so they read plausible numbers rather than fault).
    a, b, _ = make_inputs(40, 40, 40, torch.float32, "cuda")
    result = run_checked(
        matmul_nomask_cuda, [a, b], reference(a, b), tolerances=tolerances("cuda:3", 40)
    )
    assert not result.ok
    assert result.wrote_outside, result.message


def test_pinned_config_keeps_only_the_named_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """MINIKERNEL_MATMUL_CONFIG (set by lab 04 for the process ncu profiles) leaves the
    autotuner one config, the one the timing chose; a pin that names none of the launch's
    configs, or is not JSON, is an error that says so."""
    import json

    from minikernel.kernels.matmul import triton_kernels as mtk

    configs = mtk.CONFIGS_16BIT
    monkeypatch.delenv(mtk.PIN_ENV, raising=False)
    assert mtk.pinned(configs) == configs
    want = mtk.config_of(configs[1])
    assert want == {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 4, "num_warps": 8}
    monkeypatch.setenv(mtk.PIN_ENV, json.dumps(want))
    assert mtk.pinned(configs) == [configs[1]]
    with pytest.raises(ValueError, match="none of this launch's configs"):
        mtk.pinned(mtk.CONFIGS_32BIT)  # a bf16 config asked of an fp32 launch
    monkeypatch.setenv(mtk.PIN_ENV, "BLOCK_M=128")
    with pytest.raises(ValueError, match="must be a JSON object"):
        mtk.pinned(configs)


@pytest.mark.skipif(not INTERPRET and not HAS_GPU, reason="needs Triton (interpreter or GPU)")
def test_last_config_is_the_one_the_launch_ran() -> None:
    """Lab 04 records, next to each Triton time, the config the autotuner ran it with."""
    from minikernel.kernels.matmul import make_runner
    from minikernel.kernels.matmul import triton_kernels as mtk

    make_runner("triton:1", [64, 64, 64], torch.float32, device=DEVICE)()
    got = mtk.last_config(1)
    allowed = mtk.INTERPRET_CONFIGS if INTERPRET else mtk.CONFIGS_32BIT
    assert got in [mtk.config_of(c) for c in allowed]
