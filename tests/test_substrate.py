"""The claims of theory page 04 (PyTorch as a substrate), checked with minikernel.substrate.

Each test is one sentence of the page: views share bytes, a copy does not, an element's place
is offset + sum(index * stride), dispatch looks at device and dtype, the autograd graph exists
after the forward pass, and a move to another device is a new storage holding a copy.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from minikernel import substrate as sb


@pytest.fixture
def base() -> torch.Tensor:
    return torch.arange(12, dtype=torch.float32).view(3, 4)


# --- tensor = storage + view -----------------------------------------------------------------


def test_layout_of_a_fresh_tensor(base: torch.Tensor) -> None:
    lay = sb.layout(base)
    assert (lay.shape, lay.stride, lay.offset) == ((3, 4), (4, 1), 0)
    assert lay.storage_nbytes == 12 * 4 and lay.contiguous and lay.device == "cpu"


# every view of the (3, 4) base: its expected (shape, strides, offset, contiguous)
EXPECTED_VIEWS = {
    "base": ((3, 4), (4, 1), 0, True),
    "transpose": ((4, 3), (1, 4), 0, False),
    "row": ((4,), (1,), 4, True),
    "column": ((3,), (4,), 1, False),
    "every_other": ((3, 2), (4, 2), 0, False),
    "broadcast": ((3, 4), (0, 1), 0, False),
    "reshaped": ((2, 6), (6, 1), 0, True),
}


def test_views_share_the_bytes_and_differ_in_metadata(base: torch.Tensor) -> None:
    views = sb.views_of(base)
    for name, (shape, stride, offset, contiguous) in EXPECTED_VIEWS.items():
        lay = sb.layout(views[name])
        assert (lay.shape, lay.stride, lay.offset, lay.contiguous) == (
            shape,
            stride,
            offset,
            contiguous,
        ), name
        assert sb.shares_storage(views[name], base), name
        assert lay.storage_nbytes == 12 * 4, name  # the whole storage, not the view's part
    copy = views["copy"]
    assert not sb.shares_storage(copy, base)
    assert sb.layout(copy).stride == (3, 1) and torch.equal(copy, base.t())


def test_writing_through_a_view_changes_the_base(base: torch.Tensor) -> None:
    views = sb.views_of(base)
    views["column"][2] = -1.0  # element (2, 1) of the base
    assert base[2, 1] == -1.0
    assert views["transpose"][1, 2] == -1.0
    assert views["copy"][1, 2] == 9.0  # the copy kept the old value


@pytest.mark.parametrize("name", sorted(EXPECTED_VIEWS))
def test_element_at_is_offset_plus_index_times_stride(base: torch.Tensor, name: str) -> None:
    t = sb.views_of(base)[name]
    for index in np.ndindex(*t.shape):
        assert sb.element_at(t, index) == t[index], (name, index)


def test_element_at_rejects_bad_indices(base: torch.Tensor) -> None:
    with pytest.raises(IndexError, match="need 2 indices for shape"):
        sb.element_at(base, (1,))
    with pytest.raises(IndexError, match="index 4 out of range for dimension 1 of size 4"):
        sb.element_at(base, (0, 4))


def test_storage_as_tensor_sees_the_whole_storage(base: torch.Tensor) -> None:
    row = base[1]
    flat = sb.storage_as_tensor(row)
    assert flat.numel() == 12 and sb.shares_storage(flat, base)
    assert torch.equal(flat, base.reshape(-1))


def test_views_of_rejects_other_shapes() -> None:
    with pytest.raises(ValueError, match=r"contiguous \(3, 4\) tensor"):
        sb.views_of(torch.zeros(4, 3).t())


def test_flatten_views_when_it_can_and_copies_when_it_must(base: torch.Tensor) -> None:
    flat, copied = sb.flatten(base)
    assert not copied and sb.shares_storage(flat, base)
    flat_t, copied_t = sb.flatten(base.t())
    assert copied_t and torch.equal(flat_t, base.t().contiguous().view(-1))
    with pytest.raises(RuntimeError, match="view"):
        base.t().view(-1)  # what reshape avoided: the transpose's bytes are not in this order


def test_from_numpy_shares_and_tensor_copies() -> None:
    a = np.arange(4.0)
    shared, copied = sb.from_numpy_pair(a)
    a[0] = 42.0
    assert shared[0] == 42.0 and copied[0] == 0.0


# --- dispatch --------------------------------------------------------------------------------


def test_dispatch_keys_end_in_the_backend() -> None:
    keys = sb.dispatch_keys(torch.ones(3))
    assert keys[-1] == "CPU"
    assert "AutogradCPU" in keys
    assert keys.index("AutogradCPU") < keys.index("CPU")  # autograd runs before the kernel
    meta = sb.dispatch_keys(torch.ones(3, device="meta"))
    assert meta[-1] == "Meta"  # another device, another backend key


def test_inference_mode_drops_the_autograd_key() -> None:
    with torch.inference_mode():
        keys = sb.dispatch_keys(torch.ones(3))
    assert "AutogradCPU" not in keys and keys[-1] == "CPU"


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_toy_add_on_cpu(dtype: torch.dtype) -> None:
    a = torch.arange(5, dtype=dtype)
    b = torch.full((5,), 0.5, dtype=dtype)
    got = sb.toy_add(a, b)
    assert got.dtype == dtype and torch.equal(got, a + b)


def test_toy_add_without_a_kernel_names_the_key() -> None:
    a = torch.ones(3, dtype=torch.int32)
    with pytest.raises(NotImplementedError, match=r"no kernel registered for cpu/int32"):
        sb.toy_add(a, a)
    with pytest.raises(ValueError, match="must match in device, dtype and shape"):
        sb.toy_add(torch.ones(3), torch.ones(3, dtype=torch.float64))


def test_register_add_extends_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sb, "_ADD", dict(sb._ADD))  # leave the module's table as it was
    sb.register_add("cpu", torch.int32)(lambda a, b: torch.add(a, b))
    a = torch.arange(3, dtype=torch.int32)
    assert torch.equal(sb.toy_add(a, a), 2 * a)


@pytest.mark.gpu
def test_toy_add_on_cuda_uses_our_kernel() -> None:
    a = torch.randn(1000, device="cuda")
    b = torch.randn(1000, device="cuda")
    assert sb.dispatch_keys(a)[-1] == "CUDA"
    assert torch.equal(sb.toy_add(a, b), a + b)  # fp32 add rounds the same everywhere


# --- autograd --------------------------------------------------------------------------------


def _leaves() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64)
    w = torch.randn(3, 2, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, generator=g, dtype=torch.float64, requires_grad=True)
    return x, w, b


def test_the_graph_exists_after_the_forward_pass() -> None:
    x, w, b = _leaves()
    loss = sb.tiny_forward(x, w, b)
    names = sb.graph_of(loss)
    assert names[:3] == ["SumBackward0", "TanhBackward0", "AddBackward0"]
    assert "MmBackward0" in names
    assert names.count("AccumulateGrad") == 2  # w and b; x does not require grad
    assert w.grad is None  # recorded, not run


def test_backward_walks_the_graph_to_the_right_gradients() -> None:
    x, w, b = _leaves()
    sb.tiny_forward(x, w, b).backward()
    d = 1 - torch.tanh(x @ w.detach() + b.detach()) ** 2  # d tanh(z) / dz
    torch.testing.assert_close(b.grad, d.sum(0))
    torch.testing.assert_close(w.grad, x.t() @ d)


def test_no_grad_records_nothing() -> None:
    x, w, b = _leaves()
    with torch.no_grad():
        loss = sb.tiny_forward(x, w, b)
    assert loss.grad_fn is None and sb.graph_of(loss) == []


# --- moving between devices ------------------------------------------------------------------


def test_to_the_same_device_is_the_same_tensor(base: torch.Tensor) -> None:
    m = sb.move(base, "cpu")
    assert m.same_object and m.shares_storage


@pytest.mark.parametrize(
    ("name", "stride", "nbytes"),
    [
        ("base", (4, 1), 48),
        ("transpose", (1, 4), 48),  # dense: strides kept, a transpose stays a transpose
        ("row", (1,), 16),  # only the row's 4 elements travel, from offset 0
        ("column", (1,), 12),  # compacted: 3 elements, no longer every fourth
        ("broadcast", (4, 1), 48),  # stride 0 cannot survive a copy: 12 real elements
    ],
)
def test_a_copying_move_makes_a_new_compact_storage(
    base: torch.Tensor, name: str, stride: tuple[int, ...], nbytes: int
) -> None:
    t = sb.views_of(base)[name]
    m = sb.move(t, "cpu", copy=True)  # the same rules as a move to another device
    assert not m.same_object and not m.shares_storage
    assert (m.after.stride, m.after.offset, m.after.storage_nbytes) == (stride, 0, nbytes)
    assert m.before == sb.layout(t)  # the source is untouched


def test_two_views_moved_apart_no_longer_share(base: torch.Tensor) -> None:
    a = base.to("cpu", copy=True)
    t = base.t().to("cpu", copy=True)
    a[0, 1] = -1.0
    assert t[1, 0] == 1.0 and base[0, 1] == 1.0


def test_moving_a_leaf_makes_a_new_node_in_the_graph() -> None:
    """w.to(...) on a tensor that requires grad is an operation like any other: the result is
    not a leaf, and the gradient flows back to the original (the classic `.cuda()` trap)."""
    w = torch.ones(3, requires_grad=True)
    moved = w.to(torch.float64)  # on a GPU machine, w.cuda() behaves the same way
    assert not moved.is_leaf and sb.graph_of(moved) == ["ToCopyBackward0", "AccumulateGrad"]
    moved.sum().backward()
    with pytest.warns(UserWarning, match="not a leaf"):  # PyTorch itself warns about the trap
        assert moved.grad is None
    assert torch.equal(w.grad, torch.ones(3))


def test_module_to_keeps_parameter_objects_and_swaps_storage() -> None:
    layer = nn.Linear(3, 2)
    report = sb.move_module(layer, torch.float64)  # a dtype change moves storage on the CPU
    assert report == {"weight": (True, False), "bias": (True, False)}
    assert layer.weight.dtype == torch.float64
    again = sb.move_module(layer, "cpu")  # nothing to change: nothing moves
    assert again == {"weight": (True, True), "bias": (True, True)}


@pytest.mark.gpu
def test_cuda_moves_storage_to_the_gpu(base: torch.Tensor) -> None:
    m = sb.move(base.t(), "cuda")
    assert not m.same_object and not m.shares_storage
    assert m.after.device.startswith("cuda") and m.after.stride == (1, 4)
    layer = nn.Linear(3, 2)
    assert sb.move_module(layer, "cuda") == {"weight": (True, False), "bias": (True, False)}
    assert layer.weight.is_cuda
