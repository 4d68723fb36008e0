"""The NumPy MiniGPT (numpy_model.py) ported to PyTorch ``nn.Module``s, line for line.

Each module's ``forward`` does the operations of the matching NumPy function, in the same order,
so in float64 the logits are the same bytes as NumPy's, on the CPU and (every operation being
either exact or one correctly rounded ``+ - * /``) on a GPU too. Parameter names are the NumPy
dict's keys: ``MiniGPT.from_numpy(params, cfg)`` loads them as they are, no renaming, no
transposes.

Two sets of primitives (``OPS``) drive the model:

- ``"exact"`` (the default): :func:`matmul` and :func:`row_sum` add left to right, :func:`exp`
  and :func:`sqrt` are built from ``+ - * /``, exactly as in numpy_model.py. float64 only.
- ``"torch"``: ``torch.matmul``, ``Tensor.sum``, ``torch.exp`` and ``torch.sqrt``, PyTorch's own
  (BLAS / cuBLAS, vectorised reductions, MKL or CUDA math). Any dtype, fast, and TF32 applies to
  its matmuls on a GPU; its logits agree with NumPy's to a tolerance, not to the bit.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from .numpy_model import EXP_COEFFS, INV_LN2, LN2_HI, LN2_LO, SQRT_2_OVER_PI, GPTConfig

__all__ = ["OPS", "MiniGPT", "Ops", "exp", "matmul", "pow2", "row_sum", "sqrt"]


# --- float64 primitives in a fixed order (the same lines as numpy_model.py) -----------------


# --8<-- [start:matmul]
def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b`` for (..., M, K) @ (..., K, N), adding the K products left to right."""
    acc = a[..., :, 0:1] * b[..., 0:1, :]
    for k in range(1, a.shape[-1]):
        acc = acc + a[..., :, k : k + 1] * b[..., k : k + 1, :]
    return acc


def row_sum(x: torch.Tensor) -> torch.Tensor:
    """The sum over the last dimension (kept, size 1), added left to right."""
    s = x[..., 0:1]
    for i in range(1, x.shape[-1]):
        s = s + x[..., i : i + 1]
    return s


# --8<-- [end:matmul]


# --8<-- [start:exp]
def pow2(k: torch.Tensor) -> torch.Tensor:
    """2.0**k for integer k in [-1022, 1023], exactly: a float64 with exponent field k + 1023.

    Not torch.ldexp: it computes pow(2.0, k), which for an integer k is a float32 tensor.
    """
    return ((k.to(torch.int64) + 1023) << 52).view(torch.float64)


def exp(x: torch.Tensor) -> torch.Tensor:
    """e**x from ``+ - *`` only: range reduction by ln 2, then a degree-13 Taylor polynomial.

    torch.exp would call MKL's vector exp (CPU) or CUDA's exp (GPU); numpy_model.exp explains
    the steps.
    """
    x = torch.clamp(x, -708.0, 709.0)
    k = torch.round(x * INV_LN2)  # round half to even, like np.rint
    r = (x - k * LN2_HI) - k * LN2_LO
    p = torch.full_like(r, EXP_COEFFS[-1])
    for c in reversed(EXP_COEFFS[:-1]):
        p = p * r + c
    return p * pow2(k)


# --8<-- [end:exp]


# --8<-- [start:sqrt]
def sqrt(v: torch.Tensor) -> torch.Tensor:
    """The square root of positive normal float64 v: frexp, then Heron's iteration.

    torch.sqrt is not always correctly rounded on the CPU: on contiguous float64 tensors it may
    use MKL's vector sqrt, one ULP off now and then, and which elements take that path depends
    on their position. numpy_model.sqrt explains the steps.
    """
    m, e = torch.frexp(v)  # v = m * 2**e, m in [0.5, 1)
    odd = e % 2
    m = torch.where(odd == 1, 2.0 * m, m)
    j = (e - odd) // 2
    y = torch.ones_like(m)
    for _ in range(6):
        y = 0.5 * (y + m / y)
    return y * pow2(j)


# --8<-- [end:sqrt]


@dataclass(frozen=True)
class Ops:
    """The four operations whose order or approximation a library chooses."""

    matmul: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    row_sum: Callable[[torch.Tensor], torch.Tensor]
    exp: Callable[[torch.Tensor], torch.Tensor]
    sqrt: Callable[[torch.Tensor], torch.Tensor]


OPS: dict[str, Ops] = {
    "exact": Ops(matmul=matmul, row_sum=row_sum, exp=exp, sqrt=sqrt),
    "torch": Ops(
        matmul=torch.matmul,
        row_sum=lambda x: x.sum(dim=-1, keepdim=True),
        exp=torch.exp,
        sqrt=torch.sqrt,
    ),
}


# --- the model -------------------------------------------------------------------------------


# --8<-- [start:layers]
class Linear(nn.Module):
    """``x @ W + b`` with W stored (in, out), as in the NumPy dict.

    nn.Linear stores its weight (out, in) and computes ``x @ W.T`` through BLAS; keeping
    NumPy's layout means a parameter is loaded as it is, and ``ops.matmul`` fixes the order.
    """

    def __init__(self, n_in: int, n_out: int, ops: Ops, bias: bool = True) -> None:
        super().__init__()
        self.ops = ops
        self.weight = nn.Parameter(torch.empty(n_in, n_out, dtype=torch.float64))
        self.bias = nn.Parameter(torch.empty(n_out, dtype=torch.float64)) if bias else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.ops.matmul(x, self.weight)
        return y if self.bias is None else y + self.bias


class LayerNorm(nn.Module):
    """numpy_model.layer_norm as a module: the mean and variance summed left to right.

    nn.LayerNorm computes the mean and variance in one fused pass in its own order.
    """

    def __init__(self, n: int, eps: float, ops: Ops) -> None:
        super().__init__()
        self.ops, self.eps = ops, eps
        self.weight = nn.Parameter(torch.empty(n, dtype=torch.float64))
        self.bias = nn.Parameter(torch.empty(n, dtype=torch.float64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inv_n = 1.0 / x.shape[-1]
        mean = self.ops.row_sum(x) * inv_n
        d = x - mean
        var = self.ops.row_sum(d * d) * inv_n
        return d / self.ops.sqrt(var + self.eps) * self.weight + self.bias


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPTConfig, ops: Ops) -> None:
        super().__init__()
        self.ops, self.n_head = ops, cfg.n_head
        self.qkv = Linear(cfg.n_embd, 3 * cfg.n_embd, ops)
        self.proj = Linear(cfg.n_embd, cfg.n_embd, ops)

    def causal_softmax(self, s: torch.Tensor) -> torch.Tensor:
        t = s.shape[-1]
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=s.device))
        s = torch.where(causal, s, -math.inf)
        e = torch.where(causal, self.ops.exp(s - s.amax(dim=-1, keepdim=True)), 0.0)
        return e / self.ops.row_sum(e)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, d = x.shape
        H, hd = self.n_head, d // self.n_head
        q, k, v = self.qkv(x).split(d, dim=-1)
        q = q.view(B, T, H, hd).transpose(1, 2)  # (B, H, T, hd)
        k = k.view(B, T, H, hd).transpose(1, 2)
        v = v.view(B, T, H, hd).transpose(1, 2)
        scores = self.ops.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
        y = self.ops.matmul(self.causal_softmax(scores), v)  # (B, H, T, hd)
        y = y.transpose(1, 2).reshape(B, T, d)
        return self.proj(y)


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig, ops: Ops) -> None:
        super().__init__()
        self.ops = ops
        self.fc = Linear(cfg.n_embd, 4 * cfg.n_embd, ops)
        self.proj = Linear(4 * cfg.n_embd, cfg.n_embd, ops)

    def gelu(self, x: torch.Tensor) -> torch.Tensor:
        """GPT-2's tanh GELU as x * sigmoid(2u), like numpy_model.gelu (not F.gelu)."""
        u = SQRT_2_OVER_PI * (x + 0.044715 * (x * x * x))
        return x / (1.0 + self.ops.exp(-2.0 * u))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(self.gelu(self.fc(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, ops: Ops) -> None:
        super().__init__()
        self.ln_1 = LayerNorm(cfg.n_embd, cfg.eps, ops)
        self.attn = CausalSelfAttention(cfg, ops)
        self.ln_2 = LayerNorm(cfg.n_embd, cfg.eps, ops)
        self.mlp = MLP(cfg, ops)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


# --8<-- [end:layers]


# --8<-- [start:model]
class MiniGPT(nn.Module):
    """numpy_model.forward as a module tree; ``state_dict()`` keys are numpy_model's names.

    The parameters start uninitialised: build it with ``MiniGPT.from_numpy(params, cfg)``
    (``params = numpy_model.init_params(cfg, seed)``), or call ``load_numpy_params``.
    """

    def __init__(self, cfg: GPTConfig, ops: str = "exact") -> None:
        super().__init__()
        if ops not in OPS:
            raise ValueError(f"ops must be one of {sorted(OPS)}, got {ops!r}")
        self.cfg, self.ops_name = cfg, ops
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd, dtype=torch.float64)
        self.wpe = nn.Embedding(cfg.block_size, cfg.n_embd, dtype=torch.float64)
        self.blocks = nn.ModuleList(Block(cfg, OPS[ops]) for _ in range(cfg.n_layer))
        self.ln_f = LayerNorm(cfg.n_embd, cfg.eps, OPS[ops])
        self.lm_head = Linear(cfg.n_embd, cfg.vocab_size, OPS[ops], bias=False)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, vocab_size) for token ids idx (B, T)."""
        self._check(idx)
        T = idx.shape[1]
        x = self.wte(idx) + self.wpe.weight[:T]
        for block in self.blocks:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    # --8<-- [end:model]

    # --8<-- [start:load]
    @classmethod
    def from_numpy(
        cls, params: Mapping[str, np.ndarray], cfg: GPTConfig, ops: str = "exact"
    ) -> MiniGPT:
        """A model on the CPU in float64 holding copies of the NumPy parameters."""
        model = cls(cfg, ops)
        model.load_numpy_params(params)
        return model

    def load_numpy_params(self, params: Mapping[str, np.ndarray]) -> None:
        """Copy each NumPy array into the parameter of the same name (same shape, no transpose)."""
        own = self.state_dict()
        missing, unexpected = sorted(own.keys() - params.keys()), sorted(params.keys() - own)
        if missing or unexpected:
            raise ValueError(f"parameter names differ: missing {missing}, unexpected {unexpected}")
        for name, value in params.items():
            if tuple(value.shape) != tuple(own[name].shape):
                raise ValueError(
                    f"{name}: shape {tuple(value.shape)} does not fit {tuple(own[name].shape)}"
                )
        # load_state_dict copies into the existing parameters, keeping their device and dtype.
        self.load_state_dict({name: torch.from_numpy(np.asarray(v)) for name, v in params.items()})

    # --8<-- [end:load]

    def _check(self, idx: torch.Tensor) -> None:
        cfg = self.cfg
        if not isinstance(idx, torch.Tensor):
            raise TypeError(f"idx must be a torch.Tensor, got {type(idx).__name__}")
        if idx.dtype not in (torch.int64, torch.int32):
            raise TypeError(f"idx must hold int64 or int32 token ids, got dtype {idx.dtype}")
        if idx.dim() != 2:
            raise ValueError(f"idx must be 2-D (batch, time), got shape {tuple(idx.shape)}")
        if idx.shape[0] < 1 or not 1 <= idx.shape[1] <= cfg.block_size:
            raise ValueError(
                f"idx shape {tuple(idx.shape)}: need batch >= 1 and 1 <= time <= "
                f"block_size ({cfg.block_size})"
            )
        if idx.device != self.wte.weight.device:
            raise ValueError(f"idx is on {idx.device}, the model on {self.wte.weight.device}")
        if self.ops_name == "exact" and self.wte.weight.dtype != torch.float64:
            raise TypeError(
                f"ops='exact' builds exp and sqrt from float64 bits; the model is "
                f"{self.wte.weight.dtype} (use ops='torch' for other dtypes)"
            )
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= cfg.vocab_size:
            raise ValueError(f"token ids must be in [0, {cfg.vocab_size}), got [{lo}, {hi}]")
