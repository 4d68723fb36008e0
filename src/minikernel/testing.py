"""The checker every test and every lab uses before trusting a kernel.

A kernel can be wrong in ways a plain ``allclose`` on its output does not see: it can write past
the end of its output (a missing mask), or leave part of it unwritten (a grid one block short).
:func:`run_checked` therefore

1. copies each input into the middle of a larger buffer whose margins hold finite random values,
   so that a kernel reading past the end reads plausible numbers rather than crashing;
2. gives the kernel an output poisoned with NaN, also inside a NaN-filled margin;
3. after the run, compares the margins bit for bit with what was there (a write past either end
   changes them), looks for NaN the reference does not have (unwritten elements), and compares
   the output with the fp64 reference under a per-dtype tolerance.

Deliberately wrong kernels live in ``tests/fixtures/`` and the tests assert that this rejects them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import torch

# (atol, rtol) per dtype for one rounding of a result computed in fp32 or better.
# The bound for one rounding is half an ulp: 2^-24 (fp32), 2^-11 (fp16), 2^-8 (bf16); each entry
# leaves room for a few roundings in the fp32 arithmetic before it. Ops with longer chains of
# arithmetic (reductions, exp) pass their own table.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-6, 1e-5),
    torch.float16: (1e-5, 1e-3),
    torch.bfloat16: (1e-4, 8e-3),
}


@dataclass
class CheckResult:
    ok: bool
    max_abs_err: float
    max_rel_err: float
    """Largest |out - ref| divided by the largest |ref| (0 where the reference is all zeros)."""
    wrote_outside: bool
    unwritten: int
    mismatches: int
    message: str

    def raise_if_failed(self) -> CheckResult:
        if not self.ok:
            raise AssertionError(self.message)
        return self


# --8<-- [start:guard]
def _guarded(t: torch.Tensor, margin: int, fill: str, gen: torch.Generator) -> tuple:
    """A copy of ``t`` inside a 1-D buffer with ``margin`` extra elements on each side."""
    n = t.numel()
    buf = torch.empty(n + 2 * margin, dtype=t.dtype, device=t.device)
    view = buf[margin : margin + n].view(t.shape)
    if fill == "nan":
        buf.fill_(float("nan"))
    else:
        edges = torch.randn(2, margin, generator=gen).to(device=t.device, dtype=t.dtype)
        buf[:margin].copy_(edges[0])
        buf[margin + n :].copy_(edges[1])
        view.copy_(t)
    return buf, view
    # --8<-- [end:guard]


def run_checked(
    kernel: Callable[..., object],
    inputs: Sequence[torch.Tensor],
    reference: torch.Tensor,
    *,
    out_dtype: torch.dtype | None = None,
    tolerances: Mapping[torch.dtype, tuple[float, float]] = DEFAULT_TOLERANCES,
    margin: int = 1024,
    name: str = "kernel",
) -> CheckResult:
    """Run ``kernel(*inputs, out)`` on guarded copies and compare ``out`` with ``reference``.

    ``inputs`` must be contiguous; ``reference`` is the fp64 answer (any device).
    """
    gen = torch.Generator().manual_seed(1234)
    guarded = [_guarded(t.contiguous(), margin, "random", gen) for t in inputs]
    dtype = out_dtype or inputs[0].dtype
    out_buf, out = _guarded(
        torch.empty(reference.shape, dtype=dtype, device=inputs[0].device), margin, "nan", gen
    )
    # --8<-- [start:checks]
    margins_before = torch.cat([out_buf[:margin], out_buf[out_buf.numel() - margin :]]).clone()
    kernel(*[v for _, v in guarded], out)
    if out.is_cuda:
        torch.cuda.synchronize()
    margins_after = torch.cat([out_buf[:margin], out_buf[out_buf.numel() - margin :]])
    int_view = {2: torch.int16, 4: torch.int32, 8: torch.int64}[out.element_size()]
    wrote_outside = not torch.equal(margins_before.view(int_view), margins_after.view(int_view))

    got = out.detach().double()
    ref = reference.detach().to(device=got.device, dtype=torch.float64)
    unwritten = int((torch.isnan(got) & ~torch.isnan(ref)).sum())
    atol, rtol = tolerances[dtype]
    close = torch.isclose(got, ref, rtol=rtol, atol=atol, equal_nan=True)
    mismatches = int((~close).sum())
    # --8<-- [end:checks]
    finite = torch.isfinite(got) & torch.isfinite(ref)
    diff = (got - ref).abs()[finite]
    max_abs = float(diff.max()) if diff.numel() else 0.0
    scale = float(ref.abs()[finite].max()) if diff.numel() else 0.0
    max_rel = max_abs / scale if scale > 0 else max_abs

    problems = []
    if wrote_outside:
        problems.append("wrote outside its output (a missing or wrong bounds mask?)")
    if unwritten:
        problems.append(f"left {unwritten} output element(s) unwritten (NaN poison survived)")
    if mismatches:
        idx = int((~close).flatten().nonzero()[0].item())
        problems.append(
            f"{mismatches} element(s) differ from the fp64 reference beyond atol={atol}, "
            f"rtol={rtol} (first at flat index {idx}: got {got.flatten()[idx].item()!r}, "
            f"want {ref.flatten()[idx].item()!r}; max abs err {max_abs:.3g})"
        )
    ok = not problems
    shape = tuple(reference.shape)
    dt = str(dtype).removeprefix("torch.")
    message = f"{name} on {shape} {dt}: " + ("ok" if ok else "; ".join(problems))
    return CheckResult(ok, max_abs, max_rel, wrote_outside, unwritten, mismatches, message)
