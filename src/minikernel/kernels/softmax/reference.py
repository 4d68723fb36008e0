"""Softmax: the fp64 reference and the seeded input generator every check and lab uses."""

from __future__ import annotations

import torch

_CHUNK_ELEMENTS = 1 << 26  # draw big inputs 64 Mi elements at a time: no 4-byte copy of all of it


def make_inputs(
    m: int,
    n: int,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    scale: float = 2.0,
) -> torch.Tensor:
    """An (m, n) matrix of ``scale * N(0, 1)`` values (logits of a few units, like a model's).

    Drawn on ``device`` itself from a seeded generator: a GPU fills 16 GB in milliseconds, where
    drawing on the CPU and copying would take minutes. The same seed gives the same numbers on
    every machine of the same device type (the CPU and CUDA generators differ from each other).
    """
    device = torch.device(device)
    g = torch.Generator(device=device).manual_seed(seed)
    x = torch.empty((m, n), dtype=dtype, device=device)
    rows = max(1, _CHUNK_ELEMENTS // max(n, 1))
    for r0 in range(0, m, rows):
        r1 = min(m, r0 + rows)
        chunk = torch.randn((r1 - r0, n), generator=g, dtype=torch.float32, device=device)
        x[r0:r1].copy_(chunk.mul_(scale))
    return x


def reference(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
    """softmax in float64 on the input's device: the answer every variant is measured against.

    Special values follow from the arithmetic: a row holding NaN or +inf, or made only of -inf,
    is NaN everywhere (-inf - -inf and inf - inf are NaN); -inf among finite values gives 0.
    """
    return torch.softmax(x.double(), dim=dim)


# (atol, rtol) per dtype for every rung against the fp64 reference; tests/test_softmax.py says
# why each value.
TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-12, 1e-5),
    torch.float16: (6e-8, 1e-3),
    torch.bfloat16: (1e-12, 8e-3),
}


def tolerances(impl: str, n: int) -> dict[torch.dtype, tuple[float, float]]:
    """The table for ``impl`` on rows of ``n`` elements.

    cuda:1 and cuda:2 sum a row serially in fp32 (one thread adds n terms in order), so their
    rounding error grows with n instead of log(n) for a tree reduction: the bound is n * 2^-24
    and the sum of n positive terms drifts at a steady fraction of it (a float32 serial sum of
    exp(2 * N(0, 1)) terms is off by 3.7e-5 at n = 131079 and 9.3e-5 at n = 262151, about
    n * 2^-24 / 200). Past 32768 columns their fp32 rtol is max(1e-4, n * 2^-24 / 64). That is
    the lesson of rung 3, not a bug.

    cuda:10, on rows that span a cluster (over 64 KB: n > 32768 for 16-bit types), keeps
    p = exp(x - m) in shared memory in the input's dtype and writes p * f, so a 16-bit output
    is rounded twice: up to twice the one-rounding bound, rtol 2e-3 (fp16) and 1.6e-2 (bf16),
    and two subnormal spacings, 1.2e-7, for fp16. Its fp32 p is exact. cuda:14 keeps p in fp32
    registers up to 512 KB rows (262144 16-bit elements) and runs rung 10's kernels past that;
    cuda:15 runs cuda:14's kernels on every row longer than its own short ones, and cuda:16
    rung 14's slices with its own exponential (the same bounds) and rung 15's short rows.
    """
    if impl in ("cuda:1", "cuda:2") and n > 32768:
        return {**TOLERANCES, torch.float32: (1e-12, max(1e-4, n * 2.0**-24 / 64))}
    if impl in ("cuda:10", "cuda:11", "cuda:12", "cuda:13") and n > 32768:  # rung 10's kernels
        return {**TOLERANCES, torch.float16: (1.2e-7, 2e-3), torch.bfloat16: (1e-12, 1.6e-2)}
    if impl in ("cuda:14", "cuda:15", "cuda:16") and n > 262144:
        return {**TOLERANCES, torch.float16: (1.2e-7, 2e-3), torch.bfloat16: (1e-12, 1.6e-2)}
    return TOLERANCES
