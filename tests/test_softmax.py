"""Softmax: every rung against the fp64 reference, special values, dims and strides, bad input,
the online recurrence's drift in fp32, kernel planning, and the maskless kernel of exercise E2."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import DEVICE, HAS_GPU, INTERPRET, compiled, run_lab_on_cpu

from minikernel.kernels.softmax import (
    TOLERANCES,
    VARIANTS,
    UnsupportedShape,
    bytes_moved,
    default_impl,
    make_inputs,
    reference,
    softmax,
    supports,
    tolerances,
)
from minikernel.kernels.softmax import cuda_kernels as ck
from minikernel.testing import run_checked

# NumPy (and so Triton's interpreter) warns on inf - inf and x / 0: the special rows do that.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

# (atol, rtol) per output dtype. Every impl computes in fp32 and rounds once to the dtype, but
# cuda:10, which rounds 16-bit outputs twice (tolerances(impl, n) says how much that adds).
# - float32: exp is one ex2.approx on (x - max) * log2(e); rounding that product costs a relative
#   |x - max| * 2^-24 * ln 2 (about 1e-6 for the |x - max| <= 20 of these inputs), ex2.approx
#   adds ~2 ulp, the sum and the division a few more. test_online_drift_fp32 measures the sum's
#   share for both recurrences. 1e-5 leaves a margin over all of it; torch's own fp32 default
#   (1.3e-6) assumes a correctly rounded exp. atol only absorbs outputs below 1e-12, which
#   differ by denormal flushing.
# - float16: one rounding to 11 significant bits is at most 2^-11 = 4.9e-4 relative: rtol 1e-3.
#   Outputs under 6.1e-5 are subnormal in fp16, spaced 2^-24 = 6e-8 apart: atol 6e-8.
# - bfloat16: 8 significant bits, at most 2^-8 = 3.9e-3 relative: rtol 8e-3. Same exponent
#   range as fp32, so no subnormal outputs here: a tiny atol.
# The table itself lives in minikernel.kernels.softmax (TOLERANCES, and tolerances(impl, n)
# for the serial rungs on long rows), so that lab 01 checks with exactly the same numbers.
DTYPES = [torch.float32, torch.float16, torch.bfloat16]

SHAPES = [
    (1, 1),  # one element: the max is the element, the output exactly 1
    (3, 5),  # shorter than one 16-byte vector of halves: the whole row is scalar edges
    (512, 600),  # the seed's point (B=512, V=600); 2400 / 1200 bytes: 16-byte aligned rows
    (1823, 781),  # odd rows and columns: misaligned row starts (head and tail edges), a partial
    #               last block of 4 rows (cuda:7) or of packed rows (triton:1)
    (7, 4097),  # one past 4096: a 1-element tail in triton:1's tile; two tiles of triton:2
    (5, 32768),  # triton:1's widest tile and cuda:6's 1024-thread block, exactly full
    (4, 131079),  # past shared memory and registers: online loops (cuda:8, triton:2) and
    #               clusters of 8 blocks (cuda:9); the smem and register rungs must refuse it
    (3, 262151),  # 2^18 + 7: cuda:10's largest slices (8 x 128 KB in fp32), a ragged last one
]
IMPLS = sorted(VARIANTS)


def _dt(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def _skip_reason(impl: str, dtype: torch.dtype) -> str | None:
    if impl.startswith("cuda:") and not HAS_GPU:
        return "CUDA C kernels need a GPU (test_cuda_compile.py compiles them; planning is below)"
    if impl.startswith("triton:") and INTERPRET and dtype == torch.bfloat16:
        return "Triton's interpreter computes bf16 wrong (NaN); bf16 is tested on the GPU"
    return None


def _rows(impl: str, m: int) -> int:
    """The interpreter runs one program at a time, at ~10 ms each and more on big tensors, so on
    the CPU the Triton kernels keep the first 67 rows of the tall shapes: rows are independent,
    the row length is what those shapes test, and 67 = 4 * 16 + 3 still leaves triton:1 a
    partial last program of packed rows."""
    return min(m, 67) if INTERPRET and impl.startswith("triton:") else m


def _device(impl: str) -> str:
    if impl == "numpy":
        return "cpu"
    return "cuda" if impl.startswith("cuda:") else DEVICE


def _run(impl: str):  # type: ignore[no-untyped-def]
    return lambda x, out: softmax(x, impl=impl, out=out)


@pytest.mark.parametrize("dtype", DTYPES, ids=_dt)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("impl", IMPLS)
def test_variant_matches_reference(impl: str, shape: tuple[int, int], dtype: torch.dtype) -> None:
    if (why := _skip_reason(impl, dtype)) is not None:
        pytest.skip(why)
    m, n = _rows(impl, shape[0]), shape[1]
    x = make_inputs(m, n, dtype, _device(impl), seed=n)
    if (limit := supports(impl, m, n, dtype)) is not None:
        with pytest.raises(UnsupportedShape, match=impl.replace(":", ".")):
            softmax(x, impl=impl)
        pytest.skip(f"refused by design: {limit}")
    result = run_checked(_run(impl), [x], reference(x), tolerances=tolerances(impl, n), name=impl)
    result.raise_if_failed()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=_dt)
def test_numpy_fallback_matches_reference(dtype: torch.dtype) -> None:
    x = make_inputs(300, 781, dtype, "cpu", seed=1)
    run_checked(
        _run("numpy"), [x], reference(x), tolerances=TOLERANCES, name="numpy"
    ).raise_if_failed()


# --- special values: rows with -inf, +inf and NaN give exactly what torch.softmax gives ------


def special_rows(n: int, dtype: torch.dtype, device: str) -> torch.Tensor:
    """Eight rows of length n, each a trap for one part of a softmax kernel."""
    inf, nan = float("inf"), float("nan")
    x = make_inputs(8, n, torch.float32, "cpu", seed=n)
    x[0] = -inf  # all -inf: torch gives NaN (-inf - -inf)
    x[1, n // 2] = inf  # one +inf: NaN everywhere (inf - inf)
    x[2, n - 1] = nan  # one NaN, last: NaN everywhere, even though max() may skip it
    x[3, : n // 2] = -inf  # a -inf prefix: the online (max, sum) starts at (-inf, 0)
    x[4, ::3] = -inf  # scattered -inf: zeros among finite outputs
    x[5] = torch.linspace(-30000.0, 30000.0, n)  # huge spread: exp underflows, never overflows
    x[6] = 0.0  # all equal: exactly 1/n each
    x[7] = torch.sort(x[7]).values  # ascending: the running max grows at every element
    return x.to(dtype).to(device)


# 37: one warp's worth; 5000: a block's (two tiles of triton:2 on the CPU); 40000: past
# registers, so the online loop (cuda:8, triton:2) and clusters (cuda:9) meet the traps.
@pytest.mark.parametrize("n", [37, 5000, 40000], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("dtype", DTYPES, ids=_dt)
@pytest.mark.parametrize("impl", [*IMPLS, "numpy"])
def test_special_values_match_torch(impl: str, dtype: torch.dtype, n: int) -> None:
    if (why := _skip_reason(impl, dtype)) is not None:
        pytest.skip(why)
    x = special_rows(n, dtype, _device(impl))
    if supports(impl, 8, n, dtype) is not None:
        pytest.skip("this rung cannot hold such a row (tested in test_variant_matches_reference)")
    ref = reference(x)
    got = run_checked(_run(impl), [x], ref, tolerances=tolerances(impl, n), name=impl)
    got.raise_if_failed()
    # The NaN rows are exactly torch's, in torch's own dtype too.
    want_nan = torch.isnan(torch.softmax(x.float().cpu(), dim=-1))
    out = softmax(x, impl=impl).float().cpu()
    assert torch.equal(torch.isnan(out), want_nan)
    assert torch.equal(want_nan.all(dim=1), torch.tensor([True, True, True] + [False] * 5))


# --- dims, strides and the public function --------------------------------------------------


@pytest.mark.parametrize("dim", [0, 1, 2, -1, -2])
def test_any_dim_matches_torch(dim: int) -> None:
    x = make_inputs(12, 35, torch.float32, DEVICE, seed=3).view(3, 4, 35)
    want = torch.softmax(x, dim=dim)
    got = softmax(x, dim=dim)
    assert got.shape == x.shape
    torch.testing.assert_close(got, want, atol=1e-7, rtol=1e-5)


@pytest.mark.parametrize(
    "view",
    [
        lambda t: t.t(),  # transposed: rows are strided
        lambda t: t[::2, 1::3],  # every other row, every third column
        lambda t: t.unsqueeze(1).expand(-1, 3, -1),  # stride 0 along a dimension
    ],
    ids=["transposed", "sliced", "expanded"],
)
def test_non_contiguous_input(view) -> None:  # type: ignore[no-untyped-def]
    x = view(make_inputs(40, 50, torch.float16, DEVICE, seed=4))
    assert not x.is_contiguous()
    torch.testing.assert_close(
        softmax(x).float(), torch.softmax(x.float(), dim=-1), atol=6e-8, rtol=1e-3
    )


def test_zero_dim_and_no_rows() -> None:
    assert softmax(torch.tensor(3.0, device=DEVICE)).item() == 1.0
    assert softmax(torch.empty(0, 5, device=DEVICE)).shape == (0, 5)


def test_out_argument_is_filled_and_returned() -> None:
    x = make_inputs(9, 100, torch.float32, DEVICE, seed=5)
    out = torch.empty_like(x)
    assert softmax(x, out=out) is out
    torch.testing.assert_close(out, torch.softmax(x, dim=-1), atol=1e-12, rtol=1e-5)
    outt = torch.empty(100, 9, device=DEVICE)
    assert softmax(x.t(), dim=0, out=outt) is outt
    torch.testing.assert_close(outt, torch.softmax(x.t(), dim=0), atol=1e-12, rtol=1e-5)


def test_byte_model() -> None:
    assert bytes_moved(512, 600, torch.float32) == 2 * 512 * 600 * 4
    assert bytes_moved(32768, 4096, torch.bfloat16) == 2 * 32768 * 4096 * 2


def test_default_impl_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    x = torch.zeros(2, 8)
    if INTERPRET:
        assert default_impl(x) == "triton:1"
        assert default_impl(torch.zeros(2, 40000)) == "triton:2"
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    assert default_impl(x) == "numpy"  # a plain CPU: NumPy


# --- bad input: each raises its documented error, naming the problem ------------------------


@pytest.mark.parametrize(
    ("x", "kwargs", "error", "match"),
    [
        ([1.0, 2.0], {}, TypeError, "x must be a torch.Tensor"),
        (torch.ones(2, 3, dtype=torch.int32), {}, TypeError, "dtype int32"),
        (torch.ones(2, 3, dtype=torch.float64), {}, TypeError, "dtype float64"),
        (torch.ones(3, 0), {}, ValueError, "size 0 along dim 1"),
        (torch.ones(3, 4), {"dim": 2}, ValueError, "dim 2 is out of range"),
        (torch.ones(3, 4), {"dim": 1.0}, TypeError, "dim must be an int"),
        (torch.ones(3, 4), {"impl": "cuda:99"}, ValueError, "unknown impl 'cuda:99'"),
        (
            torch.ones(3, 4),
            {"impl": "cuda:3"},
            ValueError,
            "runs on a CUDA GPU; got a tensor on cpu",
        ),
        (torch.ones(3, 4, device="meta"), {}, ValueError, "softmax runs on cpu or cuda"),
        (torch.ones(3, 4), {"out": torch.empty(4, 3)}, ValueError, r"out has \(4, 3\)"),
    ],
    ids=[
        "not-a-tensor",
        "int32",
        "float64",
        "empty-dim",
        "dim-range",
        "dim-type",
        "unknown-impl",
        "cuda-on-cpu",
        "meta-device",
        "bad-out",
    ],
)
def test_bad_input_raises(x, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        softmax(x, **kwargs)


@pytest.mark.skipif(not INTERPRET, reason="needs the interpreter (CPU tensors)")
def test_row_too_long_for_a_tile_is_refused() -> None:
    with pytest.raises(UnsupportedShape, match="'triton:1' holds a row in registers"):
        softmax(torch.zeros(2, 40000), impl="triton:1")


# --- triton:1's two forms: the row kept in registers, or read again (RELOAD) ----------------


@pytest.mark.parametrize("n", [37, 600, 5000], ids=lambda n: f"n{n}")
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=_dt)
def test_kernel1_reload_gives_the_same_bits(dtype: torch.dtype, n: int) -> None:
    """The autotuner may pick either form per shape, so both must give the same answer: the
    reload recomputes exp(x - max) from a second read of the same x, with the same operations,
    so the two outputs are identical bit for bit, traps included (NaN rows, -inf prefixes, the
    30000-wide spread). 37 and 600: packed rows and a masked tail; 5000: one row, 8192 lanes."""
    import triton

    from minikernel.kernels.softmax import triton_kernels as tk

    x = special_rows(n, dtype, DEVICE)
    block_n = triton.next_power_of_2(n)
    rows = tk.rows_per_program(len(x), block_n)
    outs = []
    for reload in (False, True):
        y = torch.full_like(x, float("nan"))
        grid = (triton.cdiv(len(x), rows),)
        tk.softmax_kernel1[grid](
            x, y, len(x), n, 8, block_n, rows, tk.vector_divisor(n), RELOAD=reload, num_warps=4
        )
        outs.append(y)
    assert torch.equal(outs[0].isnan(), outs[1].isnan())
    assert torch.equal(outs[0].nan_to_num(), outs[1].nan_to_num())
    run_checked(
        lambda a, out: out.copy_(outs[1]), [x], reference(x), tolerances=TOLERANCES
    ).raise_if_failed()


def test_kernel1_tunes_both_forms_at_each_warp_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a GPU the autotuner times RELOAD on and off at each of the two warp counts the pruning
    keeps (16 or 32 elements per thread): four configs per (BLOCK_N, ROWS)."""
    from minikernel.kernels.softmax import triton_kernels as tk

    monkeypatch.setattr(tk, "INTERPRET", False)
    configs = tk._fused_configs()
    for block_n, rows, warps in [(1024, 1, {1, 2}), (4096, 1, {4, 8}), (512, 2, {1, 2})]:
        kept = tk._prune_fused(configs, {"BLOCK_N": block_n, "ROWS": rows})
        assert {(c.num_warps, c.kwargs["RELOAD"]) for c in kept} == {
            (w, r) for w in warps for r in (False, True)
        }


@pytest.mark.parametrize("reload", [False, True])
def test_pinned_kernel1_config_skips_the_autotuner(
    monkeypatch: pytest.MonkeyPatch, reload: bool
) -> None:
    """With PIN_ENV set (the lab sets it for the process ncu profiles), launch_kernel1 runs that
    config and never the autotuner, whose choice could differ from the timed one."""
    import json

    from minikernel.kernels.softmax import triton_kernels as tk

    class NoTuning:
        def __getitem__(self, grid):  # type: ignore[no-untyped-def]
            raise AssertionError("the autotuned kernel ran despite the pinned config")

    if DEVICE == "cpu" and not INTERPRET:
        pytest.skip("Triton needs a GPU or its interpreter")
    monkeypatch.setattr(tk, "softmax_kernel1_tuned", NoTuning())
    monkeypatch.setenv(tk.PIN_ENV, json.dumps({"num_warps": 2, "RELOAD": reload}))
    x = special_rows(600, torch.float32, DEVICE)
    run_checked(
        lambda a, out: tk.launch_kernel1(a, out), [x], reference(x), tolerances=TOLERANCES
    ).raise_if_failed()


@pytest.mark.parametrize(
    "text", ['{"num_warps": 3, "RELOAD": true}', '{"num_warps": 4}', "4 warps", "[4, true]"]
)
def test_bad_pinned_kernel1_config_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    from minikernel.kernels.softmax import triton_kernels as tk

    monkeypatch.setenv(tk.PIN_ENV, text)
    x = torch.zeros(2, 8)
    with pytest.raises(ValueError, match=tk.PIN_ENV):
        tk.launch_kernel1(x, torch.empty_like(x))


def test_kernel1_tunes_again_for_another_number_of_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """The autotuner's key holds the number of rows as a power of two, so a 512-row call and a
    32768-row call of the same row length get a choice each (in the lab, the first is a quick
    correctness check and the second the timed case), while 30000 rows share 32768's. (The
    interpreter has one config and keeps no cache, so this checks the key and what is passed.)"""
    from minikernel.kernels.softmax import triton_kernels as tk

    assert list(tk.softmax_kernel1_tuned.keys) == ["BLOCK_N", "ROWS", "rows_class"]
    names = tk.softmax_kernel1_tuned.arg_names
    seen = []

    class Spy:
        def __getitem__(self, grid):  # type: ignore[no-untyped-def]
            return lambda *args: seen.append(dict(zip(names, args, strict=False)))

    monkeypatch.setattr(tk, "softmax_kernel1_tuned", Spy())
    monkeypatch.delenv(tk.PIN_ENV, raising=False)
    for m in (512, 32768, 30000):
        x = torch.zeros(m, 600)
        tk.launch_kernel1(x, torch.empty_like(x))
    assert [a["rows_class"] for a in seen] == [512, 32768, 32768]
    assert (
        len({(a["BLOCK_N"], a["ROWS"]) for a in seen}) == 1
    )  # the old key could not tell them apart


def test_last_kernel1_config_names_warps_and_reload() -> None:
    from minikernel.kernels.softmax import triton_kernels as tk

    if DEVICE == "cpu" and not INTERPRET:
        pytest.skip("Triton needs a GPU or its interpreter")
    softmax(make_inputs(4, 600, torch.float32, DEVICE, seed=2), impl="triton:1")
    config = tk.last_kernel1_config()
    assert config is not None
    assert set(config) == {"num_warps", "RELOAD"}
    assert config["num_warps"] in (1, 2, 4, 8, 16, 32)
    assert isinstance(config["RELOAD"], bool)


@pytest.mark.gpu
def test_numpy_on_cuda_is_refused() -> None:
    with pytest.raises(ValueError, match="impl 'numpy' runs on the CPU"):
        softmax(torch.zeros(2, 3, device="cuda"), impl="numpy")


# --- online vs three-pass in fp32: the drift, measured ---------------------------------------


def _three_pass(x: np.ndarray, chunk: int) -> np.ndarray:
    """fp32 max, sum of exp and division. The sum runs sequentially over chunks of `chunk`
    elements (a thread's share), then pairwise over the chunk sums (the block's tree)."""
    m = x.max(axis=1, keepdims=True)
    e = np.exp(x - m)
    parts = np.cumsum(e.reshape(len(x), -1, chunk), axis=2, dtype=np.float32)[:, :, -1]
    while parts.shape[1] > 1:
        parts = parts[:, 0::2] + parts[:, 1::2]
    return e / parts


def _online(x: np.ndarray, chunk: int) -> np.ndarray:
    """fp32 Milakov-Gimelshein recurrence over each chunk, element by element, then the chunks'
    (max, sum) pairs merged pairwise, as the kernels' block reductions do."""
    r = x.reshape(len(x), -1, chunk)
    m = np.full(r.shape[:2], -np.inf, np.float32)
    s = np.zeros(r.shape[:2], np.float32)
    for j in range(chunk):
        mj = np.maximum(m, r[:, :, j])
        s = s * np.exp(m - mj) + np.exp(r[:, :, j] - mj)
        m = mj
    while m.shape[1] > 1:
        mj = np.maximum(m[:, 0::2], m[:, 1::2])
        s = s[:, 0::2] * np.exp(m[:, 0::2] - mj) + s[:, 1::2] * np.exp(m[:, 1::2] - mj)
        m = mj
    return np.exp(x - m) / s


@pytest.mark.parametrize(
    ("n", "chunk"),
    [(4096, 4096), (131072, 32)],
    ids=["one-sequential-chain", "kernel-shaped"],
)
def test_online_drift_fp32(n: int, chunk: int) -> None:
    """Does one-pass (online) softmax drift from three-pass in fp32 enough to need a looser
    tolerance (the seed asks whether 1e-4 is needed instead of 1e-5)? Both are emulated in
    float32 NumPy: once as a single sequential chain over a 4096-element row (the worst case a
    kernel of this package has: none sums more than a few hundred elements in one chain), once
    shaped like the kernels (32 elements per thread, then a tree). Row 0 is sorted, so that the
    online max grows at every element."""
    rng = np.random.default_rng(0)
    x = (2 * rng.standard_normal((8, n))).astype(np.float32)
    x[0] = np.sort(x[0])
    e = np.exp(x.astype(np.float64) - x.max(axis=1, keepdims=True))
    ref = e / e.sum(axis=1, keepdims=True)
    three, online = _three_pass(x, chunk), _online(x, chunk)
    err_three = float(np.max(np.abs(three - ref) / ref))
    err_online = float(np.max(np.abs(online - ref) / ref))
    drift = float(np.max(np.abs(online - three) / ref))
    print(
        f"\nn={n} chunk={chunk}: three-pass {err_three:.2e}, online {err_online:.2e}, "
        f"online vs three-pass {drift:.2e} (fp32 rtol {TOLERANCES[torch.float32][1]:.0e})"
    )
    rtol = TOLERANCES[torch.float32][1]
    # Both are well inside the fp32 tolerance, and their difference is of the same order as
    # each one's own rounding error: online softmax needs no looser tolerance than three passes.
    assert max(err_three, err_online, drift) < rtol / 2
    assert drift < 4 * max(err_three, err_online)


# --- planning: which kernel each rung runs, checked without a GPU ---------------------------

SM80 = ck.DeviceFacts(cc=(8, 0), smem_optin=166912)


@pytest.mark.parametrize(
    ("rung", "n", "dtype", "kernel"),
    [
        (1, 600, torch.float32, "softmax_kernel1_f32"),
        (2, 600, torch.float32, "softmax_kernel2_f32"),
        (7, 600, torch.float32, "softmax_kernel7_v8_f32"),  # 150 vectors: 8 per lane
        (7, 600, torch.bfloat16, "softmax_kernel7_v4_bf16"),  # 75 vectors: 4 per lane
        (7, 4096, torch.bfloat16, "softmax_kernel6_t128_bf16"),  # too long for a warp
        (8, 32768 + 3, torch.float32, "softmax_kernel6_t1024_f32"),  # + edges: one block
        (8, 32768 + 16, torch.float32, "softmax_kernel8_f32"),  # does not: the online loop
        (9, 16384, torch.bfloat16, "softmax_kernel6_t512_bf16"),  # one 512-thread block holds it
        (9, 16384 + 16, torch.bfloat16, "softmax_kernel9_t512_c2_bf16"),
        (9, 131072, torch.float32, "softmax_kernel9_t512_c8_f32"),
        (9, 262144, torch.bfloat16, "softmax_kernel9_t1024_c8_bf16"),
        (9, 262144 + 16, torch.bfloat16, "softmax_kernel8_bf16"),  # past 8 x 1024 threads
        (10, 600, torch.float32, "softmax_kernel7_v8_f32"),  # a warp holds it: rung 7
        (10, 4096, torch.bfloat16, "softmax_kernel6_t128_bf16"),  # 8 KB: registers do better
        (10, 8192, torch.bfloat16, "softmax_kernel10_t128_c1_bf16"),  # 16 KB in one block
        (10, 16384, torch.float32, "softmax_kernel10_t512_c1_f32"),  # exactly 64 KB
        (10, 16384 + 4, torch.float32, "softmax_kernel10_t256_c2_f32"),  # 16 bytes more
        (10, 131072, torch.bfloat16, "softmax_kernel10_t256_c4_bf16"),
        (10, 262144, torch.float32, "softmax_kernel10_t512_c8_f32"),  # 8 x 128 KB slices
        (10, 8 * 14464 * 4 + 4, torch.float32, "softmax_kernel8_f32"),  # past 8 full blocks
        (11, 600, torch.bfloat16, "softmax_kernel11_v4_bf16"),  # a warp per row, as rung 7
        (11, 1024, torch.float32, "softmax_kernel11_v8_f32"),
        (11, 4096, torch.bfloat16, "softmax_kernel11_t128_bf16"),  # a block per row, as rung 6
        (11, 4097, torch.bfloat16, "softmax_kernel11_t128_bf16"),  # 512 vectors + 1 edge
        (11, 2048, torch.float32, "softmax_kernel11_t64_f32"),
        (11, 8192, torch.bfloat16, "softmax_kernel11_t256_bf16"),  # 16 KB: still registers
        (11, 8200, torch.bfloat16, "softmax_kernel10_t128_c1_bf16"),  # past 16 KB: rung 10's
        (11, 131072, torch.bfloat16, "softmax_kernel10_t256_c4_bf16"),
    ],
)
def test_plan_picks_kernel(rung: int, n: int, dtype: torch.dtype, kernel: str) -> None:
    assert ck.plan(rung, 1000, n, dtype, ck.H200).kernel == kernel


def test_plan_grid_and_shared_memory() -> None:
    p = ck.plan(9, 100, 262144, torch.float32, ck.H200)
    assert (p.grid, p.block, p.smem) == (800, 1024, 0)  # 8 blocks per row
    p = ck.plan(10, 100, 131072, torch.bfloat16, ck.H200)
    assert (p.grid, p.block, p.smem, p.per_block) == (400, 256, 65536, 4096)  # 4 x 64 KB
    p = ck.plan(10, 100, 8192 + 9, torch.bfloat16, ck.H200)  # the edges add no vector
    assert (p.grid, p.block, p.smem, p.per_block) == (100, 128, 16400, 1025)
    p = ck.plan(7, 10, 600, torch.float32, ck.H200)
    assert (p.grid, p.block, p.takes_m) == (3, 128, True)  # 4 rows per block
    p = ck.plan(11, 10, 600, torch.float32, ck.H200)
    assert (p.grid, p.block, p.takes_m) == (3, 128, True)  # rung 7's layout
    p = ck.plan(11, 10, 4096, torch.float32, ck.H200)
    assert (p.grid, p.block, p.takes_m) == (10, 128, True)  # rung 6's, with (x, y, M, N)
    p = ck.plan(4, 7, 1000, torch.float16, ck.H200)
    assert (p.grid, p.block, p.smem) == (7, 1024, 4000)  # fp32 copy of the row
    p = ck.plan(5, 7, 1000, torch.float16, ck.H200)
    assert (p.grid, p.block, p.smem) == (7, 128, 125 * 16)  # 16-byte vectors of halves


def test_plan_refuses_what_does_not_fit() -> None:
    limit = ck.H200.smem_optin - ck.STATIC_SMEM_RESERVE
    ck.plan(4, 1, limit // 4, torch.float32, ck.H200)  # exactly fits
    with pytest.raises(UnsupportedShape, match=r"'cuda:4' cannot run 1 x \d+ float32"):
        ck.plan(4, 1, limit // 4 + 1, torch.float32, ck.H200)
    with pytest.raises(UnsupportedShape, match=r"'cuda:5'.*shared memory"):
        ck.plan(5, 4, 131079, torch.bfloat16, ck.H200)
    with pytest.raises(UnsupportedShape, match=r"'cuda:6'.*at most 32768 elements"):
        ck.plan(6, 4, 32768 + 16, torch.float32, ck.H200)
    # No clusters before sm_90: cuda:9 and cuda:10 fall back to the loop.
    assert ck.plan(9, 4, 131072, torch.float32, SM80).kernel == "softmax_kernel8_f32"
    assert ck.plan(10, 4, 131072, torch.float32, SM80).kernel == "softmax_kernel8_f32"
    assert ck.plan(11, 4, 131072, torch.float32, SM80).kernel == "softmax_kernel8_f32"
    assert ck.plan(11, 4, 4096, torch.float32, SM80).kernel == "softmax_kernel11_t128_f32"
    # Past 16 KB, rung 10's path; before sm_90 that is rung 8's, registers while a block holds it
    assert ck.plan(11, 4, 8192, torch.float32, SM80).kernel == "softmax_kernel6_t256_f32"


def test_rung12_plan() -> None:
    """Rung 12 is rung 11's plan with rung 10's fp32 kernels swapped for rung 12's, which take
    the number of rows ahead to prefetch: PREFETCH_BYTES of rows, rounded up, at least one."""
    for m, n, dtype in [
        (100, 8192, torch.float32),  # 32 KB: one block
        (7, 16391, torch.float32),  # a cluster of two with scalar edges
        (8192, 65536, torch.float32),  # 256 KB: four blocks
        (8192, 262144, torch.float32),  # 1 MB: 8 x 128 KB
    ]:
        p10 = ck.plan(11, m, n, dtype, ck.H200)
        p12 = ck.plan(12, m, n, dtype, ck.H200)
        assert p10.rung == 10
        assert p12.kernel == p10.kernel.replace("kernel10", "kernel12")
        assert (p12.rung, p12.grid, p12.block, p12.smem, p12.per_block) == (
            12,
            p10.grid,
            p10.block,
            p10.smem,
            p10.per_block,
        )
        row_bytes = n * torch.finfo(dtype).bits // 8
        assert (p12.ahead - 1) * row_bytes < ck.PREFETCH_BYTES <= p12.ahead * row_bytes
    assert ck.prefetch_rows(1 << 30, torch.float32) == 1  # rows past 8 MB: the next one
    assert ck.plan(12, 3, 4096, torch.float32, ck.H200).rung == 11  # 16 KB: registers
    assert ck.plan(12, 3, 600, torch.bfloat16, ck.H200).rung == 11
    for dtype in (torch.bfloat16, torch.float16):  # 16-bit rows: rung 11's plan (rung 10 here)
        assert ck.plan(12, 3, 65536, dtype, ck.H200) == ck.plan(11, 3, 65536, dtype, ck.H200)
    assert ck.plan(12, 3, 65536, torch.float32, SM80).kernel == "softmax_kernel8_f32"


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "dtype"),
    [
        (3, 8192, torch.float32),  # fewer rows than `ahead` (256): no prefetch at all
        (300, 8201, torch.float32),  # rows off 16-byte boundaries; the last 44 prefetch none
        (40, 65533, torch.float32),  # a cluster of four with edges; ahead is 33 rows
        (70, 32768, torch.float32),  # a cluster of two; ahead is 64 rows
        (10, 262147, torch.float32),  # eight 128 KB blocks with edges; ahead is 9 rows
    ],
)
def test_rung12_matches_with_and_without_prefetch(m: int, n: int, dtype: torch.dtype) -> None:
    """The hint moves data into L2 only: cuda:12's result is checked against the reference
    (the checker also catches writes outside y) on shapes where every row, some rows or no row
    prefetches another, including the last rows, whose row + ahead is past the matrix."""
    if ck.plan(12, m, n, dtype, ck.device_facts(0)).rung != 12:
        pytest.skip("no clusters on this GPU: cuda:12 runs rung 11's kernels")
    x = make_inputs(m, n, dtype, "cuda", seed=n)
    run_checked(
        _run("cuda:12"), [x], reference(x), tolerances=tolerances("cuda:12", n), name="cuda:12"
    ).raise_if_failed()


# Kernel 14's launch shapes, which rung 16 runs with its own kernels too.
SLICE_CASES = [
    (5, 8203, torch.bfloat16, False),  # two 16 KB slices, scalar edges in block 0
    (33, 16392, torch.float16, False),  # one vector past 32 KB: two 32 KB slices, half full
    (7, 65545, torch.bfloat16, False),  # eight slices, the last one shorter, edges
    (3, 262147, torch.bfloat16, False),  # a cluster of 16 (the host's opt-in), edges
    (4, 65541, torch.float32, False),  # fp32: sixteen 32 KB slices
    (2, 262145, torch.float32, False),  # fp32: sixteen 64 KB slices of 512 threads
    (5, 65536, torch.bfloat16, False),  # whole slices, no edges: the unchecked kernel
    (3, 262144, torch.bfloat16, False),  # the same over a cluster of 16
    (4, 16384, torch.float16, False),  # two full 16 KB slices
    (3, 131072, torch.float32, False),  # fp32: sixteen full 32 KB slices
    (2, 262144, torch.float32, False),  # fp32: sixteen full 64 KB slices
    (8, 65536, torch.bfloat16, True),  # the special rows in the unchecked kernel
    (8, 65545, torch.bfloat16, True),  # the special rows (-inf, +inf, NaN) over 8 blocks
    (8, 262145, torch.float32, True),  # and over 16
]


def _check_slices(rung: int, m: int, n: int, dtype: torch.dtype, special: bool) -> None:
    """One register-slice launch of rung 14 or 16 against the reference (the checker also
    catches writes outside y), and torch's NaN rows where ``special``."""
    if ck.plan(rung, m, n, dtype, ck.device_facts(0)).rung != rung:
        pytest.skip(f"no clusters on this GPU: cuda:{rung} runs another rung's plan")
    impl = f"cuda:{rung}"
    x = special_rows(n, dtype, "cuda") if special else make_inputs(m, n, dtype, "cuda", seed=n)
    run_checked(
        _run(impl), [x], reference(x), tolerances=tolerances(impl, n), name=impl
    ).raise_if_failed()
    if special:
        want_nan = torch.isnan(torch.softmax(x.float().cpu(), dim=-1))
        assert torch.equal(torch.isnan(softmax(x, impl=impl).float().cpu()), want_nan)


@pytest.mark.gpu
@pytest.mark.parametrize(("m", "n", "dtype", "special"), SLICE_CASES)
def test_rung14_register_slices(m: int, n: int, dtype: torch.dtype, special: bool) -> None:
    """Each kernel 14 launch shape, including empty and short last slices, edges and torch's
    NaN rows."""
    _check_slices(14, m, n, dtype, special)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "dtype", "special"),
    [
        *SLICE_CASES,
        (6, 65536, torch.float32, False),  # fp32 256 KB, rung 16's own: two full 128 KB slices
        (5, 65537, torch.float32, False),  # the same with an edge: the checked kernel
        (8, 65536, torch.float32, True),  # the special rows (a +-30000 ramp: the fold's fix)
        (4, 65536, torch.bfloat16, False),  # bf16 128 KB, rung 16's own: eight 16 KB slices
        (3, 65543, torch.bfloat16, False),  # the same with an edge: the checked kernel
        (8, 65543, torch.bfloat16, True),  # and the special rows there
    ],
)
def test_rung16_register_slices(m: int, n: int, dtype: torch.dtype, special: bool) -> None:
    """Kernel 16 at each of kernel 14's launch shapes and its own fp32 256 KB rows."""
    _check_slices(16, m, n, dtype, special)


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("n", "dtype"),
    [
        (600, torch.float32),  # rung 15's lane groups: one shift per row
        (600, torch.bfloat16),
        (65536, torch.float32),  # rung 16's cluster: a shift per thread
        (65536, torch.bfloat16),
    ],
    ids=lambda v: _dt(v) if isinstance(v, torch.dtype) else f"n{v}",
)
@pytest.mark.parametrize("impl", ["cuda:14", "cuda:15", "cuda:16"])
def test_large_logits_and_the_folded_exponent(impl: str, n: int, dtype: torch.dtype) -> None:
    """Rows shifted by large constants. Rungs 15 and 16 fold the shift into the exponent's
    FFMA, 2^(x log2 e - ms), where ms = m log2 e is rounded: every p of a thread carries the
    rounding as a factor 2^eta, and |eta| grows with |m| (softmax.cu, `foldable`).
    - 3e4 and 6.5e4, inside the fold: |eta| up to 2^-9 and 2^-8, 1e-3 of p. One shift serves a
      row of rung 15, so the factor cancels in p / s; in rung 16 each thread has its own, and
      unless it divides the factor out of its sum and its scale the threads' pieces of a row
      disagree by ~100 times the fp32 tolerance.
    - 1e6 and +-1e12, past the fold's bound: subtract first. Kept in the fold, eta would be
      about 0.02 at 1e6 and 6e4 at 1e12, where 2^eta overflows and the row would come out NaN.
    Rung 14 never folds: the same rows, as the baseline."""
    x = make_inputs(7, n, torch.float32, "cpu", seed=5)
    for i, c in enumerate([3.0e4, -3.0e4, 6.5e4, 1.0e6, 1.0e12, -1.0e12]):
        x[i] += c  # row 6 stays as drawn
    x = x.to(dtype).cuda()
    run_checked(
        _run(impl), [x], reference(x), tolerances=tolerances(impl, n), name=impl
    ).raise_if_failed()


@pytest.mark.gpu
def test_rung14_full_kernel_falls_back_when_misaligned() -> None:
    """A row of whole slices planned for the unchecked kernel, at an address 2 bytes past a
    16-byte boundary: every row then has scalar edges, so launch must run the checked kernel."""
    n = 65536
    if ck.plan(14, 3, n, torch.bfloat16, ck.device_facts(0)).rung != 14:
        pytest.skip("no clusters on this GPU: cuda:14 runs rung 13's plan")
    assert "_full_" in ck.plan(14, 3, n, torch.bfloat16, ck.device_facts(0)).kernel
    buf = make_inputs(1, 3 * n + 8, torch.bfloat16, "cuda", seed=3).flatten()
    x = buf[1 : 1 + 3 * n].view(3, n)
    obuf = torch.empty(3 * n + 8, dtype=torch.bfloat16, device="cuda")
    out = obuf[1 : 1 + 3 * n].view(3, n)
    softmax(x, impl="cuda:14", out=out)
    tol = tolerances("cuda:14", n)[torch.bfloat16]
    torch.testing.assert_close(out.float(), reference(x).float(), atol=tol[0], rtol=tol[1])


@pytest.mark.gpu
@pytest.mark.parametrize(
    ("m", "n", "dtype", "special"),
    [
        (1, 600, torch.float32, False),  # the batch sweep's first point: one group of 32 lanes
        (1000, 600, torch.bfloat16, False),  # 16 lanes x 5; 125 blocks of 8 rows, the last full
        (1001, 600, torch.float16, False),  # one row into a last block of eight
        (8193, 256, torch.float32, False),  # 32 lanes x 2 vectors, a partial last block
        (999, 256, torch.bfloat16, False),  # 16 lanes x 2
        (37, 40, torch.float32, False),  # 10 vectors: 2 lanes x 5, 64 rows per block
        (300, 4, torch.float32, False),  # one vector: a lane per row, 128 rows per block
        (130, 24, torch.bfloat16, False),  # three vectors in one lane
        (7, 1024, torch.float32, False),  # 32 lanes x 8, the longest fp32 row it takes
        (9, 1280, torch.bfloat16, False),  # 32 lanes x 5, the longest 16-bit row
        (8, 600, torch.float32, True),  # the special rows (-inf, +inf, NaN) over 32 lanes
        (8, 600, torch.bfloat16, True),  # over 16
        (8, 40, torch.float16, True),  # over 1 lane (five vectors in one thread)
    ],
)
def test_rung15_lane_groups(m: int, n: int, dtype: torch.dtype, special: bool) -> None:
    """Each kind of kernel 15 group against the reference (the checker also catches writes
    outside y): groups of 1 to 32 lanes, partial last blocks, torch's NaN rows."""
    assert ck.plan(15, m, n, dtype, ck.device_facts(0)).rung == 15
    x = special_rows(n, dtype, "cuda") if special else make_inputs(m, n, dtype, "cuda", seed=n)
    run_checked(
        _run("cuda:15"), [x], reference(x), tolerances=tolerances("cuda:15", n), name="cuda:15"
    ).raise_if_failed()
    if special:
        want_nan = torch.isnan(torch.softmax(x.float().cpu(), dim=-1))
        assert torch.equal(torch.isnan(softmax(x, impl="cuda:15").float().cpu()), want_nan)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=_dt)
def test_rung15_huge_logits(dtype: torch.dtype) -> None:
    """Rows whose max is near the dtype's limit, where kernel 15's folded exponent
    x log2 e - m log2 e would overflow: it must take the subtract-first path and agree with
    torch (a row of equal huge values gives 1/n each, not 0 / 0)."""
    n = 600
    x = make_inputs(4, n, torch.float32, "cpu", seed=3)
    x[0] = 3.0e38  # all equal and huge: m log2 e overflows fp32
    x[1] = -3.0e38  # all equal, hugely negative
    x[2] = x[2] * 1e37  # huge spread: one element near 1, the rest flushed to 0
    x[3, 5] = 3.3e38  # one huge element in an ordinary row: it takes all the mass
    x = x.to(dtype).cuda()
    want = torch.softmax(x.double(), dim=-1)
    got = softmax(x, impl="cuda:15")
    atol, rtol = tolerances("cuda:15", n)[dtype]
    torch.testing.assert_close(got.double(), want, atol=atol, rtol=rtol)


def test_the_unfixed_fold_fixture_edits_rung_16_only() -> None:
    """The fixture below removes the two lines of rung 16's 2^-eta correction and nothing else
    (CPU: a text edit of softmax.cu)."""
    from fixtures.softmax_wrong import (
        UNFIX_SCALE,
        UNFIX_SUM,
        softmax_cu_without_the_fold_correction,
    )

    src = ck.CU_FILE.read_text()
    wrong = softmax_cu_without_the_fold_correction(src)
    assert len(wrong) == len(src) - len(UNFIX_SUM) - len(UNFIX_SCALE)
    with pytest.raises(ValueError, match=r"softmax\.cu changed"):
        softmax_cu_without_the_fold_correction(src.replace(UNFIX_SUM, ""))


@pytest.mark.gpu
def test_large_logit_rows_reject_rung_16_without_its_fold_correction(tmp_path: Path) -> None:
    """The deliberately wrong copy of rung 16 (fixtures.softmax_wrong) passes on ordinary logits
    and fails on the same rows shifted by 3e4, where the shipped rung 16 passes both: so
    test_large_logits_and_the_folded_exponent can fail."""
    from fixtures.softmax_wrong import softmax_cu_without_the_fold_correction

    from minikernel.bench.probe import launch_from

    n = 65536
    if ck.plan(16, 2, n, torch.float32, ck.device_facts(0)).rung != 16:
        pytest.skip("no clusters on this GPU: cuda:16 runs another rung's plan")
    path = tmp_path / "softmax_unfixed.cu"  # headers come from CUDA_DIR
    path.write_text(softmax_cu_without_the_fold_correction(ck.CU_FILE.read_text()))

    def unfixed(t: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        return launch_from(ck, path, lambda: ck.launch(16, t, out))()

    tol = tolerances("cuda:16", n)
    plain = make_inputs(2, n, torch.float32, "cuda", seed=5)
    for x, passes in ((plain, True), (plain + 3.0e4, False)):
        ref = reference(x)
        got = run_checked(unfixed, [x], ref, tolerances=tol, name="cuda:16 unfixed")
        assert got.ok is passes, got.message
        run_checked(_run("cuda:16"), [x], ref, tolerances=tol, name="cuda:16").raise_if_failed()


@pytest.mark.gpu
def test_rung15_falls_back_when_misaligned() -> None:
    """Rows of whole vectors, planned for kernel 15, at an address 4 bytes past a 16-byte
    boundary: kernel 15 reads whole vectors from x's start, so launch must run rung 14's plan."""
    n = 600
    assert ck.plan(15, 5, n, torch.float32, ck.device_facts(0)).rung == 15
    buf = make_inputs(1, 5 * n + 4, torch.float32, "cuda", seed=9).flatten()
    x = buf[1 : 1 + 5 * n].view(5, n)
    obuf = torch.empty(5 * n + 4, dtype=torch.float32, device="cuda")
    out = obuf[1 : 1 + 5 * n].view(5, n)
    softmax(x, impl="cuda:15", out=out)
    atol, rtol = tolerances("cuda:15", n)[torch.float32]
    torch.testing.assert_close(out, reference(x).float(), atol=atol, rtol=rtol)


def test_rung15_layout_has_the_fewest_slots() -> None:
    """short_row_layout against a brute force over every row of up to 32 x VPT_MAX vectors:
    the fewest (lanes x vectors) slots, two vectors per lane preferred on a tie, then the most
    lanes; None past 32 lanes."""
    for vpt_max in (5, 8):
        for nvec in range(1, 32 * vpt_max + 1):
            lanes, vpt = ck.short_row_layout(nvec, vpt_max)
            assert lanes in (1, 2, 4, 8, 16, 32) and vpt <= vpt_max
            assert lanes * vpt >= nvec > lanes * (vpt - 1), nvec  # holds the row, no empty slot
            fits = [(g, -(-nvec // g)) for g in (1, 2, 4, 8, 16, 32) if -(-nvec // g) <= vpt_max]
            fewest = min(g * v for g, v in fits)
            assert lanes * vpt == fewest, (nvec, lanes, vpt)
            ties = [(g, v) for g, v in fits if g * v == fewest]
            if any(v >= 2 for _, v in ties):
                assert vpt >= 2 and lanes == max(g for g, v in ties if v >= 2), nvec
            else:
                assert lanes == max(g for g, _ in ties), nvec
        assert ck.short_row_layout(32 * vpt_max + 1, vpt_max) is None
    # the probe's points: 600 fp32, 600 bf16, 256 fp32, 256 bf16
    assert ck.short_row_layout(150, 8) == (32, 5)
    assert ck.short_row_layout(75, 5) == (16, 5)
    assert ck.short_row_layout(64, 8) == (32, 2)
    assert ck.short_row_layout(32, 5) == (16, 2)


def test_rung15_plan() -> None:
    """Rung 15 takes rows of whole 16-byte vectors up to 1024 fp32 / 1280 16-bit elements, 128 /
    lanes rows per block; every other row is rung 14's plan."""
    for m, n, dtype, lanes, vpt in [
        (512, 600, torch.float32, 32, 5),
        (32768, 600, torch.bfloat16, 16, 5),
        (8192, 256, torch.float32, 32, 2),
        (32768, 256, torch.bfloat16, 16, 2),
        (3, 4, torch.float32, 1, 1),
        (3, 1024, torch.float32, 32, 8),
        (3, 1280, torch.float16, 32, 5),
    ]:
        p = ck.plan(15, m, n, dtype, ck.H200)
        assert p.kernel == f"softmax_kernel15_l{lanes}_v{vpt}_{ck.SUFFIX[dtype]}", (n, dtype)
        assert (p.rung, p.block, p.smem, p.cluster) == (15, 128, 0, 1)
        assert p.grid == -(-m // (128 // lanes)) and p.per_block == n // ck.vector_width(dtype)
    assert ck.plan(15, 3, 600, torch.float32, SM80).rung == 15  # no sm_90 feature in it
    for n, dtype in [
        (781, torch.bfloat16),  # not whole vectors
        (1, torch.float32),
        (1028, torch.float32),  # past 32 x 8 fp32 vectors
        (1288, torch.bfloat16),  # past 32 x 5 bf16 vectors
        (4096, torch.bfloat16),
        (262144, torch.bfloat16),
    ]:
        assert ck.plan(15, 3, n, dtype, ck.H200) == ck.plan(14, 3, n, dtype, ck.H200), n


def test_rung16_plan() -> None:
    """Rung 16 is rung 14's register-slice plan with its own kernels (same grid, block, cluster
    and slices), plus fp32 rows of 256 KB, which rung 14 leaves to rung 12, and its own slices
    at the lengths of KERNEL16_SLICES (lab 02's 65536 columns in fp32 and bf16, not fp16);
    rung 15's short rows stay rung 15's, and every other row is rung 15's plan."""
    for n, dtype in [
        (8200, torch.bfloat16),
        (16392, torch.bfloat16),
        (65528, torch.bfloat16),  # one vector under 128 KB: rung 14's slices
        (65544, torch.bfloat16),  # one vector over
        (65536, torch.float16),  # KERNEL16_SLICES names bf16 only
        (131072, torch.float16),
        (262144, torch.bfloat16),
        (65540, torch.float32),
        (131072, torch.float32),
        (262144, torch.float32),
    ]:
        p14, p16 = ck.plan(14, 3, n, dtype, ck.H200), ck.plan(16, 3, n, dtype, ck.H200)
        assert p14.rung == 14 and p16.rung == 16, (n, dtype)
        assert p16.kernel == p14.kernel.replace("softmax_kernel14_", "softmax_kernel16_")
        assert (p16.grid, p16.block, p16.cluster, p16.smem, p16.per_block) == (
            p14.grid,
            p14.block,
            p14.cluster,
            p14.smem,
            p14.per_block,
        )
    for n, tag in [(65536, "full_"), (65537, "")]:  # fp32 rows of 256 KB of vectors
        p = ck.plan(16, 3, n, torch.float32, ck.H200)
        assert ck.plan(14, 3, n, torch.float32, ck.H200).rung == 13  # rung 14 leaves them
        assert p.kernel == f"softmax_kernel16_t1024_k8_c2_{tag}f32", n  # two 128 KB slices
        assert (p.rung, p.grid, p.block, p.cluster, p.per_block) == (16, 6, 1024, 2, 8192)
    for n, tag in [(65536, "full_"), (65543, "")]:  # bf16 rows of 128 KB of vectors
        p = ck.plan(16, 3, n, torch.bfloat16, ck.H200)
        assert ck.plan(14, 3, n, torch.bfloat16, ck.H200).kernel.startswith(
            "softmax_kernel14_t256_k8_c4"
        )
        assert p.kernel == f"softmax_kernel16_t256_k4_c8_{tag}bf16", n  # eight 16 KB slices
        assert (p.rung, p.grid, p.block, p.cluster, p.per_block) == (16, 24, 256, 8, 1024)
    for n, dtype in [
        (600, torch.float32),  # rung 15's lane groups
        (600, torch.bfloat16),
        (781, torch.bfloat16),  # not whole vectors: rung 15 hands it on
        (8192, torch.bfloat16),  # 16 KB: rung 11's registers
        (16384, torch.float32),  # fp32 under 256 KB
        (65532, torch.float32),  # one vector short of 256 KB
        (262152, torch.bfloat16),  # 16-bit past 512 KB
        (262148, torch.float32),  # fp32 past 1 MB
    ]:
        assert ck.plan(16, 3, n, dtype, ck.H200) == ck.plan(15, 3, n, dtype, ck.H200), n
    assert ck.plan(16, 3, 65536, torch.bfloat16, SM80).kernel == "softmax_kernel8_bf16"


def test_rung13_plan() -> None:
    """Rung 13 is rung 12's plan with rung 10's, 11's and 12's kernels swapped for the same
    kernels with the two-instruction exponential: same grid, block, shared memory, slices and
    prefetch distance; shapes rung 12 hands to rungs 7 and 8 stay there."""
    for m, n, dtype in [
        (7, 600, torch.bfloat16),  # a warp per row
        (3, 4097, torch.bfloat16),  # a block per row
        (5, 16384, torch.bfloat16),  # one 32 KB slice
        (32768, 65536, torch.bfloat16),  # a cluster, no prefetch
        (8192, 262144, torch.float32),  # a cluster with rung 12's prefetch
    ]:
        p12 = ck.plan(12, m, n, dtype, ck.H200)
        p13 = ck.plan(13, m, n, dtype, ck.H200)
        assert p13.rung == 13 and p13.kernel.startswith("softmax_kernel13_")
        assert p13.kernel.split("_", 2)[2] == p12.kernel.split("_", 2)[2]  # same launch shape
        assert (p13.grid, p13.block, p13.smem, p13.per_block, p13.ahead, p13.takes_m) == (
            p12.grid,
            p12.block,
            p12.smem,
            p12.per_block,
            p12.ahead,
            p12.takes_m,
        )
    assert ck.plan(13, 3, 65536, torch.float32, SM80).kernel == "softmax_kernel8_f32"


def test_rung14_plan() -> None:
    """Rung 14 takes 16-bit rows of more than 16 KB up to 512 KB and fp32 rows of more than
    256 KB up to 1 MB, over the smallest cluster of 2, 4, 8 or 16 whose register slices hold
    the row; everything else is rung 13's plan."""
    for n, dtype, threads, k, cluster in [
        (8200, torch.bfloat16, 256, 4, 2),  # just past 16 KB: two 16 KB slices
        (16384, torch.float16, 256, 4, 2),  # 32 KB: still two 16 KB slices
        (16392, torch.bfloat16, 256, 8, 2),  # just past 32 KB: two 32 KB slices
        (65536, torch.bfloat16, 256, 8, 4),  # 128 KB
        (65537, torch.bfloat16, 256, 8, 4),  # 128 KB of vectors and one edge element
        (65544, torch.bfloat16, 256, 8, 8),  # one vector past 128 KB: the next cluster
        (131072, torch.float16, 256, 8, 8),  # 256 KB
        (262144, torch.bfloat16, 256, 8, 16),  # 512 KB: a cluster of 16 (host opts in)
        (65540, torch.float32, 256, 8, 16),  # fp32 past 256 KB: 32 KB slices
        (262144, torch.float32, 512, 8, 16),  # fp32 1 MB: sixteen 64 KB slices
    ]:
        p = ck.plan(14, 3, n, dtype, ck.H200)
        vn = ck.vector_width(dtype)
        assert p.rung == 14, (n, dtype, p)
        full = n % vn == 0 and n // vn == cluster * threads * k  # no bound checks needed
        suffix = ("full_" if full else "") + ck.SUFFIX[dtype]
        assert p.kernel == f"softmax_kernel14_t{threads}_k{k}_c{cluster}_{suffix}"
        assert (p.grid, p.block, p.cluster, p.smem) == (3 * cluster, threads, cluster, 0)
        assert p.per_block == -(-(n // vn) // cluster)
        assert p.per_block <= threads * k  # each thread holds at most k vectors
        assert cluster == 2 or (cluster // 2) * threads * k * 16 < (n // vn) * 16, n
    for n, dtype in [
        (8192, torch.bfloat16),  # 16 KB: rung 11's registers, one block or warp per row
        (600, torch.bfloat16),
        (65536, torch.float32),  # fp32 up to 256 KB: rung 12's prefetch
        (16384, torch.float32),
        (262152, torch.bfloat16),  # 16-bit past 512 KB: rung 10's kernels
        (262148, torch.float32),  # fp32 past 1 MB
    ]:
        assert ck.plan(14, 3, n, dtype, ck.H200) == ck.plan(13, 3, n, dtype, ck.H200), n
    assert ck.plan(14, 3, 65536, torch.bfloat16, SM80).kernel == "softmax_kernel8_bf16"


def test_every_planned_kernel_exists() -> None:
    """Each name a plan can produce is an extern "C" kernel of softmax.cu (for sm_90)."""
    built = compiled(ck.CU_FILE, "sm_90").kernel_names
    planned = set()
    for rung in ck.RUNGS:
        for dtype in DTYPES:
            for n in [
                1,
                5,
                127,
                128,
                256,
                300,
                500,
                600,
                1024,
                2048,
                4096,
                8192,
                10000,
                16384,
                20000,
                24000,
                28000,
                32768,
                40000,
                50000,
                65536,
                65537,
                100000,
                131072,
                200000,
                262144,
                300000,
            ]:
                with contextlib.suppress(UnsupportedShape):
                    planned.add(ck.plan(rung, 3, n, dtype, ck.H200).kernel)
    for dtype in DTYPES:  # kernel 15: every row of whole vectors it takes
        vn = ck.vector_width(dtype)
        for nvec in range(1, 32 * ck.KERNEL15_VPT_MAX[dtype] + 1):
            planned.add(ck.plan(15, 3, nvec * vn, dtype, ck.H200).kernel)
    assert planned <= built, sorted(planned - built)
    assert len(planned) == len(built), sorted(built - planned)  # none is unreachable


# --- the GPU: launch details the CPU cannot see ----------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize(
    "impl", ["cuda:5", "cuda:7", "cuda:9", *(f"cuda:{r}" for r in range(10, 17))]
)
def test_misaligned_input_and_output(impl: str) -> None:
    """x and out at different addresses modulo 16: the vector rungs copy x to match out."""
    n = 781
    buf = make_inputs(1, 6 * n + 3, torch.bfloat16, "cuda", seed=7).flatten()
    x = buf[1 : 1 + 6 * n].view(6, n)  # starts 2 bytes past a 16-byte boundary
    obuf = torch.empty(6 * n + 8, dtype=torch.bfloat16, device="cuda")
    out = obuf[3 : 3 + 6 * n].view(6, n)  # 6 bytes past
    softmax(x, impl=impl, out=out)
    torch.testing.assert_close(out.float(), reference(x).float(), atol=1e-12, rtol=8e-3)


@pytest.mark.gpu
def test_default_impl_on_gpu_is_a_fused_kernel() -> None:
    x = torch.zeros(4, 600, device="cuda")
    assert default_impl(x) in ("triton:1", "cuda:16")
    assert default_impl(torch.zeros(2, 262144, device="cuda")) in ("cuda:16", "triton:2")
    y = make_inputs(64, 1000, torch.bfloat16, "cuda").t()  # non-contiguous, dim 0
    torch.testing.assert_close(
        softmax(y, dim=0).float(), torch.softmax(y.float(), dim=0), atol=1e-12, rtol=8e-3
    )


# --- exercise E2: remove the mask ------------------------------------------------------------


# --8<-- [start:e2]
@pytest.mark.gpu
def test_maskless_kernel_corrupts_rows_whose_length_is_not_a_power_of_two() -> None:
    from fixtures.softmax_wrong import softmax_nomask

    x = make_inputs(64, 600, torch.float32, "cuda", seed=11)  # 600: tile of 1024, 424 extra
    result = run_checked(softmax_nomask, [x], reference(x), tolerances=TOLERANCES)
    assert not result.ok
    assert result.mismatches > 0, result.message  # sums over the wrong elements
    assert result.wrote_outside, result.message  # the last row's store runs past the output
    x = make_inputs(64, 512, torch.float32, "cuda", seed=11)  # a power of two: tile == row
    run_checked(softmax_nomask, [x], reference(x), tolerances=TOLERANCES).raise_if_failed()


@pytest.mark.skipif(not INTERPRET, reason="what Triton's interpreter does (CPU tensors)")
def test_interpreter_runs_the_maskless_kernel_past_each_row() -> None:
    """On the CPU the interpreter does not catch the missing mask either: it loads and stores
    raw memory past the row, like the GPU. It runs the programs one after another, so the result
    is deterministic: row r comes out as the softmax of the 1024 elements that start at row r
    (its own 600 and 424 of whatever follows), cut to 600; the last row's store lands 424
    elements past the end of the output. (The margins here keep those accesses inside our
    buffers: on a tight allocation they would corrupt the process's heap.)"""
    from fixtures.softmax_wrong import softmax_nomask

    m, n, block, margin = 5, 600, 1024, 1024
    xbuf = make_inputs(1, m * n + margin, torch.float32, "cpu", seed=12).flatten()
    ybuf = torch.full((m * n + margin,), float("nan"))
    x, y = xbuf[: m * n].view(m, n), ybuf[: m * n].view(m, n)
    softmax_nomask(x, y)
    for r in range(m):
        window = xbuf[r * n : r * n + block]  # what program r actually loaded
        torch.testing.assert_close(y[r], torch.softmax(window, 0)[:n], atol=1e-12, rtol=1e-5)
    last = torch.softmax(xbuf[(m - 1) * n : (m - 1) * n + block], 0)
    torch.testing.assert_close(ybuf[m * n : m * n + block - n], last[n:], atol=1e-12, rtol=1e-5)
    assert torch.isnan(ybuf[m * n + block - n :]).all()  # and nothing beyond the window
    # The checker rejects it too, as it does on the GPU.
    xs = make_inputs(16, n, torch.float32, "cpu", seed=13)
    result = run_checked(softmax_nomask, [xs], reference(xs), tolerances=TOLERANCES)
    assert result.wrote_outside and result.mismatches > 0, result.message
    # --8<-- [end:e2]


# --- the lab, on a CPU ----------------------------------------------------------------------


@pytest.mark.skipif(HAS_GPU, reason="on a GPU the lab measures; nox -s labs runs it there")
def test_lab_checks_then_exits_2_without_gpu(tmp_path: Path) -> None:
    """labs/01_softmax.py on a CPU: its checks run in Triton's interpreter, then it exits with 2
    ("no GPU") before timing, leaving labs/results/ untouched."""
    proc = run_lab_on_cpu("01_softmax.py", tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "all correct" in proc.stdout
    assert not any(tmp_path.iterdir())


def test_quack_peer_survives_the_package_shadowing_its_module(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """quack-kernels' __init__ does `from quack.softmax import softmax`, so the attribute
    quack.softmax is the function, not the module; `import quack.softmax as qs` then returns
    the function. A stand-in package with that layout: the runner must call the function."""
    import sys

    from minikernel.kernels.softmax import make_runner

    pkg = tmp_path / "quack"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from quack.softmax import softmax\n")
    (pkg / "softmax.py").write_text(
        "import torch\n\ndef softmax(x):\n    return torch.softmax(x.float(), -1).to(x.dtype) + 0\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "quack" or m.startswith("quack.")]:
        monkeypatch.delitem(sys.modules, name)
    x = torch.randn(3, 5)
    run = make_runner("quack", [3, 5], torch.float32, device="cpu", inputs=x)
    torch.testing.assert_close(run(), torch.softmax(x, -1))
    for name in [m for m in sys.modules if m == "quack" or m.startswith("quack.")]:
        monkeypatch.delitem(sys.modules, name)
