"""A small GPT in NumPy: the reference that the PyTorch port (torch_model.py) matches bit for bit.

The model is GPT-2's shape, shrunk: token and position embeddings, ``n_layer`` pre-LayerNorm
blocks (causal multi-head self-attention, then a GELU MLP, each added back to the residual
stream), a final LayerNorm and a linear head to the vocabulary. Parameters live in a plain
``dict[str, np.ndarray]`` whose keys are exactly the PyTorch port's ``state_dict`` keys.

Everything is float64, and every number the forward pass produces comes from one of these:

- an exact operation (indexing, reshaping, ``where``, ``max``, ``clip``, ``rint``, ``frexp``,
  building a power of two from its bits), or
- one IEEE-754 operation (``+ - * /``) on two float64 values, which every conforming
  implementation rounds to the same result.

The four places where a library would pick its own order or its own approximation are written
out here, with the order fixed: :func:`matmul` and :func:`row_sum` add their terms left to right
(BLAS blocks and vectorises the sum, and NumPy and PyTorch sum in different orders);
:func:`exp` and :func:`sqrt` are built from ``+ - * /`` (NumPy, PyTorch, MKL and CUDA each
bring their own exp and sqrt, correct to about one ULP but not always the same ULP). The
PyTorch port does the same operations in the same order, so its logits are the same bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = [
    "GPTConfig",
    "exp",
    "forward",
    "init_params",
    "matmul",
    "param_shapes",
    "pow2",
    "row_sum",
    "sqrt",
]


@dataclass(frozen=True)
class GPTConfig:
    """The model's sizes. The MLP's hidden width is ``4 * n_embd``, as in GPT-2."""

    vocab_size: int = 7
    block_size: int = 8  # the longest sequence the position table covers
    n_layer: int = 2
    n_head: int = 2
    n_embd: int = 12
    eps: float = 1e-5  # LayerNorm's epsilon

    def __post_init__(self) -> None:
        for name in ("vocab_size", "block_size", "n_layer", "n_head", "n_embd"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive int, got {value!r}")
        if self.n_embd % self.n_head != 0:
            raise ValueError(f"n_embd ({self.n_embd}) must be a multiple of n_head ({self.n_head})")
        if not self.eps > 0:
            raise ValueError(f"eps must be positive, got {self.eps!r}")

    @property
    def head_dim(self) -> int:
        return self.n_embd // self.n_head


# --8<-- [start:params]
def param_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every parameter's name and shape, in a fixed order (the order init_params draws them).

    Weights are stored (in_features, out_features), so a linear layer is ``x @ W + b``.
    """
    d, v = cfg.n_embd, cfg.vocab_size
    shapes: dict[str, tuple[int, ...]] = {
        "wte.weight": (v, d),  # token embedding: one row per token id
        "wpe.weight": (cfg.block_size, d),  # position embedding: one row per position
    }
    for i in range(cfg.n_layer):
        p = f"blocks.{i}."
        shapes |= {
            p + "ln_1.weight": (d,),
            p + "ln_1.bias": (d,),
            p + "attn.qkv.weight": (d, 3 * d),  # queries, keys and values in one product
            p + "attn.qkv.bias": (3 * d,),
            p + "attn.proj.weight": (d, d),
            p + "attn.proj.bias": (d,),
            p + "ln_2.weight": (d,),
            p + "ln_2.bias": (d,),
            p + "mlp.fc.weight": (d, 4 * d),
            p + "mlp.fc.bias": (4 * d,),
            p + "mlp.proj.weight": (4 * d, d),
            p + "mlp.proj.bias": (d,),
        }
    shapes |= {
        "ln_f.weight": (d,),
        "ln_f.bias": (d,),
        "lm_head.weight": (d, v),  # not tied to wte, to keep every parameter separate
    }
    return shapes


def init_params(cfg: GPTConfig, seed: int = 0, std: float = 0.02) -> dict[str, np.ndarray]:
    """GPT-2's initialisation, drawn from ``np.random.default_rng(seed)`` in param_shapes order.

    Weights ~ N(0, std); the two projections that write into the residual stream get
    std / sqrt(2 * n_layer), so the stream's variance does not grow with depth. Biases are
    zero, LayerNorm gains one. Same seed, same bytes, on any machine.
    """
    rng = np.random.default_rng(seed)
    params: dict[str, np.ndarray] = {}
    for name, shape in param_shapes(cfg).items():
        if name.endswith(("ln_1.weight", "ln_2.weight", "ln_f.weight")):
            params[name] = np.ones(shape)
        elif name.endswith(".bias"):
            params[name] = np.zeros(shape)
        elif name.endswith("proj.weight"):
            params[name] = rng.normal(0.0, std / math.sqrt(2 * cfg.n_layer), size=shape)
        else:
            params[name] = rng.normal(0.0, std, size=shape)
    return params


# --8<-- [end:params]


# --- float64 primitives in a fixed order (torch_model.py repeats them line for line) ---------


# --8<-- [start:matmul]
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for (..., M, K) @ (..., K, N), adding the K products left to right.

    ``a @ b`` would call BLAS, which splits K into blocks, keeps several partial sums and uses
    fused multiply-adds; OpenBLAS, MKL and cuBLAS each do it their own way, so the last bits
    differ. Here each step is one multiply and one add, each rounded once.
    """
    acc = a[..., :, 0:1] * b[..., 0:1, :]
    for k in range(1, a.shape[-1]):
        acc = acc + a[..., :, k : k + 1] * b[..., k : k + 1, :]
    return acc


def row_sum(x: np.ndarray) -> np.ndarray:
    """The sum over the last axis (kept, size 1), added left to right.

    ``x.sum(-1)`` is pairwise in NumPy and vectorised in another order in PyTorch.
    """
    s = x[..., 0:1]
    for i in range(1, x.shape[-1]):
        s = s + x[..., i : i + 1]
    return s


# --8<-- [end:matmul]


# --8<-- [start:exp]
def pow2(k: np.ndarray) -> np.ndarray:
    """2.0**k for integer k in [-1022, 1023], exactly: a float64 with exponent field k + 1023.

    (np.ldexp would do too, but PyTorch's ldexp goes through pow() and float32.)
    """
    return ((k.astype(np.int64) + 1023) << 52).view(np.float64)


LN2_HI = 6.93147180369123816490e-01  # ln 2 to 32 bits: k * LN2_HI is exact for |k| < 2**20
LN2_LO = 1.90821492927058770002e-10  # the rest of ln 2
INV_LN2 = 1.44269504088896338700e00
# 1/n! for n = 0..13; the first term left out, r**14/14!, is below 2**-57 for |r| <= ln(2)/2
EXP_COEFFS = [1.0 / math.factorial(n) for n in range(14)]


def exp(x: np.ndarray) -> np.ndarray:
    """e**x for float64 x, within one ULP of the true value, from ``+ - *`` only.

    exp(x) = 2**k * exp(r), with k = round(x / ln 2) and |r| <= ln(2)/2; exp(r) is its Taylor
    series to degree 13 by Horner's rule. x is clipped to [-708, 709] so that 2**k stays a
    normal number: exp(-708) ~ 3e-308 stands in for anything smaller (callers mask what must
    be exactly zero), exp(709) ~ 8e307 for anything larger.
    """
    x = np.clip(x, -708.0, 709.0)
    k = np.rint(x * INV_LN2)
    r = (x - k * LN2_HI) - k * LN2_LO  # two steps, so no bits of r are lost (Cody and Waite)
    p = np.full_like(r, EXP_COEFFS[-1])
    for c in reversed(EXP_COEFFS[:-1]):
        p = p * r + c
    return p * pow2(k)


# --8<-- [end:exp]


# --8<-- [start:sqrt]
def sqrt(v: np.ndarray) -> np.ndarray:
    """The square root of positive normal float64 v, within one ULP, from ``+ * /`` only.

    v = m * 4**j with m in [0.5, 2) (frexp, then move one factor 2 into m if the exponent is
    odd); sqrt(v) = sqrt(m) * 2**j, and sqrt(m) is Heron's iteration y <- (y + m / y) / 2 from
    y = 1, whose relative error e becomes e**2 / (2 (1 + e)) each step: from at most 0.42 to
    0.061, 1.7e-3, 1.5e-6, 1.1e-12, 7e-25. The sixth step lets the last bit settle.
    """
    m, e = np.frexp(v)  # v = m * 2**e, m in [0.5, 1)
    odd = e % 2
    m = np.where(odd == 1, 2.0 * m, m)  # now m * 2**(e - odd), with e - odd even
    j = (e - odd) // 2
    y = np.ones_like(m)
    for _ in range(6):
        y = 0.5 * (y + m / y)
    return y * pow2(j)


# --8<-- [end:sqrt]


# --- the model -------------------------------------------------------------------------------


# --8<-- [start:layers]
def linear(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    y = matmul(x, w)
    return y if b is None else y + b


def layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray, eps: float) -> np.ndarray:
    """Normalise each row to mean 0, variance 1 (biased), then scale by w and shift by b.

    Multiplies by 1/n instead of dividing by n: a GPU divides a tensor by a Python number as a
    multiply by its reciprocal, so writing it that way keeps the GPU's bytes the same too.
    """
    inv_n = 1.0 / x.shape[-1]
    mean = row_sum(x) * inv_n
    d = x - mean
    var = row_sum(d * d) * inv_n
    return d / sqrt(var + eps) * w + b


SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


def gelu(x: np.ndarray) -> np.ndarray:
    """GPT-2's GELU, 0.5 x (1 + tanh(u)), written as x * sigmoid(2u), which is the same thing.

    u = sqrt(2/pi) (x + 0.044715 x**3). The sigmoid form needs exp, not tanh.
    """
    u = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
    return x / (1.0 + exp(-2.0 * u))


def causal_softmax(s: np.ndarray) -> np.ndarray:
    """Softmax over the last axis of (..., T, T) scores, where query t sees keys 0..t only."""
    t = s.shape[-1]
    causal = np.tril(np.ones((t, t), dtype=bool))
    s = np.where(causal, s, -np.inf)
    e = np.where(causal, exp(s - s.max(axis=-1, keepdims=True)), 0.0)  # max: exact in any order
    return e / row_sum(e)


def attention(x: np.ndarray, params: dict[str, np.ndarray], p: str, cfg: GPTConfig) -> np.ndarray:
    B, T, d = x.shape
    H, hd = cfg.n_head, cfg.head_dim
    qkv = linear(x, params[p + "qkv.weight"], params[p + "qkv.bias"])  # (B, T, 3d)
    q, k, v = qkv[..., :d], qkv[..., d : 2 * d], qkv[..., 2 * d :]
    q = q.reshape(B, T, H, hd).transpose(0, 2, 1, 3)  # (B, H, T, hd): one slice per head
    k = k.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
    v = v.reshape(B, T, H, hd).transpose(0, 2, 1, 3)
    scores = matmul(q, k.transpose(0, 1, 3, 2)) * (1.0 / math.sqrt(hd))  # (B, H, T, T)
    y = matmul(causal_softmax(scores), v)  # (B, H, T, hd)
    y = y.transpose(0, 2, 1, 3).reshape(B, T, d)  # heads side by side again
    return linear(y, params[p + "proj.weight"], params[p + "proj.bias"])


def mlp(x: np.ndarray, params: dict[str, np.ndarray], p: str) -> np.ndarray:
    h = gelu(linear(x, params[p + "fc.weight"], params[p + "fc.bias"]))
    return linear(h, params[p + "proj.weight"], params[p + "proj.bias"])


# --8<-- [end:layers]


# --8<-- [start:forward]
def forward(params: dict[str, np.ndarray], idx: np.ndarray, cfg: GPTConfig) -> np.ndarray:
    """Logits (B, T, vocab_size) for token ids idx (B, T); position t sees tokens 0..t."""
    idx = np.asarray(idx)
    _check_idx(idx, cfg)
    T = idx.shape[1]
    x = params["wte.weight"][idx] + params["wpe.weight"][:T]  # (B, T, d)
    for i in range(cfg.n_layer):
        p = f"blocks.{i}."
        ln1 = layer_norm(x, params[p + "ln_1.weight"], params[p + "ln_1.bias"], cfg.eps)
        x = x + attention(ln1, params, p + "attn.", cfg)
        ln2 = layer_norm(x, params[p + "ln_2.weight"], params[p + "ln_2.bias"], cfg.eps)
        x = x + mlp(ln2, params, p + "mlp.")
    x = layer_norm(x, params["ln_f.weight"], params["ln_f.bias"], cfg.eps)
    return linear(x, params["lm_head.weight"])


# --8<-- [end:forward]


def _check_idx(idx: np.ndarray, cfg: GPTConfig) -> None:
    if not np.issubdtype(idx.dtype, np.integer):
        raise TypeError(f"idx must hold integer token ids, got dtype {idx.dtype}")
    if idx.ndim != 2:
        raise ValueError(f"idx must be 2-D (batch, time), got shape {tuple(idx.shape)}")
    B, T = idx.shape
    if B < 1 or not 1 <= T <= cfg.block_size:
        raise ValueError(
            f"idx shape {tuple(idx.shape)}: need batch >= 1 and 1 <= time <= "
            f"block_size ({cfg.block_size})"
        )
    if idx.min() < 0 or idx.max() >= cfg.vocab_size:
        raise ValueError(
            f"token ids must be in [0, {cfg.vocab_size}), got [{idx.min()}, {idx.max()}]"
        )
