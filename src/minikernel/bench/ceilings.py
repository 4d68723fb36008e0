"""The GPU's own ceilings, measured in the same process as the kernels they judge.

Datasheet numbers are not what a kernel can reach: an H200's HBM3e is rated 4.8 TB/s, yet a
device-to-device copy, the simplest memory-bound kernel there is, moves about 4.3. Fractions on
the site are of these measured ceilings.
"""

from __future__ import annotations

from .timing import time_gpu


def copy_GBps(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy of ``nbytes``; counts bytes read plus bytes written."""
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    t = time_gpu(lambda: dst.copy_(src), graph=False)
    return 2 * src.numel() * 4 / (t.median_us * 1e-6) / 1e9


def bf16_mm_TFLOPs(n: int = 8192) -> float:
    """A large bf16 matrix product through PyTorch (cuBLAS), on random data (zeros run faster)."""
    import torch

    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    t = time_gpu(lambda: a @ b, graph=False)
    return 2 * n**3 / (t.median_us * 1e-6) / 1e12


def measure() -> dict[str, float]:
    return {"copy_GBps": round(copy_GBps(), 1), "bf16_mm_TFLOPs": round(bf16_mm_TFLOPs(), 1)}
