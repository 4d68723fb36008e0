"""Attention: the Triton kernel against the fp64 math reference, and bad inputs."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE, INTERPRET

from minikernel.kernels.attention import (
    VARIANTS,
    attention,
    attention_flops,
    make_inputs,
    reference,
)
from minikernel.testing import run_checked

# (atol, rtol). P = softmax(...) is rounded to the input dtype before the P @ V product on the
# tensor cores (as FlashAttention does), then O is rounded once more: a few units of 2^-11
# (fp16) or 2^-8 (bf16) on outputs of order 1.
TOLERANCES = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.2e-2, 1.2e-2)}


def _ids(d: torch.dtype) -> str:
    return str(d).removeprefix("torch.")


def _check(impl: str, q, k, v, causal: bool, scale: float | None = None) -> None:  # type: ignore[no-untyped-def]
    run_checked(
        lambda q_, k_, v_, out: attention(
            q_, k_, v_, causal=causal, scale=scale, out=out, impl=impl
        ),
        [q, k, v],
        reference(q, k, v, causal, scale),
        tolerances=TOLERANCES,
        name=f"{impl} causal={causal}",
    ).raise_if_failed()


# Lengths: 1 (a single row and column: all tail), 17 (one partial block of queries and of keys),
# 1000 (many blocks, a partial last one: 1000 = 15 * 64 + 40). Tiny batch x heads: the CPU
# interpreter pays about a millisecond per program instance.
CPU_CASES = [(2, 3, 1), (2, 3, 17), (1, 1, 1000)]


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize(("batch", "heads", "seq"), CPU_CASES)
@pytest.mark.parametrize("impl", sorted(VARIANTS))
def test_matches_reference_fp16(
    impl: str, batch: int, heads: int, seq: int, head_dim: int, causal: bool
) -> None:
    q, k, v = make_inputs(batch, heads, seq, head_dim, torch.float16, DEVICE, seed=seq)
    _check(impl, q, k, v, causal)


# Different query and key lengths: more queries than keys (causal rows past the last key see
# every key), and fewer (the tail of K/V lies beyond every diagonal block).
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("seq_q", "seq_k"), [(100, 17), (17, 100)])
def test_different_query_and_key_lengths(seq_q: int, seq_k: int, causal: bool) -> None:
    q, k, v = make_inputs(1, 2, seq_q, 64, torch.float16, DEVICE, seed=7, seq_k=seq_k)
    _check("triton:1", q, k, v, causal)


@pytest.mark.parametrize("scale", [0.05, 0.5])
def test_softmax_scale_argument(scale: float) -> None:
    # 0.5 makes the scores about 4x sharper than the default 1/sqrt(64): nearly one-hot rows.
    q, k, v = make_inputs(1, 2, 70, 64, torch.float16, DEVICE, seed=3)
    _check("triton:1", q, k, v, True, scale)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=_ids)
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("seq", [1, 17, 1000, 4097])  # 4097: one past a power of two
def test_matches_reference_on_gpu(
    seq: int, head_dim: int, causal: bool, dtype: torch.dtype
) -> None:
    if INTERPRET:
        pytest.skip("needs the compiled kernel (TRITON_INTERPRET=1 is set)")
    q, k, v = make_inputs(2, 3, seq, head_dim, dtype, "cuda", seed=seq)
    _check("triton:1", q, k, v, causal)


@pytest.mark.gpu
def test_bf16_agrees_with_sdpa_on_a_benchmark_shape() -> None:
    if INTERPRET:
        pytest.skip("needs the compiled kernel (TRITON_INTERPRET=1 is set)")
    q, k, v = make_inputs(4, 16, 4096, 128, torch.bfloat16, "cuda", seed=1)
    for causal in (False, True):
        ours = attention(q, k, v, causal=causal).float()
        theirs = F.scaled_dot_product_attention(q, k, v, is_causal=causal).float()
        assert (ours - theirs).abs().max().item() < 2e-2


def test_torch_fallback_matches_reference() -> None:
    q, k, v = make_inputs(1, 2, 33, 64, torch.float16, "cpu")
    out = attention(q, k, v, causal=True, impl="torch")
    ref = reference(q, k, v, causal=True)
    assert torch.allclose(out.double(), ref, atol=2e-3, rtol=2e-3)


def test_default_scale_is_one_over_sqrt_head_dim() -> None:
    q, k, v = make_inputs(1, 1, 20, 128, torch.float16, DEVICE)
    a = attention(q, k, v)
    b = attention(q, k, v, scale=1 / math.sqrt(128))
    assert torch.equal(a, b)


def test_flop_model() -> None:
    assert attention_flops(2, 3, 100, 64, causal=False) == 4 * 2 * 3 * 100 * 100 * 64
    assert attention_flops(2, 3, 100, 64, causal=True) == 2 * 2 * 3 * 100 * 100 * 64


# --- bad input: each raises its documented error, naming the problem ------------------------


def _t(*shape: int, dtype: torch.dtype = torch.float16) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype)


Q = _t(1, 2, 8, 64)


@pytest.mark.parametrize(
    ("q", "k", "v", "kwargs", "error", "match"),
    [
        ([1.0], Q, Q, {}, TypeError, "q must be a torch.Tensor"),
        (_t(1, 2, 8, 64, dtype=torch.float32), Q, Q, {}, TypeError, "q has dtype float32"),
        (
            Q,
            Q,
            _t(1, 2, 8, 64, dtype=torch.bfloat16),
            {},
            TypeError,
            "k has dtype float16 but v has bfloat16",
        ),
        (_t(2, 8, 64), Q, Q, {}, ValueError, "q must have 4 dimension"),
        (Q, _t(1, 2, 9, 64), Q, {}, ValueError, "k has shape"),
        (Q, _t(1, 3, 8, 64), _t(1, 3, 8, 64), {}, ValueError, "batch, heads and head_dim"),
        (_t(1, 2, 8, 32), _t(1, 2, 8, 32), _t(1, 2, 8, 32), {}, ValueError, "head_dim must be"),
        (_t(1, 2, 0, 64), Q, Q, {}, ValueError, "q is empty"),
        (_t(1, 8, 2, 64).transpose(1, 2), Q, Q, {}, ValueError, "q must be contiguous"),
        (Q, Q, Q, {"causal": 1}, TypeError, "causal must be a bool"),
        (Q, Q, Q, {"scale": "0.1"}, TypeError, "scale must be a float"),
        (Q, Q, Q, {"scale": float("nan")}, ValueError, "scale must be finite"),
        (Q, Q, Q, {"scale": -0.125}, ValueError, "finite and positive, got -0.125"),
        (Q, Q, Q, {"impl": "cuda:1"}, ValueError, "unknown impl 'cuda:1'"),
        (
            Q,
            Q,
            Q,
            {"out": _t(1, 2, 8, 128)},
            ValueError,
            r"q has shape \(1, 2, 8, 64\) but out has",
        ),
    ],
    ids=[
        "not-a-tensor",
        "float32",
        "dtype-mismatch",
        "rank-3",
        "k-v-shape-mismatch",
        "heads-mismatch",
        "head-dim-32",
        "empty",
        "non-contiguous",
        "causal-not-bool",
        "scale-not-number",
        "scale-nan",
        "scale-negative",
        "unknown-impl",
        "bad-out",
    ],
)
def test_bad_input_raises(q, k, v, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        attention(q, k, v, **kwargs)


def test_q_and_k_on_different_devices_is_refused() -> None:
    with pytest.raises(ValueError, match="q is on cpu but k is on meta"):
        attention(Q, Q.to("meta"), Q.to("meta"))
