"""Attention: the fp64 reference and the seeded input generator every check and lab uses."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F


def make_inputs(
    batch: int,
    heads: int,
    seq_q: int,
    head_dim: int,
    dtype: torch.dtype = torch.float16,
    device: str | torch.device = "cpu",
    seed: int = 0,
    seq_k: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q of shape (batch, heads, seq_q, head_dim); k and v with seq_k rows (default seq_q).

    Standard normal entries, drawn on the CPU from a seeded generator (the same numbers on any
    machine), then cast and moved. With the default scale 1/sqrt(head_dim) the scores are then
    about N(0, 1): softmax rows are neither one-hot nor flat, so both kinds of error show.
    """
    seq_k = seq_q if seq_k is None else seq_k
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seq_q, head_dim, generator=g)
    k = torch.randn(batch, heads, seq_k, head_dim, generator=g)
    v = torch.randn(batch, heads, seq_k, head_dim, generator=g)
    return tuple(t.to(dtype).to(device) for t in (q, k, v))  # type: ignore[return-value]


def reference(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    causal: bool = False,
    scale: float | None = None,
) -> torch.Tensor:
    """softmax(q k^T * scale [+ causal mask]) v in float64, on the inputs' device.

    PyTorch's scaled_dot_product_attention on float64 tensors runs its plain "math" backend
    (no fused kernel takes fp64), so this is the textbook formula, computed in double.
    ``causal`` masks column j for row i when j > i (top-left aligned, as SDPA's is_causal).
    """
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    return F.scaled_dot_product_attention(
        q.double(), k.double(), v.double(), is_causal=causal, scale=scale
    )
