"""Matrix product with a fused epilogue in Triton: C = act(A @ B + bias).

A is M x K, B is K x N, C is M x N, row-major. Each program computes one BLOCK_M x BLOCK_N tile
of C, walking K in steps of BLOCK_K; tl.dot runs on the tensor cores (wgmma on Hopper) with fp32
accumulators. The bias add and the activation happen on those accumulators before the one store,
so they cost no extra trip through memory.

FLOP model: 2 * M * N * K. fp16 / bf16 inputs are multiplied exactly and summed in fp32.
fp32 inputs are multiplied in TF32 (inputs rounded to 10 mantissa bits), Triton's default and
what torch.mm does with allow_tf32: about 3 significant digits per product, in exchange for
the tensor cores (an fp32 FMA path would be ~15x slower on an H100).

  matmul_kernel1  pointer arithmetic and masks; tiles in grouped order for L2 reuse
  matmul_kernel2  the same tiles, loaded and stored by the TMA engine through tensor
                  descriptors: no address arithmetic or masks in the loop; the edges come free
                  (zero fill on loads, clipping on stores). Needs 16-byte aligned rows.
  matmul_kernel3  kernel2, persistent: one program per SM walks over tiles (stride = the SM
                  count), and the compiler flattens the tile and K loops into one pipelined
                  loop, so the loads of the next tile overlap the epilogue of this one.
"""

from __future__ import annotations

import json
import os

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
ACTIVATIONS = (None, "relu", "gelu")


# --8<-- [start:epilogue]
@triton.jit
def _epilogue(acc, bias_ptr, offs_n, N, HAS_BIAS: tl.constexpr, ACTIVATION: tl.constexpr):
    """bias + activation on the fp32 accumulators, while they are still in registers."""
    if HAS_BIAS:
        bias = tl.load(bias_ptr + offs_n, mask=offs_n < N, other=0.0)
        acc = acc + bias.to(tl.float32)[None, :]
    if ACTIVATION == "relu":
        acc = tl.maximum(acc, 0.0)
    elif ACTIVATION == "gelu":  # exact GELU, x * Phi(x), as torch.nn.functional.gelu
        acc = 0.5 * acc * (1.0 + tl.math.erf(acc * 0.7071067811865476))
    return acc


@triton.jit
def _tile_coords(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """Grouped ordering: consecutive programs cover GROUP_M rows of tiles, column by column,
    so the A rows and B columns they read are reused from L2 instead of DRAM."""
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)  # the last group may be short
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    return pid_m, pid_n


# --8<-- [end:epilogue]


# --8<-- [start:kernel1]
# M is never a stride, so knowing it is a multiple of 16 helps nothing: one compile for every M.
@triton.jit(do_not_specialize=["M"])
def matmul_kernel1(
    a_ptr,
    b_ptr,
    c_ptr,
    bias_ptr,
    M,
    N,
    K,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    # Rows past M and columns past N wrap around (% M, % N): they read real data, their results
    # are never stored, and the loads need no M or N mask. Only the K tail is masked, with
    # zeros, which add nothing to the sums.
    rows = (offs_m % M).to(tl.int64)
    cols = offs_n % N
    a_ptrs = a_ptr + rows[:, None] * K + offs_k[None, :]
    b_ptrs = b_ptr + offs_k[:, None].to(tl.int64) * N + cols[None, :]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k0, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k0, other=0.0)
        acc = tl.dot(a, b, acc, input_precision="tf32")  # fp16/bf16 ignore input_precision
        a_ptrs += BLOCK_K
        b_ptrs += BLOCK_K * N
    acc = _epilogue(acc, bias_ptr, offs_n, N, HAS_BIAS, ACTIVATION)
    c_ptrs = c_ptr + offs_m[:, None].to(tl.int64) * N + offs_n[None, :]
    tl.store(
        c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(offs_m[:, None] < M) & (offs_n[None, :] < N)
    )


# --8<-- [end:kernel1]


# --8<-- [start:kernel2]
# The descriptors carry the shapes and strides: no need to recompile per divisibility of M, N, K.
@triton.jit(do_not_specialize=["M", "N", "K"])
def matmul_kernel2(
    a_desc,
    b_desc,
    c_desc,
    bias_ptr,
    M,
    N,
    K,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid_m, pid_n = _tile_coords(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        # One TMA copy per tile, completed on a barrier; out-of-range rows/columns read as 0.
        a = a_desc.load([pid_m * BLOCK_M, k0])
        b = b_desc.load([k0, pid_n * BLOCK_N])
        acc = tl.dot(a, b, acc, input_precision="tf32")
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = _epilogue(acc, bias_ptr, offs_n, N, HAS_BIAS, ACTIVATION)
    c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))  # clipped at M, N


# --8<-- [end:kernel2]


# --8<-- [start:kernel3]
@triton.jit(do_not_specialize=["M", "N", "K"])
def matmul_kernel3(
    a_desc,
    b_desc,
    c_desc,
    bias_ptr,
    M,
    N,
    K,
    num_programs,
    HAS_BIAS: tl.constexpr,
    ACTIVATION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    num_pid_m = tl.cdiv(M, BLOCK_M)
    num_pid_n = tl.cdiv(N, BLOCK_N)
    num_tiles = num_pid_m * num_pid_n
    k_tiles = tl.cdiv(K, BLOCK_K)
    per_group = GROUP_M * num_pid_n
    # flatten=True: tile loop and K loop become one software-pipelined loop.
    for tile in tl.range(tl.program_id(0), num_tiles, num_programs, flatten=True):
        first_m = (tile // per_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile % per_group) % group_m
        pid_n = (tile % per_group) // group_m
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BLOCK_M, ki * BLOCK_K])
            b = b_desc.load([ki * BLOCK_K, pid_n * BLOCK_N])
            acc = tl.dot(a, b, acc, input_precision="tf32")
        offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        acc = _epilogue(acc, bias_ptr, offs_n, N, HAS_BIAS, ACTIVATION)
        c_desc.store([pid_m * BLOCK_M, pid_n * BLOCK_N], acc.to(c_desc.dtype))


# --8<-- [end:kernel3]


# --8<-- [start:configs]
def _cfg(bm: int, bn: int, bk: int, stages: int, warps: int) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8},
        num_stages=stages,
        num_warps=warps,
        pre_hook=_set_block_shapes,
    )


def _set_block_shapes(nargs: dict) -> None:
    """kernel2: the descriptors' box sizes follow the config being tried (kernel1 has none)."""
    if "a_desc" in nargs:
        bm, bn, bk = nargs["BLOCK_M"], nargs["BLOCK_N"], nargs["BLOCK_K"]
        nargs["a_desc"].block_shape = [bm, bk]
        nargs["b_desc"].block_shape = [bk, bn]
        nargs["c_desc"].block_shape = [bm, bn]


# Hopper lists, short on purpose (each config is one more compile in the lab). Large products:
# 128 x 256 tiles over 8 warps (two warpgroups, each 64 x 256 on wgmma: 128 fp32 accumulators
# per thread), 64-deep K steps, 3-4 stages of 48 KB in shared memory. Small or skinny products
# (M = 128 gives only N / BLOCK_N tiles): smaller tiles, so that more of the 132 SMs get one.
CONFIGS_16BIT = [
    _cfg(128, 256, 64, 3, 8),
    _cfg(128, 256, 64, 4, 8),
    _cfg(128, 128, 64, 4, 8),
    _cfg(64, 128, 64, 4, 4),
]
# fp32 operands take twice the shared memory per element: half the K step.
CONFIGS_32BIT = [
    _cfg(128, 128, 32, 3, 8),
    _cfg(64, 128, 32, 4, 4),
]
INTERPRET_CONFIGS = [_cfg(32, 32, 32, 1, 4)]  # one config: the interpreter cannot time


def _configs_for_dtype(configs: list, named_args: dict, **kwargs: object) -> list:
    if INTERPRET:
        return configs
    first = named_args.get("a_ptr", named_args.get("a_desc"))
    dtype = first.base.dtype if isinstance(first, TensorDescriptor) else first.dtype
    configs = CONFIGS_32BIT if dtype == torch.float32 else CONFIGS_16BIT
    if "num_programs" in named_args:
        # kernel3 keeps a C tile in shared memory for its TMA store beside the K pipeline:
        # 4 stages of 128 x 256 tiles would need 257 KB, more than an SM has.
        configs = [c for c in configs if not (c.kwargs["BLOCK_N"] == 256 and c.num_stages == 4)]
    return pinned(configs)


def _tuned(kernel: triton.JITFunction) -> triton.runtime.Autotuner:
    return triton.autotune(
        configs=INTERPRET_CONFIGS if INTERPRET else CONFIGS_16BIT + CONFIGS_32BIT,
        key=["M", "N", "K", "HAS_BIAS", "ACTIVATION"],
        prune_configs_by={"early_config_prune": _configs_for_dtype},
        do_bench=lambda fn, quantiles: triton.testing.do_bench(
            fn, warmup=5, rep=20, quantiles=quantiles
        ),
    )(kernel)


matmul_kernel1_tuned = _tuned(matmul_kernel1)
matmul_kernel2_tuned = _tuned(matmul_kernel2)
matmul_kernel3_tuned = _tuned(matmul_kernel3)
# --8<-- [end:configs]

PIN_ENV = "MINIKERNEL_MATMUL_CONFIG"
"""A JSON config, {"BLOCK_M": 128, "BLOCK_N": 256, "BLOCK_K": 64, "num_stages": 3,
"num_warps": 8}: the autotuners keep only it. The lab sets it for the process ncu profiles, so
that the excerpt is of the config the timing chose: tuning again in that process can pick another
of two configs that time within a few per cent of each other, and did on the H200."""


def config_of(config: triton.Config) -> dict[str, int]:
    """A config as the results file records it: its tile, pipeline depth and warps."""
    tile = {key: config.kwargs[key] for key in ("BLOCK_M", "BLOCK_N", "BLOCK_K")}
    return {**tile, "num_stages": config.num_stages, "num_warps": config.num_warps}


def pinned(configs: list[triton.Config]) -> list[triton.Config]:
    """``configs``, or only the one PIN_ENV names when it is set. A pin that is none of them
    (a typo, or a config of another dtype or rung) is an error that lists the ones there are."""
    text = os.environ.get(PIN_ENV)
    if not text:
        return configs
    try:
        want = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{PIN_ENV} must be a JSON object, got {text!r}") from exc
    keep = [c for c in configs if config_of(c) == want]
    if not keep:
        there = [config_of(c) for c in configs]
        raise ValueError(f"{PIN_ENV}={text} is none of this launch's configs: {there}")
    return keep


def last_config(rung: int) -> dict[str, int] | None:
    """The config rung ``rung``'s autotuner ran its last launch with, or None before the first
    launch. The lab records it next to each Triton time."""
    tuned = {1: matmul_kernel1_tuned, 2: matmul_kernel2_tuned, 3: matmul_kernel3_tuned}[rung]
    config = getattr(tuned, "best_config", None)
    return None if config is None else config_of(config)


def _grid(m: int, n: int) -> object:
    return lambda meta: (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)


def launch_kernel1(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None,
) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    matmul_kernel1_tuned[_grid(m, n)](
        a,
        b,
        c,
        c if bias is None else bias,  # any pointer: HAS_BIAS=False never reads it
        m,
        n,
        k,
        HAS_BIAS=bias is not None,
        ACTIVATION=activation,
    )
    return c


def tma_compatible(*tensors: torch.Tensor) -> bool:
    """TMA needs a 16-byte aligned base and rows that start on 16-byte boundaries."""
    return all(
        t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0 for t in tensors
    )


def _desc(t: torch.Tensor) -> TensorDescriptor:
    return TensorDescriptor(t, list(t.shape), list(t.stride()), [16, 16])  # box set by pre_hook


def launch_kernel2(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None,
) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    matmul_kernel2_tuned[_grid(m, n)](
        _desc(a),
        _desc(b),
        _desc(c),
        c if bias is None else bias,
        m,
        n,
        k,
        HAS_BIAS=bias is not None,
        ACTIVATION=activation,
    )
    return c


def _num_sms(t: torch.Tensor) -> int:
    if not t.is_cuda:
        return 4  # the interpreter: a few programs, each walking several tiles
    return torch.cuda.get_device_properties(t.device).multi_processor_count


def launch_kernel3(
    a: torch.Tensor,
    b: torch.Tensor,
    c: torch.Tensor,
    bias: torch.Tensor | None,
    activation: str | None,
) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    sms = _num_sms(a)

    def grid(meta: dict) -> tuple[int]:
        tiles = triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"])
        return (min(sms, tiles),)

    matmul_kernel3_tuned[grid](
        _desc(a),
        _desc(b),
        _desc(c),
        c if bias is None else bias,
        m,
        n,
        k,
        sms,
        HAS_BIAS=bias is not None,
        ACTIVATION=activation,
    )
    return c
