"""PyTorch as a substrate: small runnable answers to "what is a tensor made of?".

Theory page 04 (docs/phase-24/theory/04-pytorch-as-substrate.md) includes these functions by
snippet section; tests/test_substrate.py checks every claim the page makes with them. Each
function answers one question:

- :func:`layout`, :func:`element_at`: a tensor is a storage (bytes) plus a view of it (shape,
  strides, offset), and an element's address is plain arithmetic on the view.
- :func:`views_of`, :func:`shares_storage`, :func:`flatten`, :func:`from_numpy_pair`: which
  operations make a new view of the same bytes and which make new bytes.
- :func:`dispatch_keys`, :func:`toy_add`: a call is routed by the tensor's device and dtype.
- :func:`graph_of`, :func:`tiny_forward`: autograd records a graph while the forward runs.
- :func:`move`, :func:`move_module`: what ``.to(device)`` / ``.cuda()`` does to the storage of
  a tensor and to the parameters of a module.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

__all__ = [
    "Layout",
    "Move",
    "dispatch_keys",
    "element_at",
    "flatten",
    "from_numpy_pair",
    "graph_of",
    "layout",
    "move",
    "move_module",
    "register_add",
    "shares_storage",
    "storage_as_tensor",
    "tiny_forward",
    "toy_add",
    "views_of",
]


# --8<-- [start:storage]
@dataclass(frozen=True)
class Layout:
    """Everything that says where a tensor's elements are. Strides and offset count elements."""

    shape: tuple[int, ...]
    stride: tuple[int, ...]  # elements to skip to move one step along each dimension
    offset: int  # where element (0, 0, ...) sits in the storage
    storage_ptr: int  # address of the storage's first byte
    storage_nbytes: int  # size of the whole storage, which may hold more than this tensor
    device: str
    dtype: torch.dtype
    contiguous: bool


def layout(t: torch.Tensor) -> Layout:
    s = t.untyped_storage()
    return Layout(
        tuple(t.shape),
        t.stride(),
        t.storage_offset(),
        s.data_ptr(),
        s.nbytes(),
        str(t.device),
        t.dtype,
        t.is_contiguous(),
    )


def storage_as_tensor(t: torch.Tensor) -> torch.Tensor:
    """The whole storage behind ``t`` as a flat tensor of ``t``'s dtype, sharing its bytes."""
    t = t.detach()
    n = t.untyped_storage().nbytes() // t.element_size()
    flat = torch.empty(0, dtype=t.dtype, device=t.device)
    return flat.set_(t.untyped_storage(), 0, (n,), (1,))


def element_at(t: torch.Tensor, index: Sequence[int]) -> torch.Tensor:
    """``t[index]`` the long way: offset + sum(index_k * stride_k) into the flat storage.

    This sum is all a kernel does with a strided tensor; ``t[index]`` does the same in C++.
    """
    if len(index) != t.dim():
        raise IndexError(f"need {t.dim()} indices for shape {tuple(t.shape)}, got {len(index)}")
    for k, (i, n) in enumerate(zip(index, t.shape, strict=True)):
        if not 0 <= i < n:
            raise IndexError(f"index {i} out of range for dimension {k} of size {n}")
    position = t.storage_offset() + sum(i * s for i, s in zip(index, t.stride(), strict=True))
    return storage_as_tensor(t)[position]


# --8<-- [end:storage]


# --8<-- [start:views]
def shares_storage(a: torch.Tensor, b: torch.Tensor) -> bool:
    """True when a and b are views of the same bytes (writing through one changes the other)."""
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


def views_of(base: torch.Tensor) -> dict[str, torch.Tensor]:
    """Ways to look at the bytes of a (3, 4) tensor, and one way to get new bytes."""
    if tuple(base.shape) != (3, 4) or not base.is_contiguous():
        raise ValueError(f"views_of expects a contiguous (3, 4) tensor, got {layout(base)}")
    return {
        "base": base,  # strides (4, 1): row by row
        "transpose": base.t(),  # (4, 3), strides (1, 4): the same bytes read column by column
        "row": base[1],  # offset 4: starts at the second row
        "column": base[:, 1],  # stride 4: every fourth element, from offset 1
        "every_other": base[:, ::2],  # strides (4, 2)
        "broadcast": base[0].expand(3, 4),  # stride 0: one row seen three times, no copy
        "reshaped": base.view(2, 6),  # a new shape for contiguous bytes: still a view
        "copy": base.t().contiguous(),  # new storage, the transpose laid out row by row
    }


def flatten(t: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """``t.reshape(-1)`` and whether it had to copy: it views when the strides allow, else copies.

    ``t.view(-1)`` would raise instead of copying when the strides do not allow a view.
    """
    flat = t.reshape(-1)
    return flat, not shares_storage(flat, t)


def from_numpy_pair(a: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """(``torch.from_numpy(a)``, ``torch.tensor(a)``): the first shares a's buffer, the second
    copies it. MiniGPT's loader relies on the difference (it copies into its parameters)."""
    return torch.from_numpy(a), torch.tensor(a)


# --8<-- [end:views]


# --8<-- [start:dispatch]
def dispatch_keys(t: torch.Tensor) -> list[str]:
    """The dispatcher's keys for ``t``, in the order a call meets them: wrappers such as
    Autocast and Autograd first, the backend kernel (CPU, CUDA, ...) last.

    Uses ``torch._C._dispatch_keys``, a private function, to show what is normally hidden.
    """
    text = str(torch._C._dispatch_keys(t))  # "DispatchKeySet(CPU, ..., AutocastCPU)"
    inner = text[text.index("(") + 1 : text.rindex(")")]
    keys = [k.strip() for k in inner.split(",") if k.strip()]
    return keys[::-1]  # printed lowest priority first


Kernel = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
_ADD: dict[tuple[str, torch.dtype], Kernel] = {}


def register_add(device_type: str, *dtypes: torch.dtype) -> Callable[[Kernel], Kernel]:
    """Register a kernel for ``toy_add`` under (device type, dtype), as PyTorch registers its
    kernels under dispatch keys and then switches on the dtype inside them."""

    def decorate(kernel: Kernel) -> Kernel:
        for dtype in dtypes:
            _ADD[(device_type, dtype)] = kernel
        return kernel

    return decorate


@register_add("cpu", torch.float32, torch.float64)
def _add_numpy(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.from_numpy(a.numpy() + b.numpy())


@register_add("cuda", torch.float32, torch.float16, torch.bfloat16)
def _add_cuda(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    from minikernel.kernels.vector_add import vector_add

    return vector_add(a.contiguous(), b.contiguous(), impl="cuda:3")


def toy_add(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a + b through a two-key dispatch table: look up (device, dtype), call what is there."""
    if a.device != b.device or a.dtype != b.dtype or a.shape != b.shape:
        raise ValueError(
            f"toy_add: a and b must match in device, dtype and shape; got "
            f"{a.device}/{a.dtype}/{tuple(a.shape)} and {b.device}/{b.dtype}/{tuple(b.shape)}"
        )
    key = (a.device.type, a.dtype)
    kernel = _ADD.get(key)
    if kernel is None:
        have = sorted(f"{d}/{str(t).removeprefix('torch.')}" for d, t in _ADD)
        raise NotImplementedError(
            f"toy_add: no kernel registered for {key[0]}/{str(key[1]).removeprefix('torch.')}; "
            f"registered: {have}"
        )
    return kernel(a, b)


# --8<-- [end:dispatch]


# --8<-- [start:autograd]
def tiny_forward(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """One layer and a sum: loss = sum(tanh(x @ w + b)). Four operations, four graph nodes."""
    return torch.tanh(x @ w + b).sum()


def graph_of(out: torch.Tensor) -> list[str]:
    """The backward graph recorded while ``out`` was computed, node names depth first.

    Each operation that saw a tensor requiring grad left a node (``grad_fn``) pointing at the
    nodes of its inputs; leaves that require grad end in ``AccumulateGrad``, which is where
    ``.grad`` gets written. Nothing here has run backward yet: the graph exists already.
    """
    names: list[str] = []
    seen: set[int] = set()

    def visit(node: object) -> None:
        if node is None or id(node) in seen:
            return
        seen.add(id(node))
        # AccumulateGrad reports its C++ name, "torch::autograd::AccumulateGrad": keep the last part
        names.append(node.name().rsplit("::", 1)[-1])  # type: ignore[attr-defined]
        for child, _ in node.next_functions:  # type: ignore[attr-defined]
            visit(child)

    visit(out.grad_fn)
    return names


# --8<-- [end:autograd]


# --8<-- [start:move]
@dataclass(frozen=True)
class Move:
    """What ``t.to(...)`` returned, compared with ``t``."""

    same_object: bool  # .to() returns t itself when nothing needs to change
    shares_storage: bool
    before: Layout
    after: Layout


def move(t: torch.Tensor, device: str | torch.device, *, copy: bool = False) -> Move:
    """``t.to(device)``, described. A move to another device allocates a new storage there and
    copies the tensor's elements into it; the old storage is untouched. A dense tensor keeps
    its strides (a transpose stays a transpose); a view that skips elements (a column, a
    slice with a step) is compacted: only its own elements travel, from offset 0."""
    moved = t.to(device, copy=copy)
    return Move(moved is t, shares_storage(moved, t), layout(t), layout(moved))


def move_module(module: nn.Module, *args: object, **kwargs: object) -> dict[str, tuple[bool, bool]]:
    """``module.to(*args)`` (``.cuda()`` is ``.to("cuda")``), and for each parameter:
    (still the same Parameter object?, still the same storage?).

    Unlike ``Tensor.to``, ``Module.to`` works in place: each parameter object stays (so
    references to it stay valid) and gets a new storage behind it.
    """
    before = {name: (p, p.untyped_storage().data_ptr()) for name, p in module.named_parameters()}
    module.to(*args, **kwargs)
    return {
        name: (p is before[name][0], p.untyped_storage().data_ptr() == before[name][1])
        for name, p in module.named_parameters()
    }


# --8<-- [end:move]
