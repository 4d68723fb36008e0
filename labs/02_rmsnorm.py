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
#     op: rmsnorm
#     page: checkpoint-c3a/fused-rmsnorm
# ---

# %% [markdown] lang="en"
# # Lab 02 — fused RMSNorm, forward and backward
#
# RMSNorm is the normaliser of today's language models: `y = x / sqrt(mean(x²) + eps) * w`,
# one mean per row. Written as PyTorch ops, it is a chain of kernels that each read and write a
# full tensor; fused, it reads `x` once and writes `y` once. This notebook checks every RMSNorm
# kernel of `minikernel` (two CUDA C rungs, two Triton rungs, the Triton backward) against an
# fp64 reference, then on a GPU times them against PyTorch eager, `torch.compile`, Liger-Kernel
# and QuACK (where installed) on rows of 1024 to 131072 elements, profiles the forward pass with
# Nsight Compute to answer exercise E1 — how much DRAM traffic does the fusion save? — and
# writes `labs/results/<your-gpu>/rmsnorm.json`. `nox -s labs -- rmsnorm` runs exactly this file.

# %% [markdown] lang="es"
# # Lab 02 — RMSNorm fusionado, forward y backward
#
# RMSNorm es el normalizador de los modelos de lenguaje actuales: `y = x / sqrt(mean(x²) + eps)
# * w`, una media por fila. Escrito con operaciones de PyTorch es una cadena de kernels, y cada
# uno lee y escribe un tensor completo; fusionado, lee `x` una vez y escribe `y` una vez. Este
# notebook comprueba cada kernel de RMSNorm de `minikernel` (dos peldaños en CUDA C, dos en
# Triton y el backward en Triton) contra una referencia en fp64; después, si hay GPU, los
# cronometra frente a PyTorch eager, `torch.compile`, Liger-Kernel y QuACK (si están instalados)
# con filas de 1024 a 131072 elementos, perfila el forward con Nsight Compute para responder al
# ejercicio E1 (¿cuánto tráfico de DRAM ahorra la fusión?) y escribe
# `labs/results/<tu-gpu>/rmsnorm.json`. `nox -s labs -- rmsnorm` ejecuta exactamente este fichero.

# %%
import gc
import os

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import rmsnorm as rn
from minikernel.kernels._peers import PeerUnavailable, import_peer
from minikernel.kernels.rmsnorm.triton_kernels import KERNEL1_MAX_N
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"
EPS = rn.EPS
TOL = {torch.float32: (1e-5, 1e-5), torch.float16: (1e-3, 1e-3), torch.bfloat16: (1e-2, 8e-3)}

# %% [markdown] lang="en"
# ## 1. Correct first
#
# Every forward rung on shapes chosen to break a kernel: one element per row, 127 (a partial
# 16-byte vector), 37 short rows packed into one program, 4097 (one past a power of two), 20000
# (a row `triton:2` holds whole, from its launch table), and rows long enough that it walks them
# in tiles (40000 fp32 values on a CPU, 131072 on a GPU). Then the backward pass (dx and
# dweight) against autograd of the fp64 reference. `run_checked` also catches writes past the
# end of the output and elements left unwritten. On a CPU the Triton kernels run in Triton's
# interpreter (fp32 and fp16 only: the interpreter gets bf16 wrong); the CUDA C ones need a GPU.

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# Cada peldaño del forward con formas elegidas para romper un kernel: un elemento por fila, 127
# (un vector de 16 bytes incompleto), 37 filas cortas empaquetadas en un solo programa, 4097 (uno
# más que una potencia de dos), 20000 (una fila que `triton:2` guarda entera, según su tabla de
# lanzamiento) y filas tan largas que las recorre por tiles (40000 valores fp32 en una CPU, 131072
# en una GPU). Después el backward (dx y dweight) frente al autograd de la referencia en fp64.
# `run_checked` detecta además escrituras más allá del final de la salida y elementos sin
# escribir. En una CPU los kernels de Triton corren en su intérprete (solo fp32 y fp16: el
# intérprete calcula mal bf16); los de CUDA C necesitan una GPU.

# %%
# On a GPU, fewer shapes: each new shape compiles new kernels, and tests/ covers the rest.
# 32768 columns: slices that are whole in both dtypes, where rung 5 runs its own kernel;
# 131072: a 512 KB fp32 row, where rung 6 runs its own.
CHECK_SHAPES = (
    [(5, 127), (4, 4097), (2, 20000), (2, 32768), (2, 131072)]
    if GPU
    else [(3, 1), (5, 127), (37, 64), (4, 4097), (2, 20000), (2, 40000)]
)
CHECK_DTYPES = [torch.float32, torch.bfloat16] if GPU else [torch.float32, torch.float16]
impls = [k for k in rn.VARIANTS if GPU or k.startswith("triton:")]
# triton:1 keeps the whole row in one block and refuses rows past KERNEL1_MAX_N (tests/ checks
# that it says so): the long row is checked on every other rung
LONGEST = {"triton:1": KERNEL1_MAX_N}

for impl in impls:
    fn = rn.VARIANTS[impl].fn
    for dtype in CHECK_DTYPES:
        for m, n in CHECK_SHAPES:
            if n > LONGEST.get(impl, n):
                continue
            x, w = rn.make_inputs(m, n, dtype, DEVICE, seed=n)
            run_checked(
                lambda a, b, out, fn=fn: fn(a, b, out, EPS),
                [x, w],
                rn.reference(x, w, EPS),
                tolerances=TOL,
                name=impl,
            ).raise_if_failed()
for dtype in CHECK_DTYPES:
    for m, n in CHECK_SHAPES:
        x, w, dy = rn.make_inputs(m, n, dtype, DEVICE, seed=n, with_grad_out=True)
        xg, wg = x.clone().requires_grad_(True), w.clone().requires_grad_(True)
        rn.rms_norm(xg, (n,), wg, EPS).backward(dy)
        dx_ref, dw_ref = rn.reference_grads(x, w, dy, EPS)
        rstd = torch.rsqrt(x.double().pow(2).mean(-1, keepdim=True) + EPS)
        scale = float((dy.double().abs() * w.double().abs() * rstd).max())
        rtol = {torch.float32: 2e-5, torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
        assert float((xg.grad.double() - dx_ref).abs().max()) <= rtol * scale, (dtype, m, n)
        assert float((wg.grad.double() - dw_ref).abs().max()) <= rtol * (
            float(dw_ref.abs().max()) + 1
        ), (dtype, m, n)
names = [str(d).removeprefix("torch.") for d in CHECK_DTYPES]
print(f"checked {impls} and the backward on {CHECK_SHAPES} in {names}: all correct")

# %% [markdown] lang="en"
# ## 2. Predict
#
# The fused forward pass reads x and writes y: 2·M·N elements, plus the weight once. The
# backward pass reads x and dy and writes dx: 3·M·N elements, plus reading w and writing dw.
# Nothing else needs to touch DRAM (one fp32 rstd per row is kept from the forward pass). So the
# best a kernel can do is move those bytes at the speed of a device-to-device copy, which `Lab`
# measures below. The unfused chain (what many model files write: cast to fp32, square, mean,
# multiply, cast back, multiply by w) moves far more: the cell below adds up what each of its
# kernels reads and writes.

# %% [markdown] lang="es"
# ## 2. Predecir
#
# El forward fusionado lee x y escribe y: 2·M·N elementos, más el peso una vez. El backward lee
# x y dy y escribe dx: 3·M·N elementos, más leer w y escribir dw. Nada más tiene que pasar por
# la DRAM (del forward se guarda un rstd en fp32 por fila). Lo mejor que puede hacer un kernel
# es, por tanto, mover esos bytes a la velocidad de una copia de dispositivo a dispositivo, que
# `Lab` mide más abajo. La cadena sin fusionar (lo que escriben muchos ficheros de modelos:
# convertir a fp32, elevar al cuadrado, media, multiplicar, volver al tipo original, multiplicar
# por w) mueve muchísimo más: la celda siguiente suma lo que lee y escribe cada uno de sus
# kernels.

# %%
M_E1, N_E1 = 32768, 4096
for step, (read, write) in rn.UNFUSED_STEPS:
    print(f"  {step:<24} reads {read or '-'}, writes {write or '-'} per element")
for dtype in (torch.bfloat16, torch.float32):
    fused = rn.fwd_bytes(M_E1, N_E1, dtype, dtype)
    unfused = rn.unfused_bytes(M_E1, N_E1, dtype)
    print(
        f"{str(dtype)[6:]:>8} {M_E1}x{N_E1}: fused {fused / 1e6:.0f} MB, unfused chain "
        f"{unfused / 1e6:.0f} MB ({unfused / fused:.1f}x)"
    )

# %% [markdown] lang="en"
# ## 3. Measure
#
# M = 32768 rows in bf16 and M = 16384 in fp32, N from 1024 to 131072. Forward: our tuned rungs
# (Triton `triton:2`, CUDA C `cuda:2` and `cuda:3`) and the peers at every shape, `cuda:4` and
# `cuda:5` from 16384 columns (on rows of up to 32 KB they run `cuda:3`'s kernels), `cuda:6` at
# 131072 fp32 values, the one row of the sweep past 256 KB (elsewhere it runs `cuda:5`); the first
# rungs (`triton:1`, `cuda:1`) at three row lengths, to show what the tuning buys. Backward: dx and
# dweight from a graph built once; `triton:2` (Triton's backward) at every length, and `cuda:3`
# where its backward differs: a CUDA kernel with one warp per row for rows of up to 2048 16-bit or
# 1024 fp32 elements, a fixed-length CUDA kernel for rows of exactly 4096 to 131072 fp32 elements or
# 32768 to 131072 16-bit ones (the powers of two; over a cluster past 16384), and the persistent
# CUDA cluster kernel for the other rows longer than 16384 (Triton's at the other lengths between).
# QuACK's backward is what its autograd function runs: its kernel, then PyTorch's sum of the per-SM
# dweight rows it writes. `torch.compile` is built anew for each shape it times (specialised to it,
# a fair baseline); that costs seconds per shape, so it is timed at a few row lengths only. Liger's
# RMSNorm refuses rows of 65536 elements or more; a peer that is not installed or refuses a case is
# reported and skipped. Each record keeps the largest error of its first rows against the fp64
# reference. At 65536 and 131072 columns the forward of our fastest rungs and of the fastest peers
# also runs in a two-second loop, for the energy of one call at the board's power limit
# (`energy_mJ`; see E3 on why it matters).

# %% [markdown] lang="es"
# ## 3. Medir
#
# M = 32768 filas en bf16 y M = 16384 en fp32, N de 1024 a 131072. Forward: nuestros peldaños
# afinados (Triton `triton:2`, CUDA C `cuda:2` y `cuda:3`) y los pares en cada forma, y
# `cuda:4` y `cuda:5` desde 16384 columnas (en filas de hasta 32 KB ejecutan los kernels de
# `cuda:3`), `cuda:6` con 131072 valores fp32, la única fila del barrido de más de 256 KB (en
# las demás ejecuta `cuda:5`); los
# primeros peldaños (`triton:1`, `cuda:1`) en tres longitudes de fila, para ver qué aporta el
# ajuste.
# Backward: dx y dweight desde un grafo construido una vez; `triton:2` (el backward de Triton)
# en todas las longitudes, y `cuda:3` donde su backward difiere: un kernel de CUDA con un warp
# por fila para filas de hasta 2048 elementos de 16 bits o 1024 de fp32, un kernel de CUDA de
# longitud fija para filas de exactamente 4096 a 131072 elementos fp32 o de 32768 a 131072 de
# 16 bits (las potencias de dos; repartido en un cluster a partir de 16384), y el kernel
# persistente de CUDA sobre clusters
# para las demás filas de más de 16384 (el de Triton en las demás longitudes intermedias). El
# backward de QuACK es lo que ejecuta su función de autograd: su kernel y, después, la suma en
# PyTorch de las filas de dweight parciales (una por SM) que ese kernel escribe.
# `torch.compile` se construye de nuevo para cada forma que se mide (especializado en ella,
# para que la comparación sea justa); cuesta segundos por forma, así que solo se mide en unas
# pocas longitudes de fila. El RMSNorm de Liger rechaza filas de 65536 elementos o más; un
# par que no está instalado o que rechaza un caso se anuncia y se salta. Cada registro guarda
# el mayor error de sus primeras filas frente a
# la referencia fp64. Con 65536 y 131072 columnas, el forward de nuestros peldaños más
# rápidos y de los pares más rápidos se ejecuta además en un bucle de dos segundos, para medir
# la energía de una llamada en el límite de potencia de la placa (`energy_mJ`; E3 explica por qué
# importa).

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench.lab import Lab

lab = Lab("rmsnorm", rn.VARIANTS, lab_file="labs/02_rmsnorm.py")

SWEEP = [(torch.bfloat16, 32768), (torch.float32, 16384)]
NS = [2**k for k in range(10, 18)]  # 1024 ... 131072
FWD = [
    "triton:2",
    "cuda:6",
    "cuda:5",
    "cuda:4",
    "cuda:3",
    "cuda:2",
    "triton:1",
    "cuda:1",
    "torch:eager",
    "torch:compile",
    "liger",
    "quack",
]
BWD = ["triton:2", "cuda:3", "torch:eager", "torch:compile", "liger", "quack"]
# Not every rung or peer at every shape, to keep the lab near 90 s on an H200: the first rungs
# at three row lengths in bf16, and torch.compile (rebuilt for each shape it times, seconds
# each) at a few row lengths.
ONLY_AT = {
    ("triton:1", "fwd"): [1024, 8192, 65536],
    ("cuda:1", "fwd"): [1024, 8192, 65536],
    # cuda:4 is cuda:3 for rows of up to 32 KB (plan4): 8192 fp32 or 16384 bf16 values
    ("cuda:4", "fwd"): [16384, 32768, 65536, 131072],
    # cuda:5 is cuda:4 where a slice is cut short or there is no weight (plan5), cuda:3 where
    # cuda:4 is: at the lab's lengths its own kernel runs from 32768 bf16 and 16384 fp32 values
    ("cuda:5", "fwd"): [16384, 32768, 65536, 131072],
    # cuda:6 is cuda:5 on rows of up to 256 KB (plan6): 131072 fp32 values is the lab's only
    # row past that
    ("cuda:6", "fwd"): [131072],
    ("torch:compile", "fwd"): [4096, 16384, 131072],
    ("torch:compile", "bwd"): [4096, 131072],
}
# The longest forward rows also run back to back for two seconds with the GPU's energy counter
# read (loop_us, loop_power_w, energy_mJ; minikernel.bench.energy): a side probe on the H200
# found these memory-bound calls drawing the board to its power limit, where the time a kernel
# keeps is set by its energy per call. Our fastest rungs there and the fastest peers.
ENERGY_AT = (65536, 131072)
ENERGY_IMPLS = ("cuda:6", "cuda:5", "cuda:4", "triton:2", "torch:compile", "quack")
ONLY_DTYPE = {
    ("triton:1", "fwd"): torch.bfloat16,
    ("cuda:1", "fwd"): torch.bfloat16,
    ("cuda:6", "fwd"): torch.float32,
    ("torch:compile", "bwd"): torch.bfloat16,
}
CHECK_ROWS = 64  # rows checked against fp64 per record: the rows are independent


def _free() -> None:
    gc.collect()
    torch.cuda.empty_cache()


def ncu_case(impl: str, m: int, n: int, dtype: torch.dtype, pass_: str = "fwd") -> dict:
    """One excerpt for Lab.profile_many: a call of ``pass_`` ("fwd" or "bwd") on an (m, n)
    input, against that pass's byte model."""
    by_model = rn.fwd_bytes if pass_ == "fwd" else rn.bwd_bytes
    return {
        "impl": impl,
        "shape": [m, n],
        "dtype": str(dtype).removeprefix("torch."),
        "model_bytes": by_model(m, n, dtype, dtype),
        "extra_args": [pass_],
        "pass_": "bwd" if pass_ == "bwd" else None,
    }


def _fwd_error(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out[:CHECK_ROWS].double() - ref).abs().max() / ref.abs().max())


def measure_case(dtype: torch.dtype, m: int, n: int, impl: str, pass_: str) -> None:
    try:
        run = rn.make_runner(impl, [m, n], dtype, pass_)
    except PeerUnavailable as exc:
        print(f"[rmsnorm] {impl} {pass_} {m}x{n}: skipped ({exc})")
        return
    x, w, dy = run.inputs
    try:
        if pass_ == "fwd":
            ref = rn.reference(x[:CHECK_ROWS], w, EPS)
            out = run()
            err = _fwd_error(out[0] if isinstance(out, tuple) else out, ref)
            nbytes = rn.fwd_bytes(m, n, dtype, w.dtype)
        else:
            ref, _ = rn.reference_grads(x[:CHECK_ROWS], w, dy[:CHECK_ROWS], EPS)  # before run():
            err = _fwd_error(run()[0], ref)  # Liger's backward writes dx over dy
            nbytes = rn.bwd_bytes(m, n, dtype, w.dtype)
    except (ValueError, NotImplementedError, AssertionError) as exc:
        if impl not in ("liger", "quack"):
            raise  # ours or PyTorch's: a bug, not a refusal
        # A package's own refusal of a case it does not support (QuACK's backward builds its
        # kernel on the first call, and says no there): reported and skipped, like a missing peer
        print(f"[rmsnorm] {impl} {pass_} {m}x{n}: skipped (refused: {type(exc).__name__}: {exc})")
        return
    lab.measure(
        impl,
        run,
        shape=[m, n],
        dtype=dtype,
        bytes=nbytes,
        pass_=pass_,
        max_rel_err=err,
        graph=False,
        energy=pass_ == "fwd" and n in ENERGY_AT and impl in ENERGY_IMPLS,
    )
    del run, x, w, dy


def wanted(impl: str, pass_: str, dtype: torch.dtype, n: int) -> bool:
    key = (impl, pass_)
    if key == ("cuda:3", "bwd"):
        # cuda:3's backward only where it runs a CUDA kernel (the warp-per-row kernel for short
        # rows, the fixed-length one for its power-of-two rows, the cluster kernel past
        # 16384): elsewhere it runs Triton's, the kernel triton:2 already times
        cc = torch.cuda.get_device_capability()
        return rn.backward_cuda_plan(n, dtype, dtype, cc) is not None
    return n in ONLY_AT.get(key, [n]) and ONLY_DTYPE.get(key, dtype) == dtype


for dtype, m in SWEEP:
    for n in NS:
        for pass_, impls_ in (("fwd", FWD), ("bwd", BWD)):
            for impl in impls_:
                if wanted(impl, pass_, dtype, n):
                    measure_case(dtype, m, n, impl, pass_)
            _free()

# %% [markdown] lang="en"
# ### Close calls
#
# Where the fastest of ours and the fastest peer came out within 1 % of each other above, one
# timing window each cannot say which is faster: at the long rows both run at the copy
# ceiling, and the same two kernels have swapped places from one run to the next. Those cases
# are timed again, the two alone, in eight rounds, the one that goes first alternating
# (`Lab.duel`, `minikernel.bench.duel`): one of them is ahead only if it wins all eight rounds,
# a count a coin toss would give 1 time in 128 either way; otherwise the two are level.

# %% [markdown] lang="es"
# ### Resultados ajustados
#
# Donde el más rápido de los nuestros y el rival más rápido han quedado arriba a menos de un
# 1 % el uno del otro, una sola ventana de medida por cabeza no basta para decir cuál es más
# rápido: en las filas largas los dos van al techo de la copia, y los mismos dos kernels se han
# cambiado el puesto de una ejecución a otra. Esos casos se miden otra vez, los dos solos, en
# ocho rondas, alternando cuál va primero (`Lab.duel`, `minikernel.bench.duel`): uno va por
# delante solo si gana las ocho rondas, un resultado que lanzando una moneda saldría 1 vez de
# cada 128 a favor de uno u otro; si no, quedan empatados.

# %%
RIVALS = ("torch:eager", "torch:compile", "liger", "quack")
for case, ours, peer in lab.close_calls(lambda i: i in rn.VARIANTS, lambda i: i in RIVALS):
    m, n = case["shape"]
    dtype = getattr(torch, case["dtype"])
    runs = {impl: rn.make_runner(impl, [m, n], dtype, case["pass_"]) for impl in (ours, peer)}
    lab.duel(runs, **case)
    del runs
    _free()

# %%
measure_case(torch.bfloat16, M_E1, N_E1, "torch:unfused", "fwd")

# %% [markdown] lang="en"
# ## 4. Profile: exercise E1
#
# Nsight Compute on one forward call at M = 32768, N = 4096 in bf16, for our Triton kernel, for
# PyTorch eager and for the unfused chain (`torch:unfused`, eight kernels): DRAM bytes read and
# written (every kernel of the call added up), against the byte model. E1's answer is the
# difference of the measured totals, stored in the results file as `e1`: ours against eager's,
# and ours against the chain's.

# %% [markdown] lang="es"
# ## 4. Perfilar: el ejercicio E1
#
# Nsight Compute sobre una llamada al forward con M = 32768, N = 4096 en bf16, para nuestro
# kernel de Triton, para PyTorch eager y para la cadena sin fusionar (`torch:unfused`, ocho
# kernels): bytes leídos y escritos en DRAM (sumando todos los kernels de la llamada) frente al
# modelo de bytes. La respuesta a E1 es la diferencia entre los totales medidos, guardada en el
# fichero de resultados como `e1`: el nuestro frente a eager, y el nuestro frente a la cadena.

# %%
_free()  # hand the cached memory back: ncu profiles in a process of its own
model = rn.fwd_bytes(M_E1, N_E1, torch.bfloat16, torch.bfloat16)
# each call against its own byte model: the chain's is the unfused one, kernel by kernel
models = {
    "triton:2": model,
    "torch:eager": model,
    "torch:unfused": rn.unfused_bytes(M_E1, N_E1, torch.bfloat16),
}
# the three in one ncu process (Lab.profile_many), as every group of excerpts below
e1_cases = [
    {
        "impl": impl,
        "shape": [M_E1, N_E1],
        "dtype": "bfloat16",
        "model_bytes": b,
        "extra_args": ["fwd"],
    }
    for impl, b in models.items()
]
profiles = dict(zip(models, lab.profile_many(e1_cases), strict=True))
if profiles["triton:2"] and profiles["torch:eager"]:
    profiles = {impl: rec for impl, rec in profiles.items() if rec}
    dram = {
        impl: rec["metrics"]["dram_bytes_read"] + rec["metrics"]["dram_bytes_write"]
        for impl, rec in profiles.items()
    }
    lab.extra["e1"] = {
        "shape": [M_E1, N_E1],
        "dtype": "bfloat16",
        "model_bytes": model,
        "unfused_model_bytes": rn.unfused_bytes(M_E1, N_E1, torch.bfloat16),
        "dram_bytes": dram,
        "kernels": {impl: rec["metrics"]["kernels"] for impl, rec in profiles.items()},
        "saved_bytes": dram["torch:eager"] - dram["triton:2"],
        "saved_frac": (dram["torch:eager"] - dram["triton:2"]) / dram["torch:eager"],
    }
    if "torch:unfused" in dram:  # the saving the exercise asks about, against the chain
        chain = dram["torch:unfused"]
        lab.extra["e1"]["chain_saved_bytes"] = chain - dram["triton:2"]
        lab.extra["e1"]["chain_saved_frac"] = (chain - dram["triton:2"]) / chain
    print(lab.extra["e1"])

# %% [markdown] lang="en"
# ## 5. Profile: where the long-row backward loses time
#
# The CUDA backwards read x and dy once and write dx once at every row length, yet the cluster
# kernel's fraction of the ceiling falls as the rows grow. Nsight Compute on one backward call
# (dx and dweight) of `cuda:3` at the longest rows, split over a cluster: in bf16, 32768 rows of
# 131064 elements, a length the fixed-length kernel is not built for, so the cluster kernel
# runs, which waits for each row's sum before it starts the next; 32768 rows of 131072, where
# the fixed-length kernel keeps two rows in flight; the same kernel in fp32 (16384 rows of
# 131072), and QuACK's fp32 backward at that shape. The DRAM bytes say whether a kernel moves
# more than the byte model; the stall reasons say what its warps wait on instead.

# %% [markdown] lang="es"
# ## 5. Perfilar: dónde pierde tiempo el backward de filas largas
#
# Los backwards en CUDA leen x y dy una vez y escriben dx una vez sea cual sea la longitud de la
# fila, y aun así la fracción del techo del kernel de cluster baja a medida que las filas
# crecen. Nsight Compute sobre una llamada al backward (dx y dweight) de `cuda:3` en las filas
# más largas, repartidas en un cluster: en bf16, 32768 filas de 131064 elementos, una longitud
# para la que no está hecho el kernel de longitud fija, así que corre el kernel de cluster, que
# espera la suma de cada fila antes de empezar la siguiente; 32768 filas de 131072, donde el
# kernel de longitud fija mantiene dos filas en vuelo; el mismo kernel en fp32 (16384 filas de
# 131072), y el backward fp32 de QuACK en esa forma. Los bytes de DRAM dicen si un kernel mueve
# más de lo que dice el modelo de bytes; las causas de espera (stalls), en qué esperan sus warps
# en su lugar.

# %%
try:
    import_peer("quack", "quack-kernels")
    HAVE_QUACK = True
except PeerUnavailable as exc:  # a learner without QuACK: ours only
    print(f"[rmsnorm] QuACK's backward profiles skipped: {exc}")
    HAVE_QUACK = False
BWD_PROFILES = [
    ("cuda:3", 32768, 131064, torch.bfloat16),
    ("cuda:3", 32768, 131072, torch.bfloat16),
    ("cuda:3", 16384, 131072, torch.float32),
    *([("quack", 16384, 131072, torch.float32)] if HAVE_QUACK else []),
]
_free()
lab.profile_many([ncu_case(impl, m, n, dtype, "bwd") for impl, m, n, dtype in BWD_PROFILES])

# %% [markdown] lang="en"
# The gap to a peer that the backward had longest: QuACK's fp32 backward was ahead of Triton's,
# ours from 4096 to 16384 elements until the fixed-length CUDA kernel (`rmsnorm_bwd_tile`,
# `cuda:3`'s backward for fp32 rows of 4096 to 16384 elements, one block per row) was written to
# its instruction count. The same counters for one backward call of Triton's kernel, of that
# CUDA kernel and of QuACK's, at 16384 x 8192 in fp32, say how each spends its time.

# %% [markdown] lang="es"
# La distancia a un rival que más le duró al backward: el backward de QuACK en fp32 iba por
# delante del de Triton, el nuestro de 4096 a 16384 elementos hasta que se escribió el kernel
# CUDA de longitud fija (`rmsnorm_bwd_tile`, el backward de `cuda:3` con filas fp32 de 4096 a
# 16384 elementos) con su número de instrucciones como objetivo. Los mismos contadores
# para una llamada al backward del kernel de Triton, de ese kernel CUDA y del de QuACK, en
# 16384 x 8192 en fp32, dicen en qué gasta su tiempo cada uno.

# %%
M_PEER, N_PEER = 16384, 8192
_free()
lab.profile_many(
    [
        ncu_case(impl, M_PEER, N_PEER, torch.float32, "bwd")
        for impl in ["triton:2", "cuda:3", *(["quack"] if HAVE_QUACK else [])]
    ]
)

# %% [markdown] lang="en"
# ## 6. Profile: the gaps left to QuACK
#
# Four places where the last runs left ours close to QuACK and a profile would say more than the
# timings. The forward at 32768 x 32768 and 32768 x 65536 bf16, the two rows where QuACK's forward
# stayed ahead of ours with their spreads apart in some runs, until rung 5 wrote y with plain
# stores: the faster of rungs 4 and 5 there in the runs before (rung 4 at 64 KB rows, rung 5 at
# 128 KB) beside QuACK, the same bytes from each.
# The forward at 32768 x 131072 bf16, where rung 4 (`cuda:4`, each block's slice of the row in
# registers over a cluster) is a little behind QuACK's forward, which stages its slice in shared
# memory: the same bytes, so the question is what its warps wait on. The forward at 16384 x 131072
# fp32, where rung 6 (QuACK's order of steps in CUDA C) is ahead of QuACK in the short timing and
# level with it in the two-second loop, where it spends more energy per call: rung 6, rung 4 and
# QuACK side by side. And the short-row backward at 32768 x 1024 bf16, where `cuda:3` runs the ring
# kernel (a warp per row, its next rows on their way through shared memory) and sits at the edge of
# 85 % of the ceiling, above it in some runs and just under in others: how busy its DRAM is,
# against QuACK's backward at the same shape.

# %% [markdown] lang="es"
# ## 6. Perfilar: las distancias que quedan con QuACK
#
# Cuatro sitios donde las últimas ejecuciones dejaron lo nuestro cerca de QuACK y un perfil diría
# más que los tiempos. El forward en 32768 x 32768 y 32768 x 65536 bf16, las dos filas donde el
# forward de QuACK siguió por delante del nuestro con las dispersiones separadas en algunas
# ejecuciones, hasta que el peldaño 5 pasó a escribir y con stores normales: el más rápido de
# los peldaños 4 y 5 allí en las ejecuciones anteriores (el 4 con filas de 64 KB, el 5 con las
# de 128 KB) junto a QuACK, con los mismos bytes en cada pareja. El
# forward en 32768 x 131072 bf16, donde el peldaño 4 (`cuda:4`, el trozo de la fila de cada bloque
# en registros sobre un cluster) va un poco por detrás del forward de QuACK, que deja su trozo en
# memoria compartida: los mismos bytes, así que la pregunta es en qué esperan sus warps. El forward
# en 16384 x 131072 fp32, donde el peldaño 6 (el orden de pasos de QuACK en CUDA C) va por delante
# de QuACK en la medida corta y empata con él en el bucle de dos segundos, donde gasta más energía
# por llamada: el peldaño 6, el 4 y QuACK, uno junto a otro. Y el backward de filas cortas en 32768
# x 1024 bf16, donde `cuda:3` ejecuta el kernel del anillo (un warp por fila, con sus filas
# siguientes ya en camino por memoria compartida) y queda en el borde del 85 % del techo, por
# encima en unas ejecuciones y justo por debajo en otras: qué ocupada tiene la DRAM, frente al
# backward de QuACK en la misma forma.

# %%
BF16, FP32 = torch.bfloat16, torch.float32
GAP_PROFILES = [
    ("cuda:4", 32768, 32768, BF16, "fwd"),
    ("cuda:5", 32768, 65536, BF16, "fwd"),
    ("cuda:4", 32768, 131072, BF16, "fwd"),
    ("cuda:5", 32768, 131072, BF16, "fwd"),
    ("cuda:3", 32768, 1024, BF16, "bwd"),
    # rung 6 at the one row it runs, beside rung 4 (the fastest there before it)
    ("cuda:6", 16384, 131072, FP32, "fwd"),
    ("cuda:4", 16384, 131072, FP32, "fwd"),
    *(
        [
            ("quack", 32768, 32768, BF16, "fwd"),
            ("quack", 32768, 65536, BF16, "fwd"),
            ("quack", 32768, 131072, BF16, "fwd"),
            ("quack", 32768, 1024, BF16, "bwd"),
            ("quack", 16384, 131072, FP32, "fwd"),
        ]
        if HAVE_QUACK
        else []
    ),
]
_free()
lab.profile_many([ncu_case(*case) for case in GAP_PROFILES])

# %% [markdown] lang="en"
# One program per long row. `triton:2` holds three long rows whole, one program each (the
# launch table's 32768-element rows in both dtypes and its 65536-element bf16 rows): fast at
# 32768 fp32, where it is level with or ahead of the cluster rungs, and further behind them at
# 32768 bf16. One forward call of each, and of rung 5 at 16384 x 32768 fp32 beside it, says
# what the compiler made of a row that size (registers a thread, and the local-memory traffic
# that counts what it spilled) and what the warps wait on.

# %% [markdown] lang="es"
# Un programa por fila larga. `triton:2` guarda enteras tres filas largas, un programa cada una
# (las de 32768 elementos de la tabla de lanzamiento en los dos dtypes y las de 65536 en bf16):
# rápido con 32768 en fp32, donde empata o gana a los peldaños con clusters, y más lejos de
# ellos con 32768 en bf16. Una llamada al forward de cada una, y la del peldaño 5 en 16384 x
# 32768 fp32 a su lado, dicen qué hizo el compilador con una fila de ese tamaño (registros por
# hilo, y el tráfico de memoria local, que cuenta lo que desbordó) y en qué esperan los warps.

# %%
WHOLE_ROW_PROFILES = [
    ("triton:2", 16384, 32768, FP32),
    ("cuda:5", 16384, 32768, FP32),
    ("triton:2", 32768, 32768, BF16),
    ("triton:2", 32768, 65536, BF16),
]
_free()
lab.profile_many([ncu_case(*case) for case in WHOLE_ROW_PROFILES])

# %%
lab.save()
