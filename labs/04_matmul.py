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
#     op: matmul
#     page: checkpoint-c3a/e3-beat-cublas
# ---

# %% [markdown] lang="en"
# # Lab 04 — matrix product: a CUDA C ladder and a Triton GEMM against cuBLAS
#
# This notebook is the runnable half of exercise E3 ("try to beat cuBLAS, and explain the
# result") and of the naive-to-tiled theory page. It checks every matmul kernel of `minikernel`
# against an fp64 reference, then on a GPU times
#
# * the Triton GEMM (`triton:1` with pointers, `triton:2` with TMA descriptors, `triton:3` the
#   same, persistent) in bf16 and fp16 against cuBLAS (`torch.mm`) in the same run,
# * the CUDA C ladder in fp32 (`cuda:1` naive ... `cuda:5` double-buffered register tiles)
#   against cuBLAS in fp32 with TF32 off, as a fraction of an fp32 ceiling measured here,
# * one fused epilogue (bias + ReLU) against PyTorch's two kernels,
#
# profiles the best CUDA C GEMM and the Triton GEMM with Nsight Compute, and writes
# `labs/results/<your-gpu>/matmul.json`. `nox -s labs -- matmul` runs exactly this file.

# %% [markdown] lang="es"
# # Lab 04 — producto de matrices: una escalera en CUDA C y un GEMM en Triton frente a cuBLAS
#
# Este notebook es la parte ejecutable del ejercicio E3 ("intenta batir a cuBLAS y explica el
# resultado") y de la página de teoría que va de lo ingenuo a los tiles. Comprueba cada kernel
# de producto de matrices de `minikernel` contra una referencia en fp64 y después, si hay GPU,
# cronometra
#
# * el GEMM en Triton (`triton:1` con punteros, `triton:2` con descriptores TMA, `triton:3` lo
#   mismo pero persistente) en bf16 y fp16 frente a cuBLAS (`torch.mm`), en la misma ejecución;
# * la escalera en CUDA C en fp32 (de `cuda:1`, ingenuo, a `cuda:5`, tiles en registros con doble
#   buffer) frente a cuBLAS en fp32 con TF32 desactivado, como fracción de un techo fp32 medido
#   aquí mismo;
# * un epílogo fusionado (bias + ReLU) frente a los dos kernels de PyTorch.
#
# Perfila con Nsight Compute el mejor GEMM en CUDA C y el GEMM en Triton, y escribe
# `labs/results/<tu-gpu>/matmul.json`. `nox -s labs -- matmul` ejecuta exactamente este fichero.

# %%
import json
import os

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import matmul as mm
from minikernel.kernels.matmul import triton_kernels as mtk
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"

# %% [markdown] lang="en"
# ## 1. Correct first
#
# Every variant against `act(a @ b + bias)` computed in float64, on sizes with partial tiles in
# M, N and K. Outputs are about sqrt(K) in size, so the tolerances scale with sqrt(K): exact
# products and fp32 sums for fp16/bf16 (one rounding of the output), TF32 products for fp32 in
# Triton, plain fp32 in the CUDA C rungs. On a CPU only the Triton kernels run, in the
# interpreter. On the GPU the check sizes keep N and K multiples of 16, like the timed ones, so
# the kernels checked are the very compilations that are timed (the test suite covers odd N, K,
# and the fused bias + activation; the epilogue timed below records its own error).

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# Cada variante frente a `act(a @ b + bias)` calculado en float64, con tamaños que dejan tiles
# incompletos en M, N y K. Las salidas miden en torno a sqrt(K), así que las tolerancias escalan
# con sqrt(K): productos exactos y sumas en fp32 para fp16/bf16 (un único redondeo de la salida),
# productos en TF32 para fp32 en Triton y fp32 puro en los peldaños de CUDA C. En una CPU solo
# corren los kernels de Triton, en el intérprete. En la GPU los tamaños de comprobación mantienen
# N y K múltiplos de 16, como los cronometrados, de modo que los kernels comprobados son las
# mismas compilaciones que luego se miden (la batería de tests cubre N y K impares, y el bias +
# activación fusionados; el epílogo cronometrado más abajo registra su propio error).


# %%
def tolerances(impl: str, k: int) -> dict[torch.dtype, tuple[float, float]]:
    s = k**0.5
    exact32 = impl.startswith("cuda:") or impl == "cublas"
    return {
        torch.float32: (2e-5 * s, 1e-5) if exact32 else (1e-2 * s, 1e-2),
        torch.float16: (2e-4 * s, 2e-3),
        torch.bfloat16: (1e-3 * s, 1e-2),
    }


CHECK_SIZES = [(1000, 1040, 1008)] if GPU else [(17, 33, 65), (100, 136, 72)]
# On the GPU, each variant in the dtypes it is timed in (every Triton dtype is one more set of
# compilations); on a CPU, what the interpreter can run.
TIMED_DTYPES = {"triton:1": [torch.bfloat16], "triton:2": [torch.bfloat16, torch.float16]}
TIMED_DTYPES["triton:3"] = TIMED_DTYPES["triton:2"]
impls = [k for k in mm.VARIANTS if GPU or k.startswith("triton:")]


def check_dtypes(impl: str) -> list[torch.dtype]:
    if not GPU:
        return [torch.float32, torch.float16]
    return TIMED_DTYPES.get(impl, [torch.float32])


for impl in impls:
    for dtype in check_dtypes(impl):
        for m, n, k in CHECK_SIZES:
            a, b, _ = mm.make_inputs(m, n, k, dtype, DEVICE, seed=m + n + k)
            run_checked(
                lambda x, y, out, impl=impl: mm.matmul(x, y, out=out, impl=impl),
                [a, b],
                mm.reference(a, b),
                tolerances=tolerances(impl, k),
                name=impl,
            ).raise_if_failed()
print(f"checked {impls} on {CHECK_SIZES}: all correct")

# %% [markdown] lang="en"
# ## 2. Measure
#
# Prediction first. A product of two n x n matrices does 2n^3 flops on 3n^2 elements: at
# n = 4096 in bf16, 137 GFLOP on 100 MB, about 1400 flops per byte of DRAM traffic, far above
# the ~200 flops/byte where an H100/H200 turns from memory-bound to compute-bound. So the speed
# limit is the tensor cores (for bf16/fp16), or the fp32 FMA units (for the CUDA C rungs), and
# `frac_of_ceiling` is against a matrix product measured in this process: cuBLAS bf16 at 8192^3
# for 16-bit records, and cuBLAS fp32 at 8192^3 with TF32 off for fp32 records.
#
# The tall-skinny shapes are where tile choices matter: 128 x 4096 x 4096 makes only 32 output
# tiles of 128 x 128, fewer than the GPU has SMs. Slow rungs are skipped where one call would
# take more than about a tenth of a second (predicted from their speed on the previous, smaller
# shape).
#
# The square products run the H200 at its power limit, where the clock a kernel gets depends on
# the power it draws. So at those shapes each 16-bit case also runs back to back for two seconds
# while the GPU's energy counter is read: `loop_us`, `loop_power_w` and `energy_mJ`, the energy
# of one call (where the GPU has the counter; otherwise the records leave them out).

# %% [markdown] lang="es"
# ## 2. Medir
#
# Primero, la predicción. Un producto de dos matrices n x n hace 2n^3 flops sobre 3n^2
# elementos: con n = 4096 en bf16, 137 GFLOP sobre 100 MB, unos 1400 flops por byte de tráfico
# con la DRAM, muy por encima de los ~200 flops/byte donde una H100/H200 deja de estar limitada
# por memoria y pasa a estarlo por cómputo. El límite de velocidad lo ponen entonces los tensor
# cores (en bf16/fp16) o las unidades FMA de fp32 (en los peldaños de CUDA C), y
# `frac_of_ceiling` se mide frente a un producto de matrices medido en este mismo proceso: cuBLAS
# en bf16 a 8192^3 para los registros de 16 bits, y cuBLAS en fp32 a 8192^3 con TF32 desactivado
# para los de fp32.
#
# Las formas alargadas son donde la elección de tiles importa: 128 x 4096 x 4096 solo da 32
# tiles de salida de 128 x 128, menos que SMs tiene la GPU. Los peldaños lentos se saltan allí
# donde una llamada tardaría más de una décima de segundo (lo predice su velocidad en la forma
# anterior, más pequeña).
#
# Los productos cuadrados llevan la H200 a su límite de potencia, y ahí el reloj que recibe un
# kernel depende de la potencia que consume. Por eso, en esas formas, cada caso de 16 bits se
# ejecuta además en bucle durante dos segundos mientras se lee el contador de energía de la GPU:
# `loop_us`, `loop_power_w` y `energy_mJ`, la energía de una llamada (si la GPU tiene ese
# contador; si no, los registros no los incluyen).

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench.lab import Lab
from minikernel.bench.timing import time_gpu

lab = Lab("matmul", mm.VARIANTS, lab_file="labs/04_matmul.py")

# The fp32 ceiling: cuBLAS SGEMM at 8192^3 with TF32 off (full fp32 products on the FMA units).
fp32_run = mm.make_runner("cublas", [8192, 8192, 8192], torch.float32)
fp32_t = time_gpu(fp32_run, graph=False)
lab.ceilings["fp32_mm_TFLOPs"] = round(
    mm.matmul_flops(8192, 8192, 8192) / fp32_t.median_us / 1e6, 1
)
lab.extra["cublas_fp32"] = {
    "tf32": False,  # the runner sets allow_tf32 = False around every call
    "how": "torch.backends.cuda.matmul.allow_tf32 = False around each torch.mm",
}
lab.extra["triton_fp32_precision"] = "tf32"
print(f"[matmul] fp32 ceiling (cuBLAS, TF32 off): {lab.ceilings['fp32_mm_TFLOPs']} TFLOP/s")
del fp32_run

# (M, N, K), smallest first, so that each rung's speed on one shape predicts the next.
SHAPES = [
    (128, 4096, 4096),
    (4096, 4096, 4096),
    (16384, 1024, 4096),
    (6144, 6144, 6144),
    (8192, 8192, 8192),
]
MAX_CALL_MS = 100.0


def max_rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref).abs().max() / ref.abs().max())


def measure_shape(  # type: ignore[no-untyped-def]
    impl: str, shape: tuple[int, int, int], dtype: torch.dtype, ref, energy: bool = False, **kw
) -> dict:
    m, n, k = shape
    run = mm.make_runner(impl, list(shape), dtype, **kw)
    err = max_rel_err(run(), ref)
    # The config a Triton rung's autotuner chose for this case (run() above tuned it).
    tuned = {"config": mtk.last_config(int(impl[7:]))} if impl.startswith("triton:") else {}
    ceiling = "fp32_mm_TFLOPs" if dtype == torch.float32 else None
    rec = lab.measure(
        impl,
        run,
        shape=list(shape),
        dtype=dtype,
        flops=mm.matmul_flops(m, n, k),
        max_rel_err=err,
        ceiling=ceiling,
        energy=energy,
        **({"epilogue": kw["epilogue"]} if "epilogue" in kw else {}),
        **tuned,
    )
    del run
    return rec


# Triton in bf16 and fp16 against cuBLAS, same shapes, same run. At the square shapes, where the
# products run at the power limit, each case also runs back to back for two seconds to record
# the energy of one call (minikernel.bench.energy): at a limit, less energy per call is a
# higher clock.
ENERGY_SHAPES = [(4096, 4096, 4096), (6144, 6144, 6144), (8192, 8192, 8192)]
for shape in SHAPES:
    for dtype in (torch.bfloat16, torch.float16):
        inputs = mm.make_inputs(*shape, dtype, "cuda", seed=sum(shape))  # shared by all impls
        ref = mm.reference(*inputs[:2])
        # bf16: the whole Triton ladder; fp16: its TMA rungs (each impl and dtype is a compile).
        ladder = (
            ("triton:2", "triton:3")
            if dtype == torch.float16
            else ("triton:1", "triton:2", "triton:3")
        )
        for impl in (*ladder, "cublas"):
            measure_shape(impl, shape, dtype, ref, energy=shape in ENERGY_SHAPES, inputs=inputs)
        del ref, inputs
        torch.cuda.empty_cache()

# The CUDA C ladder in fp32 against cuBLAS fp32 (TF32 off).
rate: dict[str, float] = {}  # TFLOP/s of each rung on the last shape it ran
for shape in SHAPES:
    inputs = mm.make_inputs(*shape, torch.float32, "cuda", seed=sum(shape))
    ref = mm.reference(*inputs[:2])
    flops = mm.matmul_flops(*shape)
    for impl in ("cuda:1", "cuda:2", "cuda:3", "cuda:4", "cuda:5", "cublas"):
        predicted_ms = flops / (rate[impl] * 1e9) if impl in rate else 0.0
        if impl != "cublas" and predicted_ms > MAX_CALL_MS:
            print(f"[matmul] skip {impl} at {shape}: one call would take ~{predicted_ms:.0f} ms")
            continue
        rate[impl] = measure_shape(impl, shape, torch.float32, ref, inputs=inputs)["TFLOPs"]
    del ref, inputs
    torch.cuda.empty_cache()

# One fused epilogue: bias + ReLU inside the Triton GEMM, against torch.addmm + relu (two
# kernels). The exact GELU is tested, not timed here: its erf costs seconds of compilation.
EPI_SHAPE = (4096, 4096, 4096)
inputs = mm.make_inputs(*EPI_SHAPE, torch.bfloat16, "cuda", seed=sum(EPI_SHAPE))
ref = mm.reference(*inputs, "relu")
for impl in ("triton:3", "torch:eager"):
    measure_shape(impl, EPI_SHAPE, torch.bfloat16, ref, epilogue="bias+relu", inputs=inputs)
del ref, inputs
torch.cuda.empty_cache()

# %% [markdown] lang="en"
# ## 3. Profile
#
# Nsight Compute on one call at 4096^3: the best CUDA C rung (fp32), the Triton GEMM (bf16) and,
# beside it, the kernel cuBLAS picks for the same product (its name is in the record's
# `kernel_names`); then the last two again at 8192^3. For a compute-bound kernel the excerpt's
# interesting rows are the stall reasons, the occupancy and the registers; DRAM bytes against
# the 3n^2 elements of the byte model show how much of the re-reading of A and B the tiles (and
# L2) absorb.

# %% [markdown] lang="es"
# ## 3. Perfilar
#
# Nsight Compute sobre una llamada a 4096^3: el mejor peldaño de CUDA C (fp32), el GEMM de
# Triton (bf16) y, a su lado, el kernel que cuBLAS elige para el mismo producto (su nombre queda
# en el campo `kernel_names` del registro); después, esos dos otra vez a 8192^3. En un kernel
# limitado por cómputo, las filas interesantes del extracto son los motivos de stall, la
# ocupación y los registros; los bytes de DRAM frente a los 3n^2 elementos del modelo de bytes
# muestran cuánta relectura de A y B absorben los tiles (y la L2).

# %%
# (impl, n, dtype, bytes per element): each product n x n x n. At 8192^3 the timed Triton GEMM
# and cuBLAS stop tying; profiled alone, each at whatever clock the GPU runs one call at, their
# durations tell a kernel that does more work per clock from one the power limit slows down.
PROFILED = (
    ("cuda:5", 4096, "float32", 4),
    ("triton:3", 4096, "bfloat16", 2),
    ("cublas", 4096, "bfloat16", 2),
    ("triton:3", 8192, "bfloat16", 2),
    ("cublas", 8192, "bfloat16", 2),
)
for impl, n, dtype, size in PROFILED:
    pin = {}
    if impl.startswith("triton:"):  # profile the config the autotuner chose for the timing
        timed = [
            r
            for r in lab.records
            if r["impl"] == impl
            and r["shape"] == [n] * 3
            and r["dtype"] == dtype
            and "epilogue" not in r
        ]
        if timed and timed[0].get("config"):
            config = timed[0]["config"]
            pin = {"env": {mtk.PIN_ENV: json.dumps(config)}, "config": config}
    lab.profile(impl, [n] * 3, dtype, model_bytes=3 * n**2 * size, **pin)

# %%
lab.save()
