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
#     ops: [copy, transpose, add_bias]
#     page: triton/06-performance-first-principles
# ---

# %% [markdown] lang="en"
# # Lab 06 — Triton basics: copy, a BLOCK_SIZE sweep, transpose and add-bias
#
# The runnable half of lessons 2, 6 and 7 of the Triton guide. It checks the copy, transpose
# and add-bias kernels of `minikernel`, then on a GPU measures three things and writes one
# results file per op (`labs/results/<your-gpu>/copy.json`, `transpose.json`, `add_bias.json`):
#
# 1. the bandwidth of the copy kernel from 2^12 to 2^28 float32 elements, against the copy
#    ceiling of your GPU (lesson 2: where work stops being launch-bound);
# 2. the same kernel at 2^26 elements for every BLOCK_SIZE from 64 to 16384 and every
#    num_warps from 1 to 16 (lesson 6);
# 3. a naive and a tiled transpose against PyTorch's `x.t().contiguous()`, with Nsight Compute
#    on both, and a bias added to every row against PyTorch's `x + bias` (lesson 7).
#
# `nox -s labs -- triton_basics` runs exactly this file. Without a GPU it runs the checks in
# Triton's interpreter and stops before timing.

# %% [markdown] lang="es"
# # Lab 06 — Triton básico: copia, barrido de BLOCK_SIZE, transposición y suma de sesgo
#
# La parte ejecutable de las lecciones 2, 6 y 7 de la guía de Triton. Comprueba los kernels de
# copia, transposición y suma de sesgo de `minikernel` y después, si hay GPU, mide tres cosas y
# escribe un fichero de resultados por operación (`labs/results/<tu-gpu>/copy.json`,
# `transpose.json`, `add_bias.json`):
#
# 1. el ancho de banda del kernel de copia desde 2^12 hasta 2^28 elementos float32, frente al
#    techo de copia de tu GPU (lección 2: dónde deja el trabajo de estar limitado por el
#    lanzamiento);
# 2. el mismo kernel con 2^26 elementos para cada BLOCK_SIZE de 64 a 16384 y cada num_warps de
#    1 a 16 (lección 6);
# 3. una transposición ingenua y otra por tiles frente a `x.t().contiguous()` de PyTorch, con
#    Nsight Compute sobre ambas, y un sesgo sumado a cada fila frente a `x + bias` de PyTorch
#    (lección 7).
#
# `nox -s labs -- triton_basics` ejecuta exactamente este fichero. Sin GPU ejecuta las
# comprobaciones en el intérprete de Triton y se detiene antes de medir.

# %%
import os

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import add_bias as ab
from minikernel.kernels import copy as cp
from minikernel.kernels import transpose as tp
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"
# Triton's interpreter computes bfloat16 arithmetic wrong, so on a CPU add-bias skips bf16;
# copy and transpose only move bits and are checked in bf16 everywhere.
DTYPES = [torch.float32, torch.bfloat16]

# %% [markdown] lang="en"
# ## 1. Correct first
#
# The sanity check of lesson 2 (it says whether a failure is the machine's or the kernel's),
# then every variant on shapes chosen to break a kernel: odd sizes with partial last blocks,
# a transposed view and a slice with steps (strides the kernel must honour), a bias with a
# stride of 3. `run_checked` also catches writes outside the output and elements left
# unwritten. Every timed case below is checked again, on its own output.

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# La comprobación de cordura de la lección 2 (dice si un fallo es de la máquina o del kernel)
# y después cada variante con formas elegidas para romper un kernel: tamaños impares con el
# último bloque incompleto, una vista transpuesta y un corte con pasos (strides que el kernel
# debe respetar), un sesgo con stride 3. `run_checked` detecta además escrituras fuera de la
# salida y elementos sin escribir. Cada caso cronometrado más abajo se vuelve a comprobar
# sobre su propia salida.

# %%
print(cp.sanity_check())

for dtype in DTYPES:
    for n in (1, 1025, 100003):
        x = cp.make_input(n, dtype, DEVICE, seed=n)
        run_checked(
            lambda s, o: cp.copy(s, out=o), [x], cp.reference(x), tolerances=cp.EXACT
        ).raise_if_failed()

VIEWS = {  # name: (shape of the contiguous base, the view the kernel sees)
    "odd": ((63, 130), lambda b: b),
    "transposed": ((130, 63), lambda b: b.t()),
    "step-slice": ((126, 390), lambda b: b[::2, ::3]),
}
for impl in tp.VARIANTS:
    for dtype in DTYPES:
        for name, (shape, view) in VIEWS.items():
            if GPU and dtype != torch.float32 and name != "odd":
                continue  # each case costs a compile on a GPU; strides do not depend on dtype
            base = tp.make_input(*shape, dtype, DEVICE, seed=shape[0])
            run_checked(
                lambda b, o, impl=impl, view=view: tp.transpose(view(b), out=o, impl=impl),
                [base],
                tp.reference(view(base)),
                tolerances=tp.EXACT,
                name=f"transpose {impl} {name}",
            ).raise_if_failed()

for dtype in DTYPES if GPU else [torch.float32]:
    x, bias = ab.make_inputs(33, 300, dtype, DEVICE, seed=1)
    run_checked(
        lambda a, b, o: ab.add_bias(a, b, out=o), [x, bias], ab.reference(x, bias), name="add_bias"
    ).raise_if_failed()
    xt, _ = ab.make_inputs(300, 33, dtype, DEVICE, seed=2)  # seen through .t(): strides (1, 33)
    _, b3 = ab.make_inputs(1, 900, dtype, DEVICE, seed=3)  # seen through [::3]: stride 3
    run_checked(
        lambda a, b, o: ab.add_bias(a.t(), b[::3], out=o),
        [xt, b3],
        ab.reference(xt.t(), b3[::3]),
        name="add_bias, strided x and bias",
    ).raise_if_failed()
print("copy, transpose (naive, tiled) and add_bias: all correct")

# %% [markdown] lang="en"
# ## 2. Copy bandwidth against the copy ceiling
#
# Prediction first. A copy of n float32 values reads 4n bytes and writes 4n: 2 x 4n bytes and
# no arithmetic, so at best it runs at the copy ceiling that `Lab` measures in this process
# (PyTorch's own device-to-device copy of 2 GiB). Small copies cannot get there: a launch
# costs a few microseconds whatever the size, so below some size the time stops shrinking and
# the bandwidth falls in proportion: the copy is launch-bound there. Cases under about ten
# microseconds are timed by replaying a CUDA graph, which removes the CPU's share of the launch
# but not the GPU's.

# %% [markdown] lang="es"
# ## 2. Ancho de banda de la copia frente al techo de copia
#
# Primero, la predicción. Copiar n valores float32 lee 4n bytes y escribe 4n: 2 x 4n bytes y
# ninguna operación aritmética, así que como mucho va al techo de copia que `Lab` mide en este
# mismo proceso (la copia de dispositivo a dispositivo de 2 GiB de PyTorch). Las copias
# pequeñas no pueden llegar: un lanzamiento cuesta unos microsegundos sea cual sea el tamaño,
# así que por debajo de cierto tamaño el tiempo deja de bajar y el ancho de banda cae en
# proporción: ahí la copia está limitada por el lanzamiento. Los casos de menos de unos diez
# microsegundos se cronometran reproduciendo un CUDA graph, que quita la parte del lanzamiento
# que cuesta a la CPU pero no la que cuesta a la GPU.

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench.lab import Lab
from minikernel.kernels.copy.triton_kernels import (
    DEFAULT_BLOCK_SIZE,
    DEFAULT_NUM_WARPS,
    kernel1_resources,
    launch_kernel1,
)


def exact(got: torch.Tensor, want: torch.Tensor, what: str) -> float:
    """0.0 (the max_rel_err of a kernel that moves bits) or an AssertionError: a wrong kernel
    is never timed."""
    if not torch.equal(got, want):
        raise AssertionError(f"{what}: output differs from the expected values")
    return 0.0


copy_lab = Lab("copy", cp.VARIANTS, lab_file="labs/06_triton_basics.py")
F32 = torch.float32
COPY_SIZES = [2**k for k in range(12, 29, 2)]  # 4 Ki ... 256 Mi elements by 4x
for n in COPY_SIZES:
    x = cp.make_input(n, F32, "cuda", seed=n)
    for impl in cp.VARIANTS:  # the ceiling is PyTorch's own copy; no other peer needed here
        run = cp.make_runner(impl, [n], F32, seed=n)
        copy_lab.measure(
            impl,
            run,
            shape=[n],
            dtype=F32,
            bytes=cp.bytes_moved(n, F32),
            max_rel_err=exact(run(), x, f"copy {impl} n={n}"),
            experiment="bandwidth",
            block_size=DEFAULT_BLOCK_SIZE,
            num_warps=DEFAULT_NUM_WARPS,
        )
        del run
    del x
torch.cuda.empty_cache()

# %% [markdown] lang="en"
# ## 3. The BLOCK_SIZE sweep (lesson 6)
#
# One kernel, 2^26 float32 elements (512 MiB moved, far more than L2), every BLOCK_SIZE from
# 64 to 16384 with every num_warps from 1 to 16. The byte model does not change, so every
# difference in time is the launch configuration: too few elements per thread and the GPU
# runs out of resident programs before it has enough bytes in flight; too many and the
# registers spill (`spills` in each record, read from the compiled kernel); blocks smaller
# than their warps leave threads holding duplicates.

# %% [markdown] lang="es"
# ## 3. El barrido de BLOCK_SIZE (lección 6)
#
# Un solo kernel, 2^26 elementos float32 (512 MiB movidos, mucho más que la L2), cada
# BLOCK_SIZE de 64 a 16384 con cada num_warps de 1 a 16. El modelo de bytes no cambia, así que
# toda diferencia de tiempo viene de la configuración de lanzamiento: con muy pocos elementos
# por hilo la GPU se queda sin programas residentes antes de tener suficientes bytes en vuelo;
# con demasiados, los registros se derraman a memoria (`spills` en cada registro, leído del
# kernel compilado); los bloques más pequeños que sus warps dejan hilos con copias duplicadas.

# %%
SWEEP_N = 2**26
SWEEP_BLOCKS = [2**k for k in range(6, 15)]  # 64 ... 16384
SWEEP_WARPS = [1, 2, 4, 8, 16]
x = cp.make_input(SWEEP_N, F32, "cuda", seed=SWEEP_N)
out = torch.empty_like(x)
for block_size in SWEEP_BLOCKS:
    for num_warps in SWEEP_WARPS:
        out.zero_()
        resources = kernel1_resources(launch_kernel1(x, out, block_size, num_warps))
        err = exact(out, x, f"copy BLOCK_SIZE={block_size} num_warps={num_warps}")
        copy_lab.measure(
            "triton:1",
            lambda b=block_size, w=num_warps, x=x, out=out: launch_kernel1(x, out, b, w),
            shape=[SWEEP_N],
            dtype=F32,
            bytes=cp.bytes_moved(SWEEP_N, F32),
            max_rel_err=err,
            graph=False,  # ~0.1 ms and more per call: events, L2 flushed between calls
            experiment="block_size_sweep",
            block_size=block_size,
            num_warps=num_warps,
            **resources,
        )
del x, out
torch.cuda.empty_cache()

copy_lab.extra["experiments"] = {
    "bandwidth": {"sizes": COPY_SIZES, "dtype": "float32"},
    "block_size_sweep": {
        "n": SWEEP_N,
        "dtype": "float32",
        "block_sizes": SWEEP_BLOCKS,
        "num_warps": SWEEP_WARPS,
    },
}
copy_lab.save()

# %% [markdown] lang="en"
# ## 4. Transpose: naive, tiled, PyTorch (lesson 7)
#
# All three move the same 2 x M x N x (bytes per element). The naive kernel reads rows of x
# (coalesced) and writes each one down a column of out: neighbouring lanes write M elements
# apart, so each warp store touches 32 separate 32-byte sectors. The tiled kernel loads a
# 64 x 64 tile along rows of x and stores it transposed along rows of out, through shared
# memory. Nsight Compute on one call of each at 8192 x 8192 float32 puts the DRAM bytes next
# to the byte model.

# %% [markdown] lang="es"
# ## 4. Transposición: ingenua, por tiles, PyTorch (lección 7)
#
# Las tres mueven los mismos 2 x M x N x (bytes por elemento). El kernel ingenuo lee filas de x
# (coalescido) y escribe cada una a lo largo de una columna de out: lanes vecinos escriben a M
# elementos de distancia, así que cada store de un warp toca 32 sectores de 32 bytes
# distintos. El kernel por tiles carga un tile de 64 x 64 a lo largo de las filas de x y lo
# guarda transpuesto a lo largo de las filas de out, pasando por memoria compartida. Nsight
# Compute sobre una llamada de cada uno con 8192 x 8192 en float32 pone los bytes de DRAM al
# lado del modelo de bytes.

# %%
from minikernel.kernels.transpose import triton_kernels as tpk

tp_lab = Lab("transpose", tp.VARIANTS, lab_file="labs/06_triton_basics.py")
TP_SHAPES = [[4096, 4096], [8192, 8192]]
for dtype in DTYPES:
    for m, n in TP_SHAPES:
        x = tp.make_input(m, n, dtype, "cuda", seed=m)
        want = x.t()
        for impl in [*tp.VARIANTS, *tp.PEERS]:
            run = tp.make_runner(impl, [m, n], dtype, seed=m)
            err = exact(run(), want, f"transpose {impl} {m}x{n} {dtype}")
            tp_lab.measure(
                impl,
                run,
                shape=[m, n],
                dtype=dtype,
                bytes=tp.bytes_moved(m, n, dtype),
                max_rel_err=err,
            )
            del run
        del x, want
        torch.cuda.empty_cache()

NCU_SHAPE = [8192, 8192]
for impl in tp.VARIANTS:
    tp_lab.profile(impl, NCU_SHAPE, "float32", model_bytes=tp.bytes_moved(*NCU_SHAPE, F32))
tp_lab.extra["tiles"] = {
    "triton:1": {"BLOCK_N": tpk.NAIVE_BLOCK_N, "num_warps": tpk.NUM_WARPS},
    "triton:2": {"BLOCK_M": tpk.TILED_TILE[0], "BLOCK_N": tpk.TILED_TILE[1]}
    | {"num_warps": tpk.NUM_WARPS},
}
tp_lab.save()

# %% [markdown] lang="en"
# ## 5. Add a bias to every row (lesson 7)
#
# `out = x + bias`: read x, write out, read the N bias values once: (2 x M x N + N) elements.
# Each program loads its 256 bias values once and reuses them for its 16 rows.

# %% [markdown] lang="es"
# ## 5. Sumar un sesgo a cada fila (lección 7)
#
# `out = x + bias`: leer x, escribir out y leer una vez los N valores del sesgo:
# (2 x M x N + N) elementos. Cada programa carga sus 256 valores de sesgo una sola vez y los
# reutiliza en sus 16 filas.

# %%
from minikernel.kernels.add_bias import triton_kernels as abk

ab_lab = Lab("add_bias", ab.VARIANTS, lab_file="labs/06_triton_basics.py")
AB_SHAPES = [[4096, 4096], [8192, 8192]]
for dtype in DTYPES:
    for m, n in AB_SHAPES:
        x, bias = ab.make_inputs(m, n, dtype, "cuda", seed=m)
        ref = ab.reference(x, bias)
        scale = float(ref.abs().max())
        for impl in [*ab.VARIANTS, *ab.PEERS]:
            run = ab.make_runner(impl, [m, n], dtype, seed=m)
            err = float((run().double() - ref).abs().max()) / scale
            ab_lab.measure(
                impl,
                run,
                shape=[m, n],
                dtype=dtype,
                bytes=ab.bytes_moved(m, n, dtype),
                max_rel_err=err,
            )
            del run
        del x, bias, ref
        torch.cuda.empty_cache()
ab_lab.extra["tiles"] = {
    "triton:1": {"BLOCK_M": abk.TILE[0], "BLOCK_N": abk.TILE[1], "num_warps": abk.NUM_WARPS}
}
ab_lab.save()
