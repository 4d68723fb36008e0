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
#     op: softmax
#     page: phase-24/lab/02-tuned-kernel
# ---

# %% [markdown] lang="en"
# # Lab 01 — softmax: from one thread per row to the speed of light
#
# The runnable half of the softmax labs (the naive kernel, the tuned kernel, and the fused
# Triton kernel of checkpoint C3a). It checks every softmax kernel of `minikernel` against an
# fp64 reference, then, on a GPU, times each rung of the CUDA C ladder, both Triton kernels and
# the peers (PyTorch eager, `torch.compile`, Liger-Kernel, QuACK where installed) over two
# sweeps: the batch size B at V = 600 columns, and the row length N from 256 to 262144. It
# profiles the best CUDA C and Triton kernels and PyTorch with Nsight Compute and writes
# `labs/results/<your-gpu>/softmax.json`, with the lab's `manifest.json` inside it.
# `nox -s labs -- softmax` runs exactly this file.
#
# Without a GPU it runs the Triton kernels in Triton's interpreter and NumPy, checks them, and
# stops before timing.

# %% [markdown] lang="es"
# # Lab 01 — softmax: de un hilo por fila a la velocidad de la luz
#
# La parte ejecutable de los labs de softmax (el kernel ingenuo, el kernel afinado y el kernel
# fusionado de Triton del checkpoint C3a). Comprueba cada kernel de softmax de `minikernel`
# contra una referencia en fp64 y después, si hay GPU, cronometra cada peldaño de la escalera
# de CUDA C, los dos kernels de Triton y los rivales (PyTorch eager, `torch.compile`,
# Liger-Kernel y QuACK si está instalado) en dos barridos: el tamaño de lote B con V = 600
# columnas, y la longitud de fila N de 256 a 262144. Perfila con Nsight Compute el mejor kernel
# de CUDA C, el mejor de Triton y PyTorch, y escribe `labs/results/<tu-gpu>/softmax.json`, con
# el `manifest.json` del lab dentro. `nox -s labs -- softmax` ejecuta exactamente este fichero.
#
# Sin GPU ejecuta los kernels de Triton en su intérprete y NumPy, los comprueba y se detiene
# antes de medir.

# %%
import importlib.metadata
import importlib.util
import json
import os
import time

import torch

GPU = torch.cuda.is_available()
if not GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")  # must be set before Triton is imported

from minikernel.kernels import softmax as sm
from minikernel.kernels.softmax import triton_kernels as tk1
from minikernel.testing import run_checked

DEVICE = "cuda" if GPU else "cpu"
SEED = 42
T0 = time.perf_counter()
SECTIONS: dict[str, float] = {}


def section_done(name: str) -> None:
    """Wall-clock seconds each part of the lab took, printed at the end and kept in the results."""
    SECTIONS[name] = round(time.perf_counter() - T0 - sum(SECTIONS.values()), 1)
    print(f"[softmax] {name}: {SECTIONS[name]} s", flush=True)


# %% [markdown] lang="en"
# ## 1. Correct first
#
# Every implementation, on shapes chosen to break a softmax kernel: a row shorter than one
# 16-byte vector (3 x 5), the seed's B = 512, V = 600, odd rows and columns whose starts are not
# 16-byte aligned (1823 x 781), and a row longer than shared memory and registers
# (4 x 131079). Then rows of -inf, +inf and NaN, which must come out exactly as in
# `torch.softmax`. A rung that cannot hold a shape by design says so (`UnsupportedShape`).

# %% [markdown] lang="es"
# ## 1. Primero, correcto
#
# Cada implementación, con formas elegidas para romper un kernel de softmax: una fila más corta
# que un vector de 16 bytes (3 x 5), el punto de la semilla B = 512, V = 600, filas y columnas
# impares cuyos comienzos no están alineados a 16 bytes (1823 x 781) y una fila más larga que
# la memoria compartida y que los registros (4 x 131079). Después, filas de -inf, +inf y NaN,
# que deben salir exactamente como en `torch.softmax`. Un peldaño que por diseño no puede con
# una forma lo dice (`UnsupportedShape`).

# %%
if GPU:
    CHECKS = [
        ((3, 5), (torch.float32, torch.bfloat16)),
        ((512, 600), (torch.float32, torch.bfloat16)),
        ((1823, 781), (torch.float32, torch.float16, torch.bfloat16)),
        ((4, 131079), (torch.float32, torch.bfloat16)),
    ]
    IMPLS = [*sm.VARIANTS, "numpy"]
else:  # the interpreter runs one program at a time: few rows
    CHECKS = [
        ((3, 5), (torch.float32, torch.float16)),
        ((37, 781), (torch.float32, torch.float16)),
        ((4, 4097), (torch.float32,)),
        ((2, 40000), (torch.float32,)),
    ]
    IMPLS = ["triton:1", "triton:2", "numpy"]


def check(impl: str, x: torch.Tensor) -> str:
    m, n = x.shape
    if impl != "numpy" and sm.supports(impl, m, n, x.dtype) is not None:
        return "refused"
    xin = x.cpu() if impl == "numpy" else x
    run_checked(
        lambda t, out: sm.softmax(t, impl=impl, out=out),
        [xin],
        sm.reference(xin),
        tolerances=sm.tolerances(impl, n),
        name=impl,
    ).raise_if_failed()
    return "ok"


refused = []
for (m, n), dtypes in CHECKS:
    for dtype in dtypes:
        x = sm.make_inputs(m, n, dtype, DEVICE, seed=n)
        for impl in IMPLS:
            if check(impl, x) == "refused":
                refused.append(f"{impl} {m}x{n}")

inf, nan = float("inf"), float("nan")
for n in (37, 40000):
    x = sm.make_inputs(5, n, torch.float32, "cpu", seed=n)
    x[0], x[1, n // 2], x[2, -1], x[3, : n // 2] = -inf, inf, nan, -inf
    want = torch.isnan(torch.softmax(x, dim=-1))
    x = x.to(DEVICE)
    for impl in IMPLS:
        if check(impl, x) == "ok":
            got = sm.softmax(x.cpu() if impl == "numpy" else x, impl=impl)
            assert torch.equal(torch.isnan(got.cpu()), want), impl
print(f"checked {IMPLS}: all correct; refused by design: {refused}")
section_done("checks")

# %% [markdown] lang="en"
# ## 2. Predict, then measure
#
# Softmax reads x once and writes y once: 2 x M x N x (bytes per element), and about five
# floating-point operations per element, far too few to keep the GPU's arithmetic busy. So the
# best any kernel can do is move those bytes at the speed of a device-to-device copy, which
# `Lab` measures first, in this process. The prediction for every rung is in the header of
# `softmax.cu`; here is what the copy ceiling allows at the two reference shapes.
#
# Timing: the median of many calls with L2 flushed between them. A case that moves less than
# 64 MB is launch-bound, so for those every implementation, ours and the peers alike, is timed
# by replaying a CUDA graph. The naive rungs are skipped where one call would take more than
# fifty milliseconds.

# %% [markdown] lang="es"
# ## 2. Predecir y después medir
#
# Softmax lee x una vez y escribe y una vez: 2 x M x N x (bytes por elemento), y hace unas
# cinco operaciones de coma flotante por elemento, muy pocas para ocupar la aritmética de la
# GPU. Así que lo mejor que puede hacer un kernel es mover esos bytes a la velocidad de una
# copia de dispositivo a dispositivo, que `Lab` mide primero, en este mismo proceso. La
# predicción de cada peldaño está en la cabecera de `softmax.cu`; aquí está lo que permite el
# techo de copia en las dos formas de referencia.
#
# Cronometraje: la mediana de muchas llamadas, vaciando la L2 entre ellas. Un caso que mueve
# menos de 64 MB está limitado por el lanzamiento, así que en esos casos todas las
# implementaciones, las nuestras y las rivales, se cronometran reproduciendo un CUDA graph. Los
# peldaños ingenuos se omiten donde una sola llamada tardaría más de cincuenta milisegundos.

# %%
if not GPU:
    print("No CUDA GPU: the checks above ran in Triton's interpreter; timing needs a GPU.")
    raise SystemExit(2)  # 2 = "no GPU" for `nox -s labs`; labs/results/ is left untouched

from minikernel.bench.lab import Lab

lab = Lab("softmax", sm.VARIANTS, lab_file="labs/01_softmax.py")
COPY = lab.ceilings["copy_GBps"]
for m, n, dtype in ((512, 600, torch.float32), (32768, 4096, torch.bfloat16)):
    nbytes = sm.bytes_moved(m, n, dtype)
    print(
        f"[softmax] {m} x {n} {str(dtype)[6:]}: {nbytes / 1e6:.1f} MB, "
        f"{nbytes / COPY / 1e3:.2f} us at the copy ceiling ({COPY:.0f} GB/s)"
    )

GRAPH_BELOW_BYTES = 64 << 20
SLOW_LIMIT_MS = 50.0
SMS = torch.cuda.get_device_properties(0).multi_processor_count
HAVE_LIGER = importlib.util.find_spec("liger_kernel") is not None
try:
    import quack.softmax  # noqa: F401

    HAVE_QUACK = True
except Exception:  # not installed, or installed without its CUTLASS DSL: skip it silently
    HAVE_QUACK = False
PEERS = ["torch:eager", "torch:compile"] + ["liger"] * HAVE_LIGER + ["quack"] * HAVE_QUACK
OURS = list(sm.VARIANTS)
# In the N sweep, the long rows also run back to back for two seconds with the GPU's energy
# counter read (loop_us, loop_power_w, energy_mJ; minikernel.bench.energy): a side probe on the
# H200 found these memory-bound calls drawing the board to its power limit, where the time a
# kernel keeps is set by its energy per call. The rungs that lead there, and QuACK. Defined
# before the B sweep, whose calls to measure_case read them too.
ENERGY_AT = (65536, 131072)
ENERGY_IMPLS = ("cuda:12", "cuda:14", "cuda:15", "cuda:16", "triton:2", "quack")


def predicted_naive_ms(impl: str, m: int, n: int) -> float:
    """A generous guess at one call of the naive rungs, to avoid even trying hopeless cases.
    cuda:1: each thread walks its row three times, ~100 ns per element, one wave of threads
    per 2048 x SMs rows. cuda:2: thread 0 walks the row twice at ~5 ns per element, one wave
    per two 1024-thread blocks per SM."""
    if impl == "cuda:1":
        return 3 * n * 100e-6 * -(-m // (2048 * SMS))
    return 2 * n * 5e-6 * -(-m // (2 * SMS))


def too_slow(impl: str, run, m: int, n: int) -> bool:  # type: ignore[no-untyped-def]
    """True for a naive rung whose one (already warm) call takes over SLOW_LIMIT_MS."""
    if impl not in ("cuda:1", "cuda:2"):
        return False
    if predicted_naive_ms(impl, m, n) > 10 * SLOW_LIMIT_MS:
        return True
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    run()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) > SLOW_LIMIT_MS


def measure_case(m: int, n: int, dtype: torch.dtype, impls: list[str], **extra) -> None:  # type: ignore[no-untyped-def]
    """Time every impl on one seeded (m, n) input; the error is checked on a few rows."""
    x = sm.make_inputs(m, n, dtype, "cuda", seed=SEED)
    nbytes = sm.bytes_moved(m, n, dtype)
    graph = nbytes < GRAPH_BELOW_BYTES  # the same method for every impl of this case
    rows = sorted({0, 1 % m, m // 2, m - 1})
    ref = sm.reference(x[rows])
    scale = float(ref.abs().max())
    for impl in impls:
        if impl in sm.VARIANTS and sm.supports(impl, m, n, dtype) is not None:
            continue  # the rung cannot hold this row by design
        try:
            run = sm.make_runner(impl, [m, n], dtype, inputs=x)
            y = run()
            torch.cuda.synchronize()
        except Exception as exc:  # a peer that refuses the shape (Liger past 65536 columns)
            print(f"[softmax] {impl} skipped at {m} x {n}: {type(exc).__name__}: {exc}"[:200])
            continue
        err = float((y[rows].double() - ref).abs().max()) / scale
        del y
        # The launch config triton:1's autotuner chose for this case (run() above tuned it).
        tuned = {"config": tk1.last_kernel1_config()} if impl == "triton:1" else {}
        if too_slow(impl, run, m, n):
            print(f"[softmax] {impl} skipped at {m} x {n}: over {SLOW_LIMIT_MS:.0f} ms per call")
            continue
        lab.measure(
            impl,
            run,
            shape=[m, n],
            dtype=dtype,
            bytes=nbytes,
            max_rel_err=err,
            graph=graph,
            energy=extra.get("sweep") == "N" and n in ENERGY_AT and impl in ENERGY_IMPLS,
            **extra,
            **tuned,
        )
        del run
    del x
    torch.cuda.empty_cache()


# %% [markdown] lang="en"
# ## 3. The batch sweep: B rows of V = 600 (fp32)
#
# The seed's question: at B = 512, V = 600 the whole input is 1.2 MB, a few microseconds of
# work at most, so the launch and the first and last wave of blocks dominate. As B grows the
# same kernels become bandwidth-bound, and the ladder's later rungs pull away. B grows 8x per
# step (plus the seed's 512): every case times about fifteen implementations, and the whole lab
# has to fit in a couple of minutes.

# %% [markdown] lang="es"
# ## 3. El barrido de lote: B filas de V = 600 (fp32)
#
# La pregunta de la semilla: con B = 512 y V = 600 la entrada entera ocupa 1,2 MB, unos pocos
# microsegundos de trabajo como mucho, así que dominan el lanzamiento y la primera y la última
# oleada de bloques. Al crecer B los mismos kernels pasan a estar limitados por el ancho de
# banda, y los últimos peldaños de la escalera se despegan. B crece 8 veces por paso (más el
# 512 de la semilla): cada caso cronometra unas quince implementaciones, y el lab entero tiene
# que caber en un par de minutos.

# %%
B_SWEEP = [1, 8, 64, 512, 4096, 65536]
for b in B_SWEEP:
    measure_case(b, 600, torch.float32, OURS + PEERS, sweep="B")
section_done("B sweep")

# %% [markdown] lang="en"
# ## 4. The row-length sweep: N from 256 to 262144
#
# M = 32768 rows in bf16 and M = 8192 rows in fp32, from rows a warp holds to rows no block can
# hold, where the online recurrence (cuda:8, triton:2) and thread-block clusters (cuda:9) take
# over. The odd lengths (600, 781, 4097) leave rows that do not start on a 16-byte boundary. At
# 65536 and 131072 columns the leading rungs and QuACK also run in a two-second loop, for the
# energy of one call at the board's power limit (`energy_mJ`; E3 explains why it matters).

# %% [markdown] lang="es"
# ## 4. El barrido de longitud de fila: N de 256 a 262144
#
# M = 32768 filas en bf16 y M = 8192 filas en fp32, desde filas que caben en un warp hasta
# filas que no caben en ningún bloque, donde toman el relevo la recurrencia online (cuda:8,
# triton:2) y los clusters de bloques (cuda:9). Las longitudes impares (600, 781, 4097) dejan
# filas que no empiezan en una frontera de 16 bytes. Con 65536 y 131072 columnas, los peldaños
# que van en cabeza y QuACK se ejecutan además en un bucle de dos segundos, para medir la
# energía de una llamada en el límite de potencia de la placa (`energy_mJ`; E3 explica por qué
# importa).

# %%
N_SWEEPS = [
    (32768, torch.bfloat16, [256, 600, 781, 4096, 4097, 16384, 65536, 131072, 262144]),
    (8192, torch.float32, [256, 4096, 16384, 65536, 131072, 262144]),
]
for m, dtype, ns in N_SWEEPS:
    for n in ns:
        measure_case(m, n, dtype, OURS + PEERS, sweep="N")
section_done("N sweep")

# %% [markdown] lang="en"
# ### Close calls
#
# Where the fastest of ours and the fastest peer came out within 1 % of each other in either
# sweep, one timing window each cannot say which is faster: the same two kernels have swapped
# places from one run to the next. Those cases are timed again, the two alone, in eight rounds,
# the one that goes first alternating (`Lab.duel`, `minikernel.bench.duel`): one of them is
# ahead only if it wins all eight rounds, a count a coin toss would give 1 time in 128 either
# way; otherwise the two are level.

# %% [markdown] lang="es"
# ### Resultados ajustados
#
# Donde el más rápido de los nuestros y el rival más rápido han quedado a menos de un 1 % el
# uno del otro en cualquiera de los dos barridos, una sola ventana de medida por cabeza no
# basta para decir cuál es más rápido: los mismos dos kernels se han cambiado el puesto de una
# ejecución a otra. Esos casos se miden otra vez, los dos solos, en ocho rondas, alternando
# cuál va primero (`Lab.duel`, `minikernel.bench.duel`): uno va por delante solo si gana las
# ocho rondas, un resultado que lanzando una moneda saldría 1 vez de cada 128 a favor de uno u
# otro; si no, quedan empatados.

# %%
for case, ours, peer in lab.close_calls(lambda i: i in OURS, lambda i: i in PEERS):
    m, n = case["shape"]
    x = sm.make_inputs(m, n, getattr(torch, case["dtype"]), "cuda", seed=SEED)
    runs = {i: sm.make_runner(i, [m, n], x.dtype, inputs=x) for i in (ours, peer)}
    lab.duel(runs, **case)
    del runs, x
    torch.cuda.empty_cache()
section_done("close calls")

# %% [markdown] lang="en"
# ## 5. Profile
#
# Nsight Compute on one call at 32768 x 4096 bf16 (537 MB moved) of the fastest CUDA C rung,
# the fastest Triton kernel and PyTorch eager: DRAM throughput, DRAM bytes read and written
# against the byte model, occupancy, and the dominant stall reasons. A memory-bound kernel
# should show DRAM bytes close to the model and stalls on memory, not on the arithmetic.
#
# Then the long rows, where the best kernels stay furthest from the ceiling: the row-once cluster
# rung (cuda:10) and the looping rung (cuda:8, which reads part of each row twice) at 32768 x
# 65536 bf16, the prefetching rung (cuda:12) at 8192 x 65536 fp32, where its DRAM bytes
# tell whether the rows it asked L2 for were still there when read (the model's bytes) or
# were read twice, QuACK at 32768 x 65536 bf16, whose instructions per byte set beside
# cuda:10's say how much leaner its inner loop is, and the register-slice rung (cuda:14) at the
# same shape, which holds QuACK's slice shape in CUDA C; the short-row rung (cuda:15) at
# 32768 x 600 bf16, a case of 79 MB where the start and end of the kernel weigh on the time; and
# rung 14 trimmed (cuda:16) on the slices of its own at 32768 x 65536 bf16 and 8192 x 65536
# fp32, beside rung 14's and QuACK's instructions in bf16 and rung 12's in fp32. Each is
# skipped if it was already profiled above at the same shape (one excerpt per implementation
# and shape keeps every page's reference to an excerpt unambiguous).

# %% [markdown] lang="es"
# ## 5. Perfilar
#
# Nsight Compute sobre una llamada con 32768 x 4096 bf16 (537 MB movidos) del peldaño de CUDA C
# más rápido, del kernel de Triton más rápido y de PyTorch eager: throughput de DRAM, bytes de
# DRAM leídos y escritos frente al modelo de bytes, ocupación y los motivos de stall
# dominantes. Un kernel limitado por memoria debería mostrar bytes de DRAM cercanos al modelo y
# stalls por memoria, no por la aritmética.
#
# Después, las filas largas, donde los mejores kernels quedan más lejos del techo: el peldaño de
# clusters que lee cada fila una vez (cuda:10) y el que recorre la fila en bucle (cuda:8, que lee
# parte de cada fila dos veces) con 32768 x 65536 bf16, y el peldaño que precarga en L2
# (cuda:12) con 8192 x 65536 fp32, donde sus bytes de DRAM dicen si las filas que pidió a L2
# seguían allí al leerlas (los bytes del modelo) o se leyeron dos veces, y QuACK con 32768 x
# 65536 bf16, cuyas instrucciones por byte, junto a las de cuda:10, dicen cuánto más ligero es
# su bucle interno, y el peldaño con el trozo en registros (cuda:14) con la misma forma, que
# reproduce en CUDA C la forma de trozo de QuACK; el peldaño de filas cortas (cuda:15) con
# 32768 x 600 bf16, un caso de 79 MB en el que el arranque y el final del kernel pesan en el
# tiempo; y el peldaño 14 recortado (cuda:16) con sus propios trozos en 32768 x 65536 bf16 y
# 8192 x 65536 fp32, junto a las instrucciones del 14 y de QuACK en bf16 y a las del 12 en
# fp32. Cada uno se omite si ya se perfiló arriba con la misma forma (un extracto por
# implementación y forma mantiene sin ambigüedad cada referencia de las páginas a un extracto).

# %%
PROFILE_SHAPE, PROFILE_DTYPE = [32768, 4096], torch.bfloat16


def runs_own_kernel(impl: str, shape: list[int], dtype: torch.dtype) -> bool:
    """Whether a CUDA C rung runs a kernel of its own at this shape, rather than handing it to a
    lower rung's (cuda:12 runs rung 11's kernels on 16-bit rows, for one): a hand-off times the
    same kernel under a second name, and which of the two names comes out faster is noise."""
    if not impl.startswith("cuda:"):
        return True
    from minikernel.kernels.softmax import cuda_kernels as ck

    rung = int(impl.split(":")[1])
    return ck.plan(rung, *shape, dtype, ck.device_facts(0)).rung == rung


def fastest(prefix: str, shape: list[int], dtype: torch.dtype) -> str | None:
    recs = [
        r
        for r in lab.records
        if r["impl"].startswith(prefix)
        and r["shape"] == shape
        and r["dtype"] == str(dtype)[6:]
        and runs_own_kernel(r["impl"], shape, dtype)
    ]
    return min(recs, key=lambda r: r["median_us"])["impl"] if recs else None


best_cuda = fastest("cuda:", PROFILE_SHAPE, PROFILE_DTYPE)
best_triton = fastest("triton:", PROFILE_SHAPE, PROFILE_DTYPE)
model = sm.bytes_moved(*PROFILE_SHAPE, PROFILE_DTYPE)
profiles = {}
for impl in (best_cuda, best_triton, "torch:eager"):
    if impl is not None:
        pin = {}
        if impl == "triton:1":  # profile the launch the autotuner chose for the timing above
            timed = [r for r in lab.records if r["impl"] == impl and r["shape"] == PROFILE_SHAPE]
            config = next((r["config"] for r in timed if r["dtype"] == "bfloat16"), None)
            if config is not None:
                pin = {"env": {tk1.PIN_ENV: json.dumps(config)}, "config": config}
        profiles[impl] = lab.profile(impl, PROFILE_SHAPE, "bfloat16", model_bytes=model, **pin)
LONG_CASES = [
    ("cuda:10", [32768, 65536], torch.bfloat16),
    ("cuda:8", [32768, 65536], torch.bfloat16),
    ("cuda:12", [8192, 65536], torch.float32),
    ("quack", [32768, 65536], torch.bfloat16),
    ("cuda:14", [32768, 65536], torch.bfloat16),
    ("cuda:15", [32768, 600], torch.bfloat16),
    ("cuda:16", [32768, 65536], torch.bfloat16),
    ("cuda:16", [8192, 65536], torch.float32),
]
# extra excerpts, in one ncu process: if ncu fails on one, the lab's measurements still get saved
lab.profile_many(
    [
        {
            "impl": impl,
            "shape": shape,
            "dtype": str(dtype)[6:],
            "model_bytes": sm.bytes_moved(*shape, dtype),
        }
        for impl, shape, dtype in LONG_CASES
        if not (impl in profiles and shape == PROFILE_SHAPE and dtype == PROFILE_DTYPE)
    ],
    skip_failed=True,
)
section_done("ncu")

# %% [markdown] lang="en"
# ## 6. The manifest, and save
#
# The seed's `manifest.json`, every field taken from this run, at its point B = 512, V = 600:
# the naive rung (cuda:1), the shared-memory rung (cuda:2) and the fused rung with parallel
# reductions and online softmax (cuda:4) against `torch.softmax`. The fraction of peak is of
# the copy ceiling measured above.

# %% [markdown] lang="es"
# ## 6. El manifiesto, y guardar
#
# El `manifest.json` de la semilla, con cada campo sacado de esta ejecución, en su punto B =
# 512, V = 600: el peldaño ingenuo (cuda:1), el de memoria compartida (cuda:2) y el fusionado
# con reducciones paralelas y softmax online (cuda:4) frente a `torch.softmax`. La fracción del
# pico es del techo de copia medido arriba.

# %%
SEED_POINT = [512, 600]


def at_seed_point(impl: str) -> dict | None:
    for r in lab.records:
        if r["impl"] == impl and r["shape"] == SEED_POINT and r["dtype"] == "float32":
            return r
    return None


def kernel_entry(impl: str) -> dict:
    r = at_seed_point(impl)
    if r is None:
        return {"impl": impl, "median_us_at_B512": None, "fraction_of_peak": None}
    return {
        "impl": impl,
        "median_us_at_B512": r["median_us"],
        "fraction_of_peak": r["frac_of_ceiling"],
    }


def version_of(*packages: str) -> str | None:
    for p in packages:
        try:
            return importlib.metadata.version(p)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


eager = at_seed_point("torch:eager")
fused = at_seed_point("cuda:4")
ours_at_seed = [at_seed_point(k) for k in OURS]
best = min((r for r in ours_at_seed if r), key=lambda r: r["median_us"], default=None)
ratio = fused["median_us"] / eager["median_us"] if fused and eager else None
stall_source = profiles.get(best_cuda) if best_cuda else None
ncu_versions = [p["ncu_version"] for p in profiles.values() if p]
cupy = version_of("cupy", "cupy-cuda12x", "cupy-cuda13x")
lab.extra["manifest"] = {
    "experiment": "24-tuned-kernel",
    "date": lab.env["date"][:10],
    "seed": SEED,
    "gpu": {
        "model": lab.env["gpu"],
        "compute_capability": lab.env["cc"],
        "hbm_peak_gbs": COPY,
        "hbm_peak_source": "device-to-device copy measured in this run, not the datasheet",
    },
    "versions": {
        "python": lab.env["python"],
        "cupy": cupy
        or f"not used: CUDA C compiled with NVRTC (cuda-bindings {version_of('cuda-bindings')})",
        "torch": lab.env["torch"],
        "triton": lab.env["triton"],
        "ncu": ncu_versions[0] if ncu_versions else "not found",
    },
    "kernels": {
        "naive": kernel_entry("cuda:1"),
        "smem": kernel_entry("cuda:2"),
        "fused": kernel_entry("cuda:4"),
        "best": kernel_entry(best["impl"]) if best else None,
        "F_softmax_ref": {"impl": "torch:eager", "median_us_at_B512": eager and eager["median_us"]},
    },
    "results_summary": {
        "fused_vs_F_softmax_ratio": None if ratio is None else round(ratio, 3),
        "best_vs_F_softmax_ratio": round(best["median_us"] / eager["median_us"], 3)
        if eager and best
        else None,
        "dod_30pct_met": None if ratio is None else ratio <= 3.0,
        "dominant_stall_reason": stall_source["metrics"]["top_stalls"][0]["reason"]
        if stall_source and stall_source["metrics"]["top_stalls"]
        else "ncu not available",
        "dominant_stall_kernel": best_cuda,
    },
}
print(lab.extra["manifest"])
section_done("manifest")
lab.extra["lab_seconds"] = SECTIONS
lab.save()
print(f"[softmax] whole lab: {time.perf_counter() - T0:.0f} s {SECTIONS}")
