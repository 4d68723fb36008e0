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
#     op: cross_entropy
#     page: checkpoint-c3a/fused-cross-entropy
# ---

# %% [markdown] lang="en"
# # Lab 03 — fused cross-entropy, and the linear layer folded in
#
# The last layer of a language model turns each token's hidden state into logits over the
# whole vocabulary (128256 classes for Llama 3), and cross-entropy turns the logits into a loss.
# At 8192 tokens those logits alone are 2 GB in bf16. PyTorch's cross-entropy writes a
# log-softmax of the same size, and its backward pass writes two more. This notebook checks
# `minikernel`'s fused kernel, which computes the loss and its gradient in one pass over the
# logits, and the fused linear + cross-entropy, which never holds all the logits at once; then,
# on a GPU, times both against PyTorch (bf16 logits, and the usual fp32 upcast),
# `torch.compile`, Liger-Kernel and QuACK (where installed), records each case's peak memory,
# profiles two cases with Nsight Compute and writes `labs/results/<your-gpu>/cross_entropy.json`.

# %% [markdown] lang="es"
# # Lab 03 — cross-entropy fusionada, y la capa lineal dentro
#
# La última capa de un modelo de lenguaje convierte el estado oculto de cada token en logits
# sobre todo el vocabulario (128256 clases en Llama 3), y la cross-entropy convierte los logits
# en una pérdida. Con 8192 tokens, solo los logits ocupan 2 GB en bf16. La cross-entropy de
# PyTorch escribe un log-softmax del mismo tamaño, y su backward escribe dos más. Este notebook
# comprueba el kernel fusionado de `minikernel`, que calcula la pérdida y su gradiente en una
# sola pasada sobre los logits, y la lineal + cross-entropy fusionada, que nunca tiene todos los
# logits a la vez; después, si hay GPU, cronometra ambos frente a PyTorch (logits en bf16, y con
# la habitual conversión a fp32), `torch.compile`, Liger-Kernel y QuACK (si están instalados),
# anota el pico de memoria de cada caso, perfila dos casos con Nsight Compute y escribe
# `labs/results/<tu-gpu>/cross_entropy.json`.

# %%
import gc
import os
from collections.abc import Callable

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import cross_entropy as ce
from minikernel.kernels._peers import PeerUnavailable
from minikernel.kernels.cross_entropy.triton_kernels import launch
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"

# %% [markdown] lang="en"
# ## 1. Correct first
#
# The kernel's gradient through `run_checked` (no write past the end, nothing left unwritten)
# and its per-row loss against fp64, on vocabularies chosen to break it: a single class, 127, and
# two long ones with ragged last tiles (32003 and 2^17 + 7). Then the autograd function with
# every reduction, ignored targets and label smoothing, and linear + cross-entropy over several
# chunks of tokens, both against autograd of the fp64 reference.

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# El gradiente del kernel pasa por `run_checked` (ninguna escritura más allá del final, nada sin
# escribir) y su pérdida por fila se compara con fp64, con vocabularios elegidos para romperlo:
# una sola clase, 127, y dos largos con el último tile incompleto (32003 y 2^17 + 7). Después la
# función con autograd con cada reducción, objetivos ignorados y label smoothing, y la lineal +
# cross-entropy en varios trozos de tokens, ambas frente al autograd de la referencia fp64.

# %%
CHECK_DTYPES = [torch.float32, torch.bfloat16] if GPU else [torch.float32, torch.float16]
GRAD_RTOL = {torch.float32: 1e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
for dtype in CHECK_DTYPES:
    rtol = GRAD_RTOL[dtype]
    for t, v in [(3, 1), (4, 127), (2, 32003), (2, 131079)]:
        logits, target = ce.make_inputs(t, v, dtype, DEVICE, seed=v)
        loss = torch.empty(t, dtype=torch.float32, device=DEVICE)
        stats = torch.empty((t, 2), dtype=torch.float32, device=DEVICE)
        ref_loss, ref_grad = ce.reference_grad(logits, target, reduction="sum")
        atol = max(1e-7, rtol * float(ref_grad.abs().max()) * 1e-2)
        run_checked(
            lambda x, tg, out, loss=loss, stats=stats: launch(x, tg, loss, stats, dx=out),
            [logits, target],
            ref_grad,
            tolerances={dtype: (atol, rtol)},
            name=f"triton:1 {t}x{v}",
        ).raise_if_failed()
        ref_rows = ce.reference(logits, target, reduction="none")
        assert torch.allclose(loss.double(), ref_rows, rtol=rtol, atol=rtol), (dtype, t, v)
    for reduction in ce.REDUCTIONS:
        logits, target = ce.make_inputs(7, 3000, dtype, DEVICE, seed=1, ignore_frac=0.3)
        kw = {"reduction": reduction, "label_smoothing": 0.1}
        x = logits.clone().requires_grad_(True)
        out = ce.cross_entropy(x, target, **kw)
        out.backward(torch.ones_like(out))
        ref_loss, ref_grad = ce.reference_grad(logits, target, **kw)
        assert torch.allclose(out.double(), ref_loss, rtol=rtol, atol=rtol), (dtype, reduction)
        assert torch.allclose(x.grad.double(), ref_grad, rtol=rtol, atol=rtol * 1e-2)
        hidden, weight, target = ce.make_linear_inputs(40, 32, 500, dtype, DEVICE, seed=2)
        hw = [hidden.clone().requires_grad_(True), weight.clone().requires_grad_(True)]
        out = ce.linear_cross_entropy(*hw, target, chunk_size=16, **kw)
        out.backward(torch.ones_like(out))
        ref = ce.reference_linear(hidden, weight, target, **kw)
        tol = {torch.float32: 1e-4, torch.float16: 2e-2, torch.bfloat16: 8e-2}[dtype]
        assert torch.allclose(out.double(), ref[0], rtol=tol, atol=tol), (dtype, reduction)
        for got, want in zip(hw, ref[1:], strict=True):
            scale = float(want.abs().max())
            assert torch.allclose(got.grad.double(), want, rtol=tol, atol=tol * scale)
names = [str(d).removeprefix("torch.") for d in CHECK_DTYPES]
print(f"checked the fused kernel, cross_entropy and linear_cross_entropy in {names}: all correct")

# %% [markdown] lang="en"
# ## 2. Predict
#
# Loss and gradient need the logits read once and the gradient written once: 2·T·V elements,
# and no memory beyond the logits and their gradient. PyTorch's eager cross-entropy runs a chain
# of kernels, each reading or writing a T·V tensor; with the fp32 upcast that many models do,
# the chain moves fp32 copies. The cell below adds up the chain, kernel by kernel, for the
# largest case.

# %% [markdown] lang="es"
# ## 2. Predecir
#
# Pérdida y gradiente necesitan leer los logits una vez y escribir el gradiente una vez:
# 2·T·V elementos, y ninguna memoria aparte de los logits y su gradiente. La cross-entropy eager
# de PyTorch ejecuta una cadena de kernels, y cada uno lee o escribe un tensor de T·V; con la
# conversión a fp32 que hacen muchos modelos, la cadena mueve copias en fp32. La celda siguiente
# suma la cadena, kernel a kernel, para el caso más grande.

# %%
T_BIG, V_BIG = 8192, 128256
for recipe, steps in ce.TORCH_STEPS.items():
    print(recipe)
    for pass_, step, read, write in steps:
        print(f"  {pass_:<4} {step:<40} reads {read or '-':<2} writes {write or '-'}")
fused = ce.bytes_moved(T_BIG, V_BIG, torch.bfloat16, "fwd+bwd")
print(f"fused, bf16 {T_BIG}x{V_BIG}, fwd+bwd: {fused / 1e9:.1f} GB")
for recipe in ce.TORCH_STEPS:
    chain = ce.torch_chain_bytes(T_BIG, V_BIG, torch.bfloat16, recipe, "fwd+bwd")
    print(f"{recipe}: {chain / 1e9:.1f} GB ({chain / fused:.1f}x)")

# %% [markdown] lang="en"
# ## 3. Measure cross-entropy on logits
#
# bf16 logits of 4096 x 32000, 8192 x 128256, 16384 x 131072 and 32768 x 32768, and one fp32
# case. "fwd" is the loss alone (the logits do not need a gradient); "fwd+bwd" is what a
# training step needs, the loss and the gradient of the logits. Throughput is reported against
# the byte model (one read of the logits, plus one write of the gradient). Each record also
# keeps the peak memory of one call (`peak_mem_bytes`, the logits included) and the memory
# already allocated before it (`base_mem_bytes`: the inputs). `torch.compile` is built anew
# for each shape (specialised to it); at seconds per build, it is timed on the bf16 cases.

# %% [markdown] lang="es"
# ## 3. Medir la cross-entropy sobre logits
#
# Logits en bf16 de 4096 x 32000, 8192 x 128256, 16384 x 131072 y 32768 x 32768, y un caso en
# fp32. "fwd" es solo la pérdida (los logits no necesitan gradiente); "fwd+bwd" es lo que
# necesita un paso de entrenamiento, la pérdida y el gradiente de los logits. El throughput se
# da frente al modelo de bytes (una lectura de los logits, más una escritura del gradiente).
# Cada registro guarda también el pico de memoria de una llamada (`peak_mem_bytes`, logits
# incluidos) y la memoria ya ocupada antes de ella (`base_mem_bytes`: las entradas).
# `torch.compile` se construye de nuevo para cada forma (especializado en ella); como cada
# construcción cuesta segundos, se mide en los casos bf16.

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench.lab import Lab

lab = Lab("cross_entropy", ce.VARIANTS, lab_file="labs/03_cross_entropy.py")

CE_CASES = [
    (torch.bfloat16, 4096, 32000),
    (torch.bfloat16, 8192, 128256),
    (torch.bfloat16, 16384, 131072),
    (torch.bfloat16, 32768, 32768),
    (torch.float32, 4096, 128256),
]
CE_IMPLS = ["cuda:1", "triton:1", "torch:eager", "torch:fp32", "torch:compile", "liger", "quack"]
CHECK_ROWS = 64


def _free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def peak_memory(run: Callable[[], object]) -> tuple[int, int]:
    """(peak bytes during one call, bytes allocated before it), after a warm-up call."""
    run()
    torch.cuda.synchronize()
    _free()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    out = run()
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del out
    return peak, base


def ce_reference(logits: torch.Tensor, target: torch.Tensor, pass_: str) -> torch.Tensor:
    """fp64 reference: the mean loss (summed chunk by chunk, to bound memory), or the gradient
    of the first CHECK_ROWS rows."""
    t = logits.shape[0]
    if pass_ == "fwd+bwd":
        _, grad = ce.reference_grad(logits[:CHECK_ROWS], target[:CHECK_ROWS], reduction="sum")
        return grad / t  # the mean over t rows (no target is ignored here)
    total = sum(
        float(ce.reference(logits[i : i + 1024], target[i : i + 1024], reduction="sum"))
        for i in range(0, t, 1024)
    )
    return torch.tensor(total / t, dtype=torch.float64)


def measure(
    impl: str,
    shape: list[int],
    dtype: torch.dtype,
    pass_: str,
    ref: Callable[[tuple[torch.Tensor, ...]], torch.Tensor],
    **fields: object,
) -> None:
    """Check one case against ``ref(inputs)``, then time it and record its peak memory."""
    try:
        run = ce.make_runner(impl, shape, dtype, pass_)
    except PeerUnavailable as exc:
        print(f"[cross_entropy] {impl} {pass_} {shape}: skipped ({exc})")
        return
    want = ref(run.inputs)  # before the first call: Liger writes its gradient over its inputs
    try:
        out = run()
    except Exception as exc:  # a peer refusing the case (QuACK, Liger: shapes they do not take)
        print(f"[cross_entropy] {impl} {pass_} {shape}: skipped ({type(exc).__name__}: {exc})")
        return
    got = (out[0][: want.shape[0]] if pass_ == "fwd+bwd" else out).double()
    err = float((got - want.to(got.device)).abs().max() / want.abs().max())
    del out
    peak, base = peak_memory(run)
    lab.measure(
        impl,
        run,
        shape=shape,
        dtype=dtype,
        pass_=pass_,
        max_rel_err=err,
        graph=False,
        peak_mem_bytes=peak,
        base_mem_bytes=base,
        **fields,
    )
    del run
    _free()


for dtype, t, v in CE_CASES:
    for pass_ in ("fwd", "fwd+bwd"):
        for impl in CE_IMPLS:
            if impl == "torch:fp32" and dtype == torch.float32:
                continue  # the upcast of fp32 logits is eager itself
            if impl == "torch:compile" and dtype == torch.float32:
                continue  # rebuilt per shape, seconds each: the bf16 cases only
            measure(
                impl,
                [t, v],
                dtype,
                pass_,
                case="ce",
                bytes=ce.bytes_moved(t, v, dtype, pass_),
                ref=lambda inputs, p=pass_: ce_reference(inputs[0], inputs[1], p),
            )

# %% [markdown] lang="en"
# ## 4. Measure linear + cross-entropy
#
# Hidden states of 4096 features, a vocabulary of 128256 (Llama 3's last layer), bf16, 8192 and
# 16384 tokens, loss and both gradients. PyTorch materialises the logits (and more); ours walks
# the tokens in chunks and never holds more than one chunk of logits; Liger's fused linear
# cross-entropy does the same with its own chunking. The work is three matrix products of
# 2·T·V·H flops each, so throughput is reported in TFLOP/s against the bf16 matmul ceiling.

# %% [markdown] lang="es"
# ## 4. Medir lineal + cross-entropy
#
# Estados ocultos de 4096 componentes, un vocabulario de 128256 (la última capa de Llama 3),
# bf16, 8192 y 16384 tokens, pérdida y ambos gradientes. PyTorch materializa los logits (y más);
# el nuestro recorre los tokens por trozos y nunca tiene más de un trozo de logits; la lineal +
# cross-entropy fusionada de Liger hace lo mismo con su propio troceado. El trabajo son tres
# productos de matrices de 2·T·V·H flops cada uno, así que el throughput se da en TFLOP/s frente
# al techo de matmul en bf16.

# %%
H, V = 4096, 128256


def linear_reference(inputs: tuple[torch.Tensor, ...]) -> torch.Tensor:
    hidden, weight, target = inputs
    rows = 16
    _, dh, _ = ce.reference_linear(hidden[:rows], weight, target[:rows], reduction="sum")
    return dh / hidden.shape[0]


for t in (8192, 16384):
    for impl in ("triton:2", "torch:eager", "liger"):
        measure(
            impl,
            [t, H, V],
            torch.bfloat16,
            "fwd+bwd",
            case="linear_ce",
            flops=ce.linear_flops(t, H, V, "fwd+bwd"),
            ref=linear_reference,
        )

# %% [markdown] lang="en"
# ## 5. Profile
#
# Nsight Compute on one loss-and-gradient call at 8192 x 128256 in bf16, ours (CUDA C and
# Triton) and PyTorch's: the DRAM bytes each moves against the 2·T·V model. The CUDA kernel
# (`cuda:1`) keeps a row's slices on chip across a thread-block cluster and reads it once. The
# Triton kernel reads each row twice (once for the log-sum-exp, once for the gradient), the
# second time from the end of the row back, hoping to find it in L2: DRAM bytes read close to
# one read of the logits say it did.

# %% [markdown] lang="es"
# ## 5. Perfilar
#
# Nsight Compute sobre una llamada de pérdida y gradiente con 8192 x 128256 en bf16, las
# nuestras (CUDA C y Triton) y la de PyTorch: los bytes de DRAM que mueve cada una frente al
# modelo de 2·T·V. El kernel de CUDA (`cuda:1`) reparte la fila en trozos entre los bloques de
# un cluster, la mantiene en el chip y la lee una sola vez. El de Triton lee cada fila dos veces
# (una para el log-sum-exp, otra para el gradiente), la segunda desde el final de la fila hacia
# atrás, con la esperanza de encontrarla en L2: si los bytes leídos de DRAM se acercan a una sola
# lectura de los logits, la encontró.

# %%
_free()  # hand the cached memory back: ncu profiles in a process of its own
model = ce.bytes_moved(T_BIG, V_BIG, torch.bfloat16, "fwd+bwd")
lab.profile_many(
    [
        {
            "impl": impl,
            "shape": [T_BIG, V_BIG],
            "dtype": "bfloat16",
            "model_bytes": model,
            "extra_args": ["fwd+bwd"],
        }
        for impl in ("cuda:1", "triton:1", "torch:eager")
    ]
)

# %%
lab.save()
