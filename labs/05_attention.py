# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
#   minikernel:
#     op: attention
#     page: checkpoint-c3a/attention-tile
# ---

# %% [markdown] lang="en"
# # Lab 05 — attention, FlashAttention style: one kernel against PyTorch's three backends
#
# The last rung of checkpoint C3a's kernel progression: an attention forward that never writes
# the S x S score matrix, computing softmax online while it streams K and V through on-chip
# memory. This notebook checks `minikernel`'s Triton kernel against an fp64 reference, then on a
# GPU times it with the FlashAttention benchmark protocol against
# `torch.nn.functional.scaled_dot_product_attention` forced to each of its fused backends
# (FlashAttention-2, cuDNN, memory-efficient), and writes
# `labs/results/<your-gpu>/attention.json`. `nox -s labs -- attention` runs exactly this file.

# %% [markdown] lang="es"
# # Lab 05 — atención al estilo FlashAttention: un kernel frente a los tres backends de PyTorch
#
# El último peldaño de la progresión de kernels del checkpoint C3a: un forward de atención que
# nunca escribe la matriz de puntuaciones de S x S, porque calcula el softmax en línea mientras
# recorre K y V en la memoria del chip. Este notebook comprueba el kernel de Triton de
# `minikernel` contra una referencia en fp64 y después, si hay GPU, lo cronometra con el
# protocolo de benchmark de FlashAttention frente a
# `torch.nn.functional.scaled_dot_product_attention` forzado a cada uno de sus backends
# fusionados (FlashAttention-2, cuDNN, memory-efficient), y escribe
# `labs/results/<tu-gpu>/attention.json`. `nox -s labs -- attention` ejecuta exactamente este
# fichero.

# %%
import os

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import attention as at
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"

# %% [markdown] lang="en"
# ## 1. Correct first
#
# Sequence lengths chosen to break a tiled kernel: 1 (all tail), 17 (one partial block), 1000
# (many blocks and a partial last one) and, on the GPU, 4097 (one past a power of two); both
# head dims, causal and not. The reference is the textbook softmax(q k^T / sqrt(d)) v in
# float64. P is rounded to 16 bits before the second product (as FlashAttention does), so the
# tolerance is a few units of the dtype's last place. Triton's interpreter cannot do bf16, so
# a CPU checks fp16; the GPU checks bf16, the dtype that is timed.

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# Longitudes de secuencia elegidas para romper un kernel por tiles: 1 (todo es cola), 17 (un
# bloque incompleto), 1000 (muchos bloques y el último incompleto) y, en la GPU, 4097 (uno más
# que una potencia de dos); las dos dimensiones de cabeza, causal y no causal. La referencia es
# la fórmula de libro, softmax(q k^T / sqrt(d)) v, en float64. P se redondea a 16 bits antes del
# segundo producto (como hace FlashAttention), así que la tolerancia es de unas pocas unidades de
# la última cifra del tipo. El intérprete de Triton no sabe hacer bf16: en una CPU se comprueba
# fp16 y en la GPU bf16, el tipo que se cronometra.

# %%
TOLERANCES = {torch.float16: (2e-3, 2e-3), torch.bfloat16: (1.2e-2, 1.2e-2)}
CHECK_DTYPE = torch.bfloat16 if GPU else torch.float16
CHECK_CASES = [(2, 3, 1), (2, 3, 17), (1, 1, 1000)] + ([(1, 2, 4097)] if GPU else [])

for impl in at.VARIANTS:
    for batch, heads, seq in CHECK_CASES:
        for head_dim in at.HEAD_DIMS:
            for causal in (False, True):
                q, k, v = at.make_inputs(batch, heads, seq, head_dim, CHECK_DTYPE, DEVICE, seed=seq)
                run_checked(
                    lambda q_, k_, v_, out, impl=impl, causal=causal: at.attention(
                        q_, k_, v_, causal=causal, out=out, impl=impl
                    ),
                    [q, k, v],
                    at.reference(q, k, v, causal),
                    tolerances=TOLERANCES,
                    name=f"{impl} causal={causal}",
                ).raise_if_failed()
print(f"checked {list(at.VARIANTS)} on {CHECK_CASES} x d {at.HEAD_DIMS} x causal: all correct")

# %% [markdown] lang="en"
# ## 2. Measure
#
# The FlashAttention benchmark protocol: batch x seq = 16K tokens, hidden size 2048 (so 32
# heads of 64 or 16 heads of 128), seq from 512 to 16K, bf16, causal and not. FLOPs from
# 4 * B * H * S^2 * D, half of it when causal (the masked half is skipped, not computed).
# Prediction: at D = 128 a program does about S / 2 flops per byte it reads from HBM, so past
# S ~ 1K the tensor cores, not the memory, set the pace; the ceiling is the bf16 matrix product
# measured in this process, and what keeps an attention kernel below it is the softmax between
# the two products (exp2, max, sum on the CUDA cores) and, for short sequences or causal masks,
# the uneven work per program. A backend that refuses a case (for example, a head dim it does
# not support on this GPU) is skipped and said so.

# %% [markdown] lang="es"
# ## 2. Medir
#
# El protocolo de benchmark de FlashAttention: batch x seq = 16K tokens, tamaño oculto 2048 (es
# decir, 32 cabezas de 64 o 16 de 128), seq de 512 a 16K, bf16, causal y no causal. Los FLOPs
# salen de 4 * B * H * S^2 * D, la mitad en el caso causal (la mitad enmascarada se salta, no se
# calcula). Predicción: con D = 128 un programa hace unos S / 2 flops por cada byte que lee de la
# HBM, así que a partir de S ~ 1K marcan el ritmo los tensor cores, no la memoria; el techo es el
# producto de matrices en bf16 medido en este mismo proceso, y lo que mantiene a un kernel de
# atención por debajo es el softmax entre los dos productos (exp2, máximo y suma en los CUDA
# cores) y, con secuencias cortas o máscara causal, el reparto desigual del trabajo entre
# programas. Si un backend rechaza un caso (por ejemplo, una dimensión de cabeza que no admite en
# esta GPU), se salta y se dice.

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench.lab import Lab

lab = Lab("attention", at.VARIANTS, lab_file="labs/05_attention.py")
lab.extra["protocol"] = {
    "tokens": 16384,
    "hidden": 2048,
    "dtype": "bfloat16",
    "max_rel_err_on": "batch 0, head 0 (an fp64 reference of every head would not fit)",
}

TOKENS, HIDDEN = 16384, 2048
SEQS = [512, 1024, 2048, 4096, 8192, 16384]
DTYPE = torch.bfloat16
# Every case has batch x seq = 16K tokens of hidden size 2048: one seeded draw of q, k and v,
# viewed as (batch, heads, seq, head_dim) per case, serves them all (i.i.d. entries either way).
base = at.make_inputs(1, 1, TOKENS, HIDDEN, DTYPE, "cuda", seed=0)
skipped: list[dict] = []
for head_dim in at.HEAD_DIMS:
    heads = HIDDEN // head_dim
    for causal in (False, True):
        for seq in SEQS:
            batch = TOKENS // seq
            shape = [batch, heads, seq, head_dim]
            qkv = tuple(t.view(*shape) for t in base)
            ref = at.reference(*(t[:1, :1] for t in qkv), causal)[0, 0]
            for impl in [*at.VARIANTS, *at.PEERS]:
                run = at.make_runner(impl, shape, DTYPE, causal=causal, inputs=qkv)
                try:
                    out = run()
                except RuntimeError as exc:  # the forced backend does not take this case
                    reason = str(exc).strip().splitlines()[0][:200]
                    print(f"[attention] skip {impl} {shape} causal={causal}: {reason}")
                    skipped.append({"impl": impl, "shape": shape, "causal": causal, "why": reason})
                    continue
                err = float((out[0, 0].double() - ref).abs().max() / ref.abs().max())
                del out
                lab.measure(
                    impl,
                    run,
                    shape=shape,
                    dtype=DTYPE,
                    flops=at.attention_flops(batch, heads, seq, head_dim, causal),
                    max_rel_err=err,
                    causal=causal,
                )
                del run
            del ref, qkv
            torch.cuda.empty_cache()
lab.extra["skipped"] = skipped

# %%
lab.save()
