"""Cross-entropy: the fused kernel (loss and gradient) and linear + cross-entropy against the
fp64 reference and its autograd; ignore_index, reductions, label smoothing, extreme logits, bad
input, and wrong kernels the checks must reject."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from conftest import DEVICE, HAS_GPU, INTERPRET, compiled

from minikernel.kernels.cross_entropy import (
    bytes_moved,
    cross_entropy,
    cuda_kernels,
    default_chunk,
    linear_cross_entropy,
    linear_flops,
    make_inputs,
    make_linear_inputs,
    reference,
    reference_grad,
    reference_linear,
)
from minikernel.kernels.cross_entropy.triton_kernels import launch
from minikernel.testing import run_checked

DTYPES = [torch.float32, torch.float16, torch.bfloat16]
# Few rows each: on a CPU every row is one program of Triton's interpreter.
SHAPES = [
    (3, 1),  # one class: the loss is 0 and so is the gradient
    (4, 127),  # a single tile, partly masked
    (3, 8193),  # one past a tile of 8192: a last tile with a single class
    (2, 32003),  # a vocabulary of 32000 + 3: several tiles, none a multiple of the vector width
    (2, 128256),  # Llama 3's vocabulary
    (2, 131079),  # 2^17 + 7: the longest, a ragged last tile
]
# Loss: a sum of V exponentials in fp32, rounded once; gradient: softmax minus one-hot, rounded.
LOSS_RTOL = {torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}
GRAD_TOL = {
    torch.float32: (1e-7, 1e-5),
    torch.float16: (1e-6, 2e-3),
    torch.bfloat16: (1e-5, 1.6e-2),
}


def _skip_bf16(dtype: torch.dtype) -> None:
    if INTERPRET and dtype == torch.bfloat16:
        pytest.skip("Triton's interpreter computes bf16 wrong (NaN); bf16 is tested on the GPU")


def _grad_tol(dtype: torch.dtype, ref: torch.Tensor) -> dict[torch.dtype, tuple[float, float]]:
    """Gradients are tiny for most classes: absolute tolerance scaled to the largest one."""
    atol, rtol = GRAD_TOL[dtype]
    return {dtype: (max(atol, rtol * float(ref.abs().max()) * 1e-2), rtol)}


# --- the kernel: gradient through the guarded checker, loss against the reference ----------


# The CUDA C kernel (cuda:1) needs an sm_90+ GPU; on it every case runs both kernels.
IMPLS = ["triton:1", pytest.param("cuda:1", marks=pytest.mark.gpu)]


def _kernel_launch(impl: str):  # type: ignore[no-untyped-def]
    if impl == "triton:1":
        return launch

    def cuda(*args: object, **kw: object) -> None:
        assert cuda_kernels.launch(*args, **kw), "the cluster kernel refused the case"  # type: ignore[arg-type]

    return cuda


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_kernel_loss_and_gradient(
    shape: tuple[int, int], dtype: torch.dtype, smoothing: float, impl: str
) -> None:
    _skip_bf16(dtype)
    t, v = shape
    device = "cuda" if impl == "cuda:1" else DEVICE
    logits, target = make_inputs(t, v, dtype, device, seed=v)
    loss = torch.empty(t, dtype=torch.float32, device=device)
    stats = torch.empty((t, 2), dtype=torch.float32, device=device)
    kw = {"label_smoothing": smoothing}
    run = _kernel_launch(impl)

    def kernel(x: torch.Tensor, tg: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
        run(x, tg, loss, stats, dx=out, **kw)
        return out

    ref_loss, ref_grad = reference_grad(logits, target, reduction="sum", **kw)
    result = run_checked(kernel, [logits, target], ref_grad, tolerances=_grad_tol(dtype, ref_grad))
    result.raise_if_failed()
    ref_rows = reference(logits, target, reduction="none", **kw)
    torch.testing.assert_close(
        loss.double().cpu(), ref_rows.cpu(), rtol=LOSS_RTOL[dtype], atol=LOSS_RTOL[dtype]
    )
    assert abs(float(loss.double().sum()) - float(ref_loss)) <= LOSS_RTOL[dtype] * (
        abs(float(ref_loss)) + 1
    )


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_kernel_loss_only(
    shape: tuple[int, int], dtype: torch.dtype, smoothing: float, impl: str
) -> None:
    """Without dx the kernels write the loss and row statistics only (cuda:1: the streaming
    kernel, a different code path from the gradient kernel): both must match the reference,
    and the statistics must be the ones the gradient kernel writes (the backward of
    reduction='none' reads them)."""
    _skip_bf16(dtype)
    t, v = shape
    device = "cuda" if impl == "cuda:1" else DEVICE
    logits, target = make_inputs(t, v, dtype, device, seed=v + 1, ignore_frac=0.2)
    run = _kernel_launch(impl)
    loss = torch.full((t,), float("nan"), dtype=torch.float32, device=device)
    stats = torch.full((t, 2), float("nan"), dtype=torch.float32, device=device)
    run(logits, target, loss, stats, label_smoothing=smoothing)
    ref_rows = reference(logits, target, reduction="none", label_smoothing=smoothing)
    torch.testing.assert_close(
        loss.double().cpu(), ref_rows.cpu(), rtol=LOSS_RTOL[dtype], atol=LOSS_RTOL[dtype]
    )
    loss_g = torch.empty_like(loss)
    stats_g = torch.empty_like(stats)
    run(logits, target, loss_g, stats_g, dx=torch.empty_like(logits), label_smoothing=smoothing)
    torch.testing.assert_close(stats, stats_g, rtol=1e-5, atol=1e-5)


# --- the autograd function: reductions, ignore_index, upstream gradients -------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("smoothing", [0.0, 0.25])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_function_matches_torch(
    dtype: torch.dtype, reduction: str, smoothing: float, impl: str
) -> None:
    _skip_bf16(dtype)
    device = "cuda" if impl == "cuda:1" else DEVICE
    logits, target = make_inputs(9, 1000, dtype, device, seed=5, ignore_frac=0.3)
    target[0] = -100  # at least one ignored row, whatever the draw
    kw = {"reduction": reduction, "label_smoothing": smoothing, "impl": impl}
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target, **kw)
    assert loss.dtype == dtype
    assert loss.shape == ((9,) if reduction == "none" else ())
    grad_out = torch.rand(loss.shape, device=device) + 0.5  # not 1: the scaled path
    loss.backward(grad_out.to(dtype))
    kw.pop("impl")
    ref_loss, ref_grad = reference_grad(logits, target, grad_out.to(dtype), **kw)
    rtol = LOSS_RTOL[dtype]
    torch.testing.assert_close(loss.double().cpu(), ref_loss.cpu(), rtol=rtol, atol=rtol)
    atol, grtol = _grad_tol(dtype, ref_grad)[dtype]
    torch.testing.assert_close(x.grad.double().cpu(), ref_grad.cpu(), rtol=grtol, atol=atol)
    assert torch.all(x.grad[0] == 0), "an ignored row must get a zero gradient"


def test_ignore_index_is_configurable_and_int32_targets_work() -> None:
    logits, target = make_inputs(6, 50, torch.float32, DEVICE, seed=1)
    target[::2] = 7  # ignore class 7's rows
    ours = cross_entropy(logits, target.int(), ignore_index=7)
    want = reference(logits, target, ignore_index=7)
    torch.testing.assert_close(ours.double(), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_all_targets_ignored(reduction: str, impl: str) -> None:
    """PyTorch gives NaN for the mean (0 / 0), 0 for the sum, zeros per row; gradients zero."""
    device = "cuda" if impl == "cuda:1" else DEVICE
    logits, _ = make_inputs(4, 300, torch.float32, device)
    logits.fill_(float("nan"))  # never read: a kernel that reads an ignored row shows it
    target = torch.full((4,), -100, device=device)
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target, reduction=reduction, impl=impl)
    want = F.cross_entropy(logits, target, reduction=reduction)
    torch.testing.assert_close(loss, want, equal_nan=True)
    loss.sum().backward()
    assert torch.count_nonzero(x.grad) == 0


def test_upstream_gradient_of_one_uses_the_forward_gradient_as_is() -> None:
    logits, target = make_inputs(5, 200, torch.float32, DEVICE, seed=2)
    x = logits.clone().requires_grad_(True)
    (grad,) = torch.autograd.grad(cross_entropy(x, target), x)
    _, ref = reference_grad(logits, target)
    torch.testing.assert_close(grad.double(), ref, atol=1e-7, rtol=1e-5)
    (grad3,) = torch.autograd.grad(3 * cross_entropy(x, target), x)
    torch.testing.assert_close(grad3, 3 * grad)


def test_second_backward_on_one_graph_is_a_clear_error() -> None:
    logits, target = make_inputs(3, 40, torch.float32, DEVICE)
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target)
    loss.backward(retain_graph=True)
    with pytest.raises(RuntimeError, match="already handed to a first backward pass"):
        loss.backward()


@pytest.mark.parametrize("v", [300, 131079])  # one block; a cluster of slices (cuda:1)
@pytest.mark.parametrize("impl", IMPLS)
def test_inplace_backward_overwrites_the_logits_with_their_gradient(impl: str, v: int) -> None:
    device = "cuda" if impl == "cuda:1" else DEVICE
    logits, target = make_inputs(5, v, torch.float32, device, seed=4)
    ref_loss, ref_grad = reference_grad(logits, target)
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target, inplace_backward=True, impl=impl)
    torch.testing.assert_close(loss.double(), ref_loss)
    torch.testing.assert_close(x.detach().double(), ref_grad, atol=1e-7, rtol=1e-5)
    loss.backward()
    torch.testing.assert_close(x.grad.double(), ref_grad, atol=1e-7, rtol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=lambda d: str(d)[6:])
@pytest.mark.parametrize(
    "t",
    [
        1,  # one block: it is the last of its group and of the batch
        128,  # exactly one group of 128 rows: no second level
        129,  # a second group of one row
        4097,  # 33 groups, the last one a single row
        20000,  # 157 groups: the second level takes two steps of 128
    ],
)
def test_cuda_forward_reduces_the_batch_in_the_kernel(
    t: int, dtype: torch.dtype, reduction: str, smoothing: float
) -> None:
    """Without a gradient, cuda:1's forward pass with 'mean' or 'sum' is one launch whose last
    blocks reduce the batch (cross_entropy.cu, reduce_batch). It must match the reference, the
    per-row losses summed on the host, and itself bit for bit (deterministic: the same order of
    additions whichever block finishes last), call after call (fresh counters each time)."""
    logits, target = make_inputs(t, 96, dtype, "cuda", seed=t, ignore_frac=0.25)
    target[0] = 5  # one valid row at least (every row ignored: the next test)
    kw = {"reduction": reduction, "label_smoothing": smoothing}
    got = [cross_entropy(logits, target, impl="cuda:1", **kw) for _ in range(3)]
    assert got[0].dtype == dtype and got[0].shape == ()
    assert all(torch.equal(g, got[0]) for g in got[1:]), [float(g) for g in got]
    want = reference(logits, target, **kw)
    rtol = LOSS_RTOL[dtype]
    torch.testing.assert_close(got[0].double(), want, rtol=rtol, atol=rtol)
    rows = cross_entropy(logits, target, impl="cuda:1", reduction="none", label_smoothing=smoothing)
    host = rows.float().sum() / ((target != -100).sum() if reduction == "mean" else 1)
    torch.testing.assert_close(got[0].float(), host, rtol=rtol, atol=rtol)


@pytest.mark.gpu
@pytest.mark.parametrize("reduction", ["mean", "sum"])
def test_cuda_forward_with_every_target_ignored(reduction: str) -> None:
    """The in-kernel reduction follows torch: NaN for the mean (0 / 0), 0 for the sum."""
    logits, _ = make_inputs(300, 64, torch.float32, "cuda")
    target = torch.full((300,), -100, device="cuda")
    got = cross_entropy(logits, target, reduction=reduction, impl="cuda:1")
    want = F.cross_entropy(logits, target, reduction=reduction)
    torch.testing.assert_close(got, want, equal_nan=True)


def test_no_grad_forward_matches() -> None:
    logits, target = make_inputs(4, 32003, torch.float16, DEVICE, seed=9)
    with torch.no_grad():
        loss = cross_entropy(logits, target)
    torch.testing.assert_close(loss.double(), reference(logits, target), rtol=1e-3, atol=1e-3)


# --- extreme logits -------------------------------------------------------------------------


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
def test_extreme_logits(dtype: torch.dtype, impl: str) -> None:
    _skip_bf16(dtype)
    device = "cuda" if impl == "cuda:1" else DEVICE
    # two Triton tiles: the running max must be rescaled across them; for cuda:1 in fp32,
    # past one 64 KB slice (a cluster of two, the max in the second block)
    v = 9000 if impl == "triton:1" or dtype != torch.float32 else 20000
    big = 3e4 if dtype != torch.float32 else 1e30
    logits = torch.zeros(5, v, device=device, dtype=dtype)
    logits[0, v - 1] = big  # the max sits in the last tile, far above the first tile's
    logits[1, 0] = big  # the max in the first tile
    logits[2] = -big  # all equal and very negative: loss = log V
    logits[3, :8192] = float("-inf")  # a masked vocabulary: the whole first tile is -inf
    logits[4] = torch.linspace(-big, big, v, device=device).to(dtype)
    target = torch.tensor([v - 1, 5, 77, 8500, 0], device=device)
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target, reduction="none", impl=impl)
    loss.sum().backward()
    ref_loss, ref_grad = reference_grad(logits, target, reduction="none")
    assert torch.isfinite(loss).all() and torch.isfinite(x.grad).all()
    rtol = LOSS_RTOL[dtype]  # the loss is returned in the logits' dtype: one rounding
    torch.testing.assert_close(loss.double().cpu(), ref_loss.cpu(), rtol=rtol, atol=rtol)
    torch.testing.assert_close(x.grad.double().cpu(), ref_grad.cpu(), rtol=1.6e-2, atol=1e-3)
    with torch.no_grad():  # the loss alone: cuda:1's streaming kernel rescales differently
        alone = cross_entropy(logits, target, reduction="none", impl=impl)
    torch.testing.assert_close(alone.double().cpu(), ref_loss.cpu(), rtol=rtol, atol=rtol)


@pytest.mark.parametrize("impl", IMPLS)
def test_target_out_of_range_gives_nan_not_a_bad_read(impl: str) -> None:
    device = "cuda" if impl == "cuda:1" else DEVICE
    logits, _ = make_inputs(3, 100, torch.float32, device)
    target = torch.tensor([1, 100, -5], device=device)
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target, reduction="none", impl=impl)
    loss.sum().backward()
    assert torch.isfinite(loss[0]) and torch.isnan(loss[1:]).all()
    assert torch.isfinite(x.grad[0]).all() and torch.isnan(x.grad[1:]).all()
    with torch.no_grad():
        alone = cross_entropy(logits, target, reduction="none", impl=impl)
    assert torch.isfinite(alone[0]) and torch.isnan(alone[1:]).all()


# --- linear + cross-entropy -----------------------------------------------------------------

LINEAR_SHAPES = [
    (37, 16, 300, 8),  # (T, H, V, chunk): five chunks, the last one with 5 tokens
    (5, 8, 32003, None),  # one chunk, an odd vocabulary over several tiles
    (1, 1, 7, None),  # a single token, a single feature
]


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: str(d).removeprefix("torch."))
@pytest.mark.parametrize("case", LINEAR_SHAPES, ids=lambda c: "x".join(map(str, c[:3])))
def test_linear_cross_entropy(case: tuple, dtype: torch.dtype, reduction: str) -> None:
    _skip_bf16(dtype)
    t, h, v, chunk = case
    if INTERPRET and v > 1000 and reduction != "mean":
        # The interpreter spends most of a minute per call on this vocabulary; the reductions
        # are checked on the other shapes here, and on every shape on a GPU.
        pytest.skip("the large vocabulary runs with reduction='mean' only under the interpreter")
    hidden, weight, target = make_linear_inputs(t, h, v, dtype, DEVICE, seed=t, ignore_frac=0.2)
    kw = {"reduction": reduction, "label_smoothing": 0.1}
    hg, wg = hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)
    loss = linear_cross_entropy(hg, wg, target, chunk_size=chunk, **kw)
    grad_out = torch.rand(loss.shape, device=DEVICE) + 0.5
    loss.backward(grad_out.to(dtype))
    ref_loss, ref_dh, ref_dw = reference_linear(hidden, weight, target, grad_out.to(dtype), **kw)
    # The logits are computed in the inputs' dtype (as F.linear does), then the loss: the
    # tolerance is that of one rounding of the logits, amplified by the matmuls of the grads.
    tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 8e-2}[dtype]
    torch.testing.assert_close(loss.double().cpu(), ref_loss.cpu(), rtol=tol, atol=tol)
    for got, want in ((hg.grad, ref_dh), (wg.grad, ref_dw)):
        scale = float(want.abs().max()) + 1e-12
        torch.testing.assert_close(got.double().cpu(), want.cpu(), rtol=tol, atol=tol * scale)


@pytest.mark.parametrize("which", ["hidden", "weight"])
def test_linear_cross_entropy_one_gradient(which: str) -> None:
    hidden, weight, target = make_linear_inputs(20, 8, 50, torch.float32, DEVICE, seed=3)
    hg = hidden.clone().requires_grad_(which == "hidden")
    wg = weight.clone().requires_grad_(which == "weight")
    loss = linear_cross_entropy(hg, wg, target, chunk_size=6)
    loss.backward()
    _, ref_dh, ref_dw = reference_linear(hidden, weight, target)
    got, want = (hg.grad, ref_dh) if which == "hidden" else (wg.grad, ref_dw)
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-6)
    assert (wg.grad if which == "hidden" else hg.grad) is None


def test_linear_cross_entropy_without_grad_and_default_chunk() -> None:
    hidden, weight, target = make_linear_inputs(9, 4, 70, torch.float32, DEVICE, seed=8)
    with torch.no_grad():
        loss = linear_cross_entropy(hidden, weight, target)
    ref, _, _ = reference_linear(hidden, weight, target)
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-6)
    assert default_chunk(128256, torch.bfloat16) == 1024
    assert default_chunk(131072, torch.float32) == 512


@pytest.mark.parametrize("default", ["cuda:1", "triton:1"])
def test_linear_cross_entropy_fuses_whatever_the_default_of_cross_entropy(
    monkeypatch: pytest.MonkeyPatch, default: str
) -> None:
    """With no impl, linear_cross_entropy runs its fused kernels wherever cross_entropy runs a
    kernel of ours (it once fell back to PyTorch, logits and all, when that default became
    cuda:1): the PyTorch path must not be taken."""
    if DEVICE == "cpu" and not INTERPRET:
        pytest.skip("the fused kernels run on a GPU or in Triton's interpreter")
    import minikernel.kernels.cross_entropy as ce

    monkeypatch.setattr(ce, "default_impl", lambda t: default)

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("linear_cross_entropy took the PyTorch path")

    hidden, weight, target = make_linear_inputs(9, 4, 70, torch.float32, DEVICE, seed=8)
    ref, _, _ = reference_linear(hidden, weight, target)
    monkeypatch.setattr(ce.F, "cross_entropy", refuse)  # what the PyTorch path calls
    with torch.no_grad():
        loss = ce.linear_cross_entropy(hidden, weight, target)
    monkeypatch.undo()
    torch.testing.assert_close(loss.double(), ref, rtol=1e-5, atol=1e-6)


@pytest.mark.gpu
def test_linear_cross_entropy_never_holds_the_logits() -> None:
    """Peak memory beyond inputs and gradients: one chunk of logits, not T x V."""
    t, h, v = 8192, 256, 32000
    hidden, weight, target = make_linear_inputs(t, h, v, torch.bfloat16, "cuda")
    hidden.requires_grad_(True)
    weight.requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    loss = linear_cross_entropy(hidden, weight, target, chunk_size=1024)
    loss.backward()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base
    grads = hidden.numel() * 2 + weight.numel() * 2
    assert extra < grads + 2 * 1024 * v * 2 + (16 << 20), extra
    assert extra < t * v * 2  # less than the full logits, once


@pytest.mark.gpu
def test_fused_cross_entropy_peak_memory_is_logits_plus_gradient() -> None:
    t, v = 4096, 32000
    logits, target = make_inputs(t, v, torch.bfloat16, "cuda")
    logits.requires_grad_(True)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    (grad,) = torch.autograd.grad(cross_entropy(logits, target), logits)
    torch.cuda.synchronize()
    assert torch.cuda.max_memory_allocated() - base <= t * v * 2 + (4 << 20)
    assert grad.dtype == torch.bfloat16


# --- bad input ------------------------------------------------------------------------------


def _l(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.zeros(*shape, dtype=dtype, device=DEVICE)


def _t(*values: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype, device=DEVICE)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (([[1.0]], _t(0)), {}, TypeError, "logits must be a torch.Tensor"),
        ((_l(2, 3, 4), _t(0, 1)), {}, ValueError, "logits must have 2 dimension"),
        ((_l(2, 3, dtype=torch.float64), _t(0, 1)), {}, TypeError, "logits has dtype float64"),
        ((_l(2, 0), _t(0, 1)), {}, ValueError, "logits has no classes"),
        ((_l(3, 2).t(), _t(0, 1)), {}, ValueError, "unit stride along the classes"),
        ((_l(2, 3), _t(0, 1, dtype=torch.float32)), {}, TypeError, "target has dtype float32"),
        ((_l(2, 3), _t(0, 1, 2)), {}, ValueError, "target has 3 entries but there are 2 rows"),
        ((_l(2, 3), _t(0, 1)), {"reduction": "avg"}, ValueError, "reduction must be one of"),
        ((_l(2, 3), _t(0, 1)), {"label_smoothing": 1.5}, ValueError, r"label_smoothing must be"),
        ((_l(2, 3), _t(0, 1)), {"impl": "cuda:7"}, ValueError, "unknown impl 'cuda:7'"),
    ],
    ids=[
        "not-a-tensor",
        "3-d",
        "float64",
        "no-classes",
        "strided-classes",
        "float-target",
        "target-length",
        "bad-reduction",
        "bad-smoothing",
        "unknown-impl",
    ],
)
def test_bad_input_raises(args, kwargs, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        cross_entropy(*args, **kwargs)


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((_l(4, 8), _l(10, 8, dtype=torch.float16), _t(0, 1, 2, 3)), TypeError, "cast one"),
        ((_l(4, 8), _l(10, 7), _t(0, 1, 2, 3)), ValueError, "hidden has 8 features"),
        ((_l(4, 8), _l(0, 8), _t(0, 1, 2, 3)), ValueError, "the vocabulary is empty"),
        ((_l(4, 8), _l(10, 8), _t(0, 1)), ValueError, "target has 2 entries but there are 4"),
        ((_l(4, 8).t(), _l(10, 4), _t(0, 1, 2, 3)), ValueError, "hidden must be contiguous"),
    ],
    ids=["dtype-mismatch", "features", "empty-vocab", "target-length", "non-contiguous"],
)
def test_linear_bad_input_raises(args, error, match) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(error, match=match):
        linear_cross_entropy(*args)


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_empty_batch_follows_torch() -> None:
    x, t = _l(0, 5), torch.zeros(0, dtype=torch.int64, device=DEVICE)
    assert torch.isnan(cross_entropy(x, t))
    assert cross_entropy(x, t, reduction="sum") == 0
    assert cross_entropy(x, t, reduction="none").shape == (0,)


def test_models() -> None:
    assert bytes_moved(8192, 128256, torch.bfloat16, "fwd") == 8192 * 128256 * 2
    assert bytes_moved(8192, 128256, torch.bfloat16, "fwd+bwd") == 2 * 8192 * 128256 * 2
    assert linear_flops(8, 16, 32) == 3 * 2 * 8 * 16 * 32
    assert linear_flops(8, 16, 32, "fwd") == 2 * 8 * 16 * 32


# --- the checks must reject deliberately wrong kernels --------------------------------------


def test_checker_rejects_softmax_without_max_subtraction() -> None:
    from fixtures.cross_entropy_wrong import ce_grad_no_max

    logits, target = make_inputs(4, 100, torch.float32, DEVICE, scale=200.0)
    _, ref = reference_grad(logits, target, reduction="sum")
    result = run_checked(
        ce_grad_no_max, [logits, target], ref, tolerances=_grad_tol(torch.float32, ref)
    )
    assert not result.ok and result.mismatches > 0, result.message


def test_checker_rejects_lse_over_the_first_tile_only() -> None:
    from fixtures.cross_entropy_wrong import ce_grad_first_tile_only

    logits, target = make_inputs(2, 3000, torch.float32, DEVICE)  # 3 tiles of 1024
    _, ref = reference_grad(logits, target, reduction="sum")
    result = run_checked(
        ce_grad_first_tile_only, [logits, target], ref, tolerances=_grad_tol(torch.float32, ref)
    )
    assert not result.ok and result.mismatches > 0, result.message


def test_checker_rejects_unmasked_gradient_store() -> None:
    from fixtures.cross_entropy_wrong import ce_grad_tail_unmasked

    logits, target = make_inputs(3, 300, torch.float32, DEVICE)  # 300 = 256 + 44: a ragged tile
    _, ref = reference_grad(logits, target, reduction="sum")
    result = run_checked(
        ce_grad_tail_unmasked, [logits, target], ref, tolerances=_grad_tol(torch.float32, ref)
    )
    assert not result.ok
    assert result.wrote_outside, result.message


# --- cuda:1 planning, on the CPU ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("t", "v", "dtype", "cc", "kernel"),
    [
        (8192, 128256, torch.bfloat16, (9, 0), "cross_entropy_kernel1_t256_c4_bf16"),
        (4096, 32000, torch.bfloat16, (9, 0), "cross_entropy_kernel1_t512_c1_bf16"),
        (4096, 128256, torch.float32, (9, 0), "cross_entropy_kernel1_t256_c8_f32"),
        (4, 300, torch.float16, (9, 0), "cross_entropy_kernel1_t128_c1_f16"),
        (4, 300, torch.float16, (8, 0), None),  # no clusters before sm_90: Triton runs it
        (4, 8 * 14464 * 4 + 4, torch.float32, (9, 0), None),  # past 8 full slices
    ],
)
def test_cuda_plan(t: int, v: int, dtype: torch.dtype, cc: tuple, kernel: str | None) -> None:
    p = cuda_kernels.plan(t, v, dtype, cc, 232448, smooth=False)
    assert (p[0] if p else None) == kernel
    if p:
        assert cuda_kernels.plan(t, v, dtype, cc, 232448, smooth=True)[0] == kernel.replace(
            f"_{kernel.rsplit('_', 1)[1]}", f"_ls_{kernel.rsplit('_', 1)[1]}"
        )
        name, sp = cuda_kernels.plan(t, v, dtype, cc, 232448, smooth=False, loss_only=True)
        suffix = kernel.rsplit("_", 1)[1]
        assert name == f"cross_entropy_loss_kernel1_t128_u4_{suffix}"  # one block per row
        assert (sp.cluster, sp.threads) == (1, 128)


def test_every_planned_cuda_kernel_exists() -> None:
    built = compiled(cuda_kernels.CU_FILE, "sm_90").kernel_names
    planned = {
        cuda_kernels.plan(4, v, dtype, (9, 0), 232448, smooth, loss_only)[0]
        for v in (1, 300, 2000, 10000, 14000, 20000, 30000, 40000, 60000, 128256, 200000, 300000)
        for dtype in DTYPES
        for smooth in (False, True)
        for loss_only in (False, True)
        if cuda_kernels.plan(4, v, dtype, (9, 0), 232448, smooth, loss_only)
    }
    assert planned <= built, sorted(planned - built)
    assert planned == built, sorted(built - planned)  # none is unreachable


# --- the upstream-gradient scaling, decided on the device --------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16], ids=lambda d: str(d)[6:])
def test_scale_unless_one(dtype: torch.dtype) -> None:
    """g == 1 leaves the gradient bit for bit as it is; any other g (NaN included) scales it,
    on a 2-D view with a row stride wider than its rows, past the end of which nothing moves."""
    from minikernel.kernels.cross_entropy.triton_kernels import scale_unless_one

    base = torch.randn(7, 5003, device=DEVICE).to(dtype)
    for g, want in ((1.0, base[:, :4999]), (2.5, (base[:, :4999].float() * 2.5).to(dtype))):
        buf = base.clone()
        scale_unless_one(buf[:, :4999], torch.tensor(g, dtype=dtype, device=DEVICE))
        assert torch.equal(buf[:, :4999], want), g
        assert torch.equal(buf[:, 4999:], base[:, 4999:]), "wrote outside the view"
    flat = base.clone()
    scale_unless_one(flat.view(-1)[:-1], torch.tensor(float("nan"), device=DEVICE))
    assert torch.isnan(flat.view(-1)[:-1]).all() and flat.view(-1)[-1] == base.view(-1)[-1]
    with pytest.raises(ValueError, match="unit column stride"):
        scale_unless_one(base.t(), torch.tensor(2.0, device=DEVICE))
    with pytest.raises(ValueError, match="one value"):
        scale_unless_one(base, torch.ones(2, device=DEVICE))


# --- the default implementation -----------------------------------------------------------------


def test_default_impl_off_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    from minikernel.kernels.cross_entropy import default_impl

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert default_impl(torch.zeros(2, 8)) == "triton:1"
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert default_impl(torch.zeros(2, 8)) == "torch"


@pytest.mark.gpu
def test_default_impl_on_the_gpu_runs_and_agrees() -> None:
    """sm_90+ with the bindings: cuda:1 by default; the default call (loss and gradient, and
    the loss alone) matches the reference."""
    from minikernel.cuda import clusters_available
    from minikernel.kernels.cross_entropy import default_impl

    logits, target = make_inputs(5, 32003, torch.bfloat16, "cuda", seed=3, ignore_frac=0.2)
    assert default_impl(logits) == ("cuda:1" if clusters_available(logits.device) else "triton:1")
    x = logits.clone().requires_grad_(True)
    loss = cross_entropy(x, target)
    loss.backward()
    ref_loss, ref_grad = reference_grad(logits, target)
    torch.testing.assert_close(loss.double(), ref_loss, rtol=LOSS_RTOL[torch.bfloat16], atol=1e-3)
    atol, grtol = _grad_tol(torch.bfloat16, ref_grad)[torch.bfloat16]
    torch.testing.assert_close(x.grad.double(), ref_grad, rtol=grtol, atol=atol)
    with torch.no_grad():
        alone = cross_entropy(logits, target)
    torch.testing.assert_close(alone.double(), ref_loss, rtol=LOSS_RTOL[torch.bfloat16], atol=1e-3)
