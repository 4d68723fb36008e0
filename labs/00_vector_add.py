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
#     op: vector_add
#     page: phase-24/lab/00-hello-cuda
# ---

# %% [markdown] lang="en"
# # Lab 00 — hello CUDA: vector add, checked and measured
#
# This notebook is the runnable half of the lab page. It checks every vector-add kernel of
# `minikernel` against an fp64 reference, then (on a GPU) times each one against the copy
# ceiling of your GPU, profiles the largest size with Nsight Compute, and writes
# `labs/results/<your-gpu>/vector_add.json`. `nox -s labs -- vector_add` runs exactly this file.
#
# On a machine without a GPU it runs the Triton kernels in Triton's interpreter, checks them,
# and stops before timing: there is nothing to time.

# %% [markdown] lang="es"
# # Lab 00 — hola CUDA: suma de vectores, comprobada y medida
#
# Este notebook es la parte ejecutable de la página del lab. Comprueba cada kernel de suma de
# vectores de `minikernel` contra una referencia en fp64 y después, si hay GPU, cronometra cada
# uno frente al techo de copia de tu GPU, perfila el tamaño mayor con Nsight Compute y escribe
# `labs/results/<tu-gpu>/vector_add.json`. `nox -s labs -- vector_add` ejecuta exactamente este
# fichero.
#
# En una máquina sin GPU ejecuta los kernels de Triton en su intérprete, los comprueba y se
# detiene antes de medir: no hay nada que cronometrar.

# %%
import os

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import vector_add as va
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"

# %% [markdown] lang="en"
# ## 1. Correct first
#
# Every variant, on sizes chosen to break a kernel: 1 (all tail), 127 / 129 (a partial last
# block), 128 (no tail), and 1000003 (a prime: many blocks, no vector width divides it).
# `run_checked` also catches writes past the end of the output and elements left unwritten.

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# Cada variante, con tamaños elegidos para romper un kernel: 1 (todo es cola), 127 / 129 (un
# último bloque incompleto), 128 (sin cola) y 1000003 (un primo: muchos bloques y ningún ancho
# de vector lo divide). `run_checked` detecta además escrituras más allá del final de la salida y
# elementos que se quedaron sin escribir.

# %%
CHECK_SIZES = [1, 127, 128, 129, 1000003]
# Triton's interpreter computes bfloat16 wrong, so on a CPU bf16 is left to the GPU run.
CHECK_DTYPES = [torch.float32, torch.float16] + ([torch.bfloat16] if GPU else [])
impls = [k for k in va.VARIANTS if GPU or k.startswith("triton:")]

for impl in impls:
    for dtype in CHECK_DTYPES:
        for n in CHECK_SIZES:
            a, b = va.make_inputs(n, dtype, DEVICE, seed=n)
            run_checked(
                lambda x, y, out, impl=impl: va.vector_add(x, y, out=out, impl=impl),
                [a, b],
                va.reference(a, b),
                name=impl,
            ).raise_if_failed()
print(f"checked {impls} on {CHECK_SIZES} in {[str(d)[6:] for d in CHECK_DTYPES]}: all correct")

# %% [markdown] lang="en"
# ## 2. Measure
#
# Prediction first. Vector add reads two arrays and writes one: 3 x n x (bytes per element), with
# no reuse, so the best a kernel can do is move those bytes at the speed of a device-to-device
# copy. `Lab` measures that copy ceiling (and a bf16 matrix product) in this same process.
# Below about ten microseconds a launch costs more than the work, so those sizes are timed by
# replaying a CUDA graph.

# %% [markdown] lang="es"
# ## 2. Medir
#
# Primero, la predicción. La suma de vectores lee dos arrays y escribe uno: 3 x n x (bytes por
# elemento), sin reutilización, así que lo mejor que puede hacer un kernel es mover esos bytes a
# la velocidad de una copia de dispositivo a dispositivo. `Lab` mide ese techo de copia (y un
# producto de matrices en bf16) en este mismo proceso. Por debajo de unos diez microsegundos el
# lanzamiento cuesta más que el trabajo, así que esos tamaños se cronometran reproduciendo un
# CUDA graph.

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench import compile_times
from minikernel.bench.lab import Lab
from minikernel.cuda import device_arch

lab = Lab("vector_add", va.VARIANTS, lab_file="labs/00_vector_add.py")

SIZES = [2**k for k in range(10, 29, 2)] + [2**29]  # 1 Ki ... 256 Mi by 4x, then 512 Mi
for dtype in (torch.float32, torch.bfloat16):
    for n in SIZES:
        a, b = va.make_inputs(n, dtype, "cuda", seed=n)
        ref = va.reference(a, b)
        scale = float(ref.abs().max())
        for impl in [*va.VARIANTS, *va.PEERS]:
            run = va.make_runner(impl, [n], dtype, seed=n)
            err = float((run().double() - ref).abs().max()) / scale
            lab.measure(
                impl, run, shape=[n], dtype=dtype, bytes=va.bytes_moved(n, dtype), max_rel_err=err
            )
            del run
        del a, b, ref
        torch.cuda.empty_cache()

# %% [markdown] lang="en"
# ## 3. Profile, and time the three ways to build a CUDA C kernel
#
# Nsight Compute on one call at 2^28 fp32 elements: DRAM throughput, bytes read and written
# against the byte model, occupancy and the dominant stall reasons. Then NVRTC, plain `nvcc` and
# `load_inline`, each from a cold start.

# %% [markdown] lang="es"
# ## 3. Perfilar, y cronometrar las tres formas de compilar un kernel de CUDA C
#
# Nsight Compute sobre una llamada con 2^28 elementos fp32: throughput de DRAM, bytes leídos y
# escritos frente al modelo de bytes, ocupación y los motivos de stall dominantes. Después NVRTC,
# `nvcc` a secas y `load_inline`, cada uno desde cero.

# %%
N_PROFILE = 2**28
lab.profile_many(  # the four in one ncu process: one Python, PyTorch and CUDA start, not four
    [
        {
            "impl": impl,
            "shape": [N_PROFILE],
            "dtype": "float32",
            "model_bytes": va.bytes_moved(N_PROFILE, torch.float32),
        }
        for impl in ("cuda:2", "cuda:3", "triton:1", "torch:eager")
    ]
)

lab.extra["compile_times"] = compile_times.measure(
    va.CU_FILE,
    device_arch(),
    with_load_inline=os.environ.get("MINIKERNEL_SKIP_LOAD_INLINE") != "1",
)
print(lab.extra["compile_times"])

# %%
lab.save()
