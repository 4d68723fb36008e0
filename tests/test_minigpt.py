"""MiniGPT: the PyTorch port against the NumPy reference, byte for byte in float64.

The claim under test: with matmul and sums in a fixed order and exp / sqrt built from + - * /,
the two forward passes do the same float64 operations, so their logits are the same bytes
(see minikernel/minigpt/__init__.py for the orders we fixed). With PyTorch's own matmul, sum,
exp and sqrt (ops="torch") they agree only to a tolerance, stated below with its reason.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator

import numpy as np
import pytest
import torch

from minikernel.minigpt import GPTConfig, MiniGPT, forward, init_params, param_shapes, ulp_distance
from minikernel.minigpt import numpy_model as npm
from minikernel.minigpt import torch_model as tm

# id: (config, batch, time). Each is here for an edge the others miss.
CONFIGS = {
    # d = 12 and head_dim = 6 are not powers of two; two heads, two layers, full length.
    "base": (GPTConfig(), 2, 8),
    # vocab 1: the head has one column; one head: attention without a head split; d = 4.
    "vocab1-head1": (GPTConfig(vocab_size=1, block_size=4, n_layer=1, n_head=1, n_embd=4), 3, 4),
    # one position: every softmax is over a single key, every matmul over time has K = 1.
    "seq1": (GPTConfig(), 2, 1),
    # sequence shorter than the position table (it is sliced); batch of one.
    "short": (GPTConfig(), 1, 5),
    # 3 layers, 3 heads of 5, vocab 11, block 5: odd everywhere.
    "odd": (GPTConfig(vocab_size=11, block_size=5, n_layer=3, n_head=3, n_embd=15), 2, 5),
    # d = 1: LayerNorm over one feature has variance 0, so it returns its bias (sqrt(eps) path).
    "d1": (GPTConfig(vocab_size=7, block_size=3, n_layer=1, n_head=1, n_embd=1), 2, 3),
}
SEEDS = [0, 1, 2]
# gpt2: init_params as is (small weights, zero biases: a mild, nearly linear network).
# wide: every parameter moved by N(0, 0.5): saturated softmax rows, GELU tails, large logits.
# huge: moved by N(0, 4): attention scores thousands apart, so exp's clipping at -708 is hit.
INITS = {"gpt2": 0.0, "wide": 0.5, "huge": 4.0}


def _params(cfg: GPTConfig, seed: int, init: str) -> dict[str, np.ndarray]:
    params = init_params(cfg, seed)
    if INITS[init] == 0.0:
        return params
    rng = np.random.default_rng(seed + 1000)
    return {k: v + rng.normal(0.0, INITS[init], v.shape) for k, v in params.items()}


def _tokens(cfg: GPTConfig, batch: int, time: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed + 2000).integers(0, cfg.vocab_size, (batch, time))


def _torch_logits(
    params: dict[str, np.ndarray],
    cfg: GPTConfig,
    idx: np.ndarray,
    ops: str = "exact",
    device: str = "cpu",
    dtype: torch.dtype = torch.float64,
) -> np.ndarray:
    model = MiniGPT.from_numpy(params, cfg, ops).to(device=device, dtype=dtype)
    with torch.no_grad():
        return model(torch.from_numpy(idx).to(device)).to("cpu", torch.float64).numpy()


def _assert_same_bytes(got: np.ndarray, want: np.ndarray) -> None:
    assert got.shape == want.shape and got.dtype == want.dtype == np.float64
    assert got.tobytes() == want.tobytes(), (
        f"not byte-identical: {int(np.count_nonzero(ulp_distance(got, want)))} of {got.size} "
        f"values differ, by up to {int(ulp_distance(got, want).max())} ULP"
    )


def _normwise_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max |want|: the error on the scale of the logits.

    Not ULPs: a logit near zero is the difference of larger terms, so a tiny absolute error
    there can be millions of its own ULPs while being invisible at the logits' scale.
    """
    scale = max(float(np.abs(want).max()), np.finfo(np.float64).tiny)  # d1 + gpt2: all zero
    return float(np.abs(got - want).max()) / scale


# --- the claim: byte-identical logits --------------------------------------------------------


@pytest.mark.parametrize("init", sorted(INITS))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_logits_byte_identical_fp64_cpu(name: str, seed: int, init: str) -> None:
    cfg, batch, time = CONFIGS[name]
    params, idx = _params(cfg, seed, init), _tokens(cfg, batch, time, seed)
    want = forward(params, idx, cfg)
    assert want.shape == (batch, time, cfg.vocab_size)
    assert np.isfinite(want).all()
    _assert_same_bytes(_torch_logits(params, cfg, idx), want)


def test_huge_init_really_clips_exp() -> None:
    """The 'huge' case is only a test of exp's clipping if some softmax argument is below -708."""
    cfg, batch, time = CONFIGS["base"]
    params, idx = _params(cfg, 0, "huge"), _tokens(cfg, batch, time, 0)
    seen: list[float] = []
    original = npm.exp

    def spy(x: np.ndarray) -> np.ndarray:
        seen.append(float(x[np.isfinite(x)].min()))
        return original(x)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(npm, "exp", spy)
        forward(params, idx, cfg)
    assert min(seen) < -708.0


# --- the primitives, one by one --------------------------------------------------------------


def _exp_inputs() -> np.ndarray:
    rng = np.random.default_rng(7)
    special = [-np.inf, -1000.0, -708.0, -707.9, -1e-300, -0.0, 0.0, 1e-300, 0.5 * math.log(2)]
    special += [-0.5 * math.log(2), 1.0, 708.9, 709.0, 1000.0, np.inf]
    return np.concatenate([rng.uniform(-800.0, 800.0, 5000), rng.normal(0, 1, 5000), special])


def _sqrt_inputs() -> np.ndarray:
    rng = np.random.default_rng(8)
    special = [np.finfo(np.float64).tiny, 1e-5, 0.25, 0.5, 1.0, 2.0, 3.0, 4.0, 1e300]
    return np.concatenate([np.exp(rng.uniform(-700.0, 700.0, 5000)), special])


@pytest.mark.parametrize(
    ("fn", "args"),
    [
        # K = 1: the loop body never runs; only the first product.
        ("matmul", [(3, 1), (1, 4)]),
        # batched (2, 3) with K = 7 and N = 2, as in attention.
        ("matmul", [(2, 3, 5, 7), (2, 3, 7, 2)]),
        ("row_sum", [(4, 1)]),
        ("row_sum", [(5, 33)]),
    ],
    ids=["matmul-K1", "matmul-batched", "row_sum-1", "row_sum-33"],
)
def test_ordered_primitive_identical(fn: str, args: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(9)
    # magnitudes spread over many binades, so that the order of the additions matters
    xs = [rng.normal(0, 1, s) * np.exp2(rng.integers(-20, 20, s)) for s in args]
    want = getattr(npm, fn)(*xs)
    got = getattr(tm, fn)(*[torch.from_numpy(x) for x in xs]).numpy()
    _assert_same_bytes(got, want)


def test_exp_and_sqrt_identical() -> None:
    x, v = _exp_inputs(), _sqrt_inputs()
    _assert_same_bytes(tm.exp(torch.from_numpy(x)).numpy(), npm.exp(x))
    _assert_same_bytes(tm.sqrt(torch.from_numpy(v)).numpy(), npm.sqrt(v))


def test_pow2_is_exact() -> None:
    k = np.arange(-1022, 1024)
    want = np.ldexp(1.0, k)
    _assert_same_bytes(npm.pow2(k), want)
    _assert_same_bytes(tm.pow2(torch.from_numpy(k)).numpy(), want)


def test_exp_is_a_real_exp() -> None:
    """Within one ULP of math.exp (glibc's, correctly rounded in practice) where it is not clipped.

    The clipped ends: exp(-inf) is exp(-708), a normal number (masking makes it 0 where it
    must be), and exp(+inf) is exp(709), finite.
    """
    x = np.random.default_rng(10).uniform(-708.0, 709.0, 20000)
    want = np.array([math.exp(v) for v in x])
    assert ulp_distance(npm.exp(x), want).max() <= 1
    ends = npm.exp(np.array([-np.inf, np.inf]))
    assert ends[0] == npm.exp(np.array([-708.0]))[0] > 0
    assert ends[1] == npm.exp(np.array([709.0]))[0] < np.inf


def test_sqrt_is_a_real_sqrt() -> None:
    """Within one ULP of np.sqrt, which is IEEE's correctly rounded square root."""
    v = _sqrt_inputs()
    assert ulp_distance(npm.sqrt(v), np.sqrt(v)).max() <= 1


def test_ulp_distance() -> None:
    one_up = np.nextafter(1.0, 2.0)
    tiny = np.nextafter(0.0, 1.0)
    got = ulp_distance(
        np.array([1.0, 1.0, -0.0, -tiny, -1.0]), np.array([1.0, one_up, 0.0, tiny, 1.0])
    )
    assert got[:4].tolist() == [0, 1, 0, 2]
    assert got[4] == 2 * np.array(1.0).view(np.int64)


# --- PyTorch's own primitives: a tolerance, not bytes ----------------------------------------

# --8<-- [start:tolerance]
# max |torch - numpy| / max |numpy| for ops="torch". Reasons:
# float64: matmul through BLAS / cuBLAS and vectorised sums reorder additions (each reordering
#   moves a sum by up to ~K * 2**-53 of its terms' size), and library exp / sqrt are within a
#   ULP or two; through a few layers that stays a few thousand 2**-52 at most: 1e-12.
# float32: the same reorderings at 2**-24 per operation, and the model's inputs and parameters
#   rounded to float32 first: 1e-4 (~840 float32 epsilons).
# tf32: cuBLAS feeds the tensor cores fp32 inputs cut to 10 mantissa bits, a relative error up
#   to 2**-10 per input of every matmul, carried through 2 * n_layer + 1 chained products and
#   amplified by softmax and LayerNorm: 2e-2 (~20 units of 2**-10).
TOLERANCE = {"float64": 1e-12, "float32": 1e-4, "tf32": 2e-2}
# --8<-- [end:tolerance]


@pytest.mark.parametrize("init", ["gpt2", "wide"])
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_torch_ops_fp64_cpu_within_tolerance(name: str, init: str) -> None:
    cfg, batch, time = CONFIGS[name]
    params, idx = _params(cfg, 0, init), _tokens(cfg, batch, time, 0)
    got = _torch_logits(params, cfg, idx, ops="torch")
    assert _normwise_error(got, forward(params, idx, cfg)) <= TOLERANCE["float64"]


def test_torch_ops_fp32_cpu_within_tolerance() -> None:
    cfg, batch, time = CONFIGS["odd"]
    params, idx = _params(cfg, 0, "wide"), _tokens(cfg, batch, time, 0)
    got = _torch_logits(params, cfg, idx, ops="torch", dtype=torch.float32)
    assert _normwise_error(got, forward(params, idx, cfg)) <= TOLERANCE["float32"]


# --- on the GPU ------------------------------------------------------------------------------

GPU_CONFIGS = {
    "base": CONFIGS["base"],
    "odd": CONFIGS["odd"],
    # a little larger: K = 192 in the MLP's second product, 32 positions.
    "wider": (GPTConfig(vocab_size=64, block_size=32, n_layer=2, n_head=4, n_embd=48), 4, 32),
}


@contextlib.contextmanager
def _fp32_matmul(tf32: bool) -> Iterator[None]:
    """TF32 on or off for cuBLAS float32 matmuls, restored afterwards (new API since 2.9)."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):
        old = matmul.fp32_precision
        matmul.fp32_precision = "tf32" if tf32 else "ieee"
        try:
            yield
        finally:
            matmul.fp32_precision = old
    else:  # torch < 2.9
        old_flag = matmul.allow_tf32
        matmul.allow_tf32 = tf32
        try:
            yield
        finally:
            matmul.allow_tf32 = old_flag


@pytest.mark.gpu
@pytest.mark.parametrize("init", ["gpt2", "wide"])
@pytest.mark.parametrize("name", sorted(GPU_CONFIGS))
def test_cuda_exact_fp64_byte_identical(name: str, init: str) -> None:
    """Tolerance 0: every operation is exact or one of + - * / on float64, which CUDA rounds
    correctly (IEEE-754) like the CPU; the port never divides by a Python number (which CUDA
    would turn into a multiply by its reciprocal) and never calls CUDA's exp or sqrt."""
    cfg, batch, time = GPU_CONFIGS[name]
    params, idx = _params(cfg, 1, init), _tokens(cfg, batch, time, 1)
    _assert_same_bytes(_torch_logits(params, cfg, idx, device="cuda"), forward(params, idx, cfg))


@pytest.mark.gpu
@pytest.mark.parametrize("precision", ["float64", "float32", "tf32"])
@pytest.mark.parametrize("name", sorted(GPU_CONFIGS))
def test_cuda_torch_ops_within_tolerance(name: str, precision: str) -> None:
    """ops="torch" on the GPU (cuBLAS, CUDA's exp and sqrt) against float64 NumPy on the CPU."""
    cfg, batch, time = GPU_CONFIGS[name]
    params, idx = _params(cfg, 1, "gpt2"), _tokens(cfg, batch, time, 1)
    dtype = torch.float64 if precision == "float64" else torch.float32
    with _fp32_matmul(tf32=precision == "tf32"):
        got = _torch_logits(params, cfg, idx, ops="torch", device="cuda", dtype=dtype)
    assert _normwise_error(got, forward(params, idx, cfg)) <= TOLERANCE[precision]


# --- the model's structure and contracts -----------------------------------------------------


def test_state_dict_names_and_shapes_are_the_numpy_ones() -> None:
    cfg = CONFIGS["odd"][0]
    state = MiniGPT(cfg).state_dict()
    assert list(state) == list(param_shapes(cfg))
    assert {k: tuple(v.shape) for k, v in state.items()} == param_shapes(cfg)
    assert all(v.dtype == torch.float64 for v in state.values())


def test_init_is_deterministic_and_gpt2_like() -> None:
    cfg = CONFIGS["odd"][0]
    a, b, c = init_params(cfg, 5), init_params(cfg, 5), init_params(cfg, 6)
    assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    assert a["wte.weight"].tobytes() != c["wte.weight"].tobytes()
    assert all((a[k] == 0).all() for k in a if k.endswith(".bias"))
    assert all(
        (a[k] == 1).all() for k in a if k.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight"))
    )


def test_loading_copies_rather_than_shares() -> None:
    cfg = CONFIGS["base"][0]
    params = init_params(cfg, 0)
    model = MiniGPT.from_numpy(params, cfg)
    params["wte.weight"][0, 0] += 1.0
    assert model.wte.weight[0, 0].item() != params["wte.weight"][0, 0]


@pytest.mark.parametrize("ops", ["exact", "torch"])
def test_causal_a_later_token_changes_no_earlier_logit(ops: str) -> None:
    cfg, batch, time = CONFIGS["odd"]
    params, idx = _params(cfg, 0, "wide"), _tokens(cfg, batch, time, 0)
    changed = idx.copy()
    changed[:, -1] = (changed[:, -1] + 1) % cfg.vocab_size
    for run in (lambda i: forward(params, i, cfg), lambda i: _torch_logits(params, cfg, i, ops)):
        before, after = run(idx), run(changed)
        assert before[:, :-1].tobytes() == after[:, :-1].tobytes()
        assert not np.array_equal(before[:, -1], after[:, -1])


def test_batch_rows_are_independent() -> None:
    """Each row's logits are the bytes it gets alone: no operation mixes the batch."""
    cfg, batch, time = CONFIGS["base"]
    params, idx = _params(cfg, 0, "wide"), _tokens(cfg, batch, time, 0)
    together = _torch_logits(params, cfg, idx)
    for b in range(batch):
        _assert_same_bytes(together[b : b + 1], forward(params, idx[b : b + 1], cfg))


# --- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"n_embd": 10, "n_head": 3}, "n_embd .10. must be a multiple of n_head .3."),
        ({"vocab_size": 0}, "vocab_size must be a positive int"),
        ({"n_layer": 1.5}, "n_layer must be a positive int"),
        ({"eps": 0.0}, "eps must be positive"),
    ],
)
def test_bad_config(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GPTConfig(**kwargs)


@pytest.mark.parametrize(
    ("idx", "error", "match"),
    [
        (np.zeros((1, 3)), TypeError, "integer token ids"),
        (np.zeros(3, dtype=np.int64), ValueError, "must be 2-D"),
        (np.zeros((1, 9), dtype=np.int64), ValueError, "time <= block_size .8."),
        (np.zeros((0, 3), dtype=np.int64), ValueError, "batch >= 1"),
        (np.full((1, 3), 7), ValueError, r"token ids must be in \[0, 7\)"),
        (np.full((1, 3), -1), ValueError, r"token ids must be in \[0, 7\)"),
    ],
)
def test_bad_tokens(idx: np.ndarray, error: type[Exception], match: str) -> None:
    cfg = GPTConfig()
    params = init_params(cfg, 0)
    with pytest.raises(error, match=match):
        forward(params, idx, cfg)
    model = MiniGPT.from_numpy(params, cfg)
    as_tensor = torch.from_numpy(idx) if idx.dtype != np.float64 else torch.zeros(1, 3)
    with pytest.raises(error, match=match.replace("integer token ids", "int64 or int32")):
        model(as_tensor)


def test_bad_params_and_ops() -> None:
    cfg = GPTConfig()
    params = init_params(cfg, 0)
    with pytest.raises(ValueError, match=r"missing \['ln_f.bias'\], unexpected \['extra'\]"):
        MiniGPT.from_numpy(
            {**{k: v for k, v in params.items() if k != "ln_f.bias"}, "extra": 0}, cfg
        )
    with pytest.raises(ValueError, match=r"wte.weight: shape \(7, 13\) does not fit \(7, 12\)"):
        MiniGPT.from_numpy({**params, "wte.weight": np.zeros((7, 13))}, cfg)
    with pytest.raises(ValueError, match="ops must be one of"):
        MiniGPT(cfg, ops="fast")
    model = MiniGPT.from_numpy(params, cfg).float()
    with pytest.raises(TypeError, match="ops='exact' builds exp and sqrt from float64 bits"):
        model(torch.zeros(1, 3, dtype=torch.int64))


# --- the byte check must reject a port that is right only to the last bits ------------------


@pytest.mark.parametrize(
    "wrong", ["matmul-right-to-left", "row_sum-right-to-left", "exp-one-term-short"]
)
def test_byte_check_rejects_a_different_order(wrong: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from fixtures.minigpt_wrong import WRONG_OPS

    monkeypatch.setitem(tm.OPS, wrong, WRONG_OPS[wrong])
    cfg, batch, time = CONFIGS["odd"]
    params, idx = _params(cfg, 0, "wide"), _tokens(cfg, batch, time, 0)
    want, got = forward(params, idx, cfg), _torch_logits(params, cfg, idx, ops=wrong)
    assert _normwise_error(got, want) <= TOLERANCE["float64"]  # right, to a tolerance ...
    with pytest.raises(AssertionError, match="not byte-identical"):
        _assert_same_bytes(got, want)  # ... but not the same float64 operations
