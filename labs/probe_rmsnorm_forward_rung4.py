"""What holds RMSNorm's rung 4 (cuda:4) behind QuACK on long rows: the weights, or the block shape.

    python labs/probe_rmsnorm_forward_rung4.py              # the lab's long rows, 5 rounds
    python labs/probe_rmsnorm_forward_rung4.py --rounds 3 --n 131072 --variants big big_wb

Rung 4 (rmsnorm4 in rmsnorm.cu) loads its slice of x into registers, sums the squares, exchanges
the sum over its cluster, and only then loads its slice of the weights (an L1 or L2 hit) before
it writes y. QuACK's forward loads the weights before the reduction, and holds twice as many
16-byte vectors per thread (256 threads x 8 where rung 4 has 512 x 4). This probe builds
variants of rmsnorm.cu by editing its text:

    wpf      the weights prefetched into L1 (prefetch.global.L1) right after the x loads
    v8       8 vectors per thread: blocks of 256 threads (32 KB), 512 (64 KB) or 1024 (128 KB)
    v8_wpf   both
    big      the shipped kernel, plus blocks of 1024 threads (64 KB) over clusters of 2 and 4
             for the 16-bit rows and fp32 rows of 256 KB (shipped: 512 threads, 32 KB)
    big_wb   big with plain stores of y (st.global) where the shipped kernel streams them
             (.cs, evict-first), as QuACK's stores are plain
    cg, na, lu, ef
             the loads of x with a cache hint (minikernel.bench.probe.LOAD_HINTS): cached in
             L2 only; read-only with no L1 line and 256-byte L2 fetches; last use; an L2
             policy of evict-first. QuACK's cp.async copies of x do not pass through L1
    cg_wb    cg loads and plain stores: QuACK's caching of x and y
    cap      the shipped kernel with fewer blocks per SM: each block asks for dynamic shared
             memory it does not use, so that only 3 or 2 blocks of 512 threads (1 of 1024) fit
             an SM. QuACK's forward runs 3 blocks of 8 warps at 32768 x 131072 bf16 in Nsight
             Compute, rung 4 runs 4 of 16 and has more of x in flight, yet keeps DRAM less busy
    k3, k3cap
             rung 3's kernel (cuda:3's forward: the slice staged in shared memory with
             cp.async, QuACK's layout) at its own plan, and held to 3 or 4 blocks per SM the
             same way: its smaller blocks fit 6 or 7 to an SM where QuACK's fit 3
    k3w, k3w_wb
             rung 3 with QuACK's order: the weights loaded into registers while the copies of
             x are in flight (rung 3 loads them after the exchange), at its own plan and held
             to 3 or 4 blocks per SM; k3w_wb also writes y with plain stores, as QuACK does
    wreg     the weights loaded into registers with x, before the sum (QuACK loads them
             before it waits for x), at half the blocks per SM to make room

checks each against the shipped kernel's output, and times them with it and QuACK (where it is
installed) in interleaved rounds. The plain stores of big_wb, cg_wb and k3w_wb are __stwb, one
16-byte store per vector; the runs the page reports wrote them as a uint4 assignment, which
compiled to four 32-bit stores per vector (cuobjdump: STG.E where the shipped kernel has
STG.E.EF.128), so those runs timed the split, not the cache policy
(probe_rmsnorm_forward_stores.py times the policy alone). The fused-rmsnorm page (section 6,
rung 4) says what an H200 showed. It prints, it writes nothing: the course's numbers come
from ``nox -s labs``.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import torch

import minikernel.kernels.rmsnorm as rn
from minikernel.bench.probe import (
    LOAD_HINTS,
    add_peer,
    gpu_ceiling,
    probe_parser,
    race,
    report,
    with_load_hint,
    write_variants,
)

SHAPES = [  # (rows, row length, dtype): the lab's rows where rung 4 is ours at its fastest
    (32768, 131072, "bfloat16"),
    (32768, 65536, "bfloat16"),
    (32768, 32768, "bfloat16"),
    (16384, 131072, "float32"),
    (16384, 65536, "float32"),
]
LOADS = """        if (i < s.count) xv[k] = load_vec_plain(xr + static_cast<long long>(i) * V);
    }
"""
PREFETCH = """        if (i < s.count) xv[k] = load_vec_plain(xr + static_cast<long long>(i) * V);
    }
    if (wr) {  // probe: this thread's weights into L1 now; load_weights reads them later
#pragma unroll
        for (int k = 0; k < K; ++k) {
            const int i = tid + k * THREADS;
            if (i < s.count)
                asm volatile("prefetch.global.L1 [%0];" ::"l"(wr + static_cast<long long>(i) * V));
        }
    }
"""
VECS = "constexpr int KERNEL4_VECS = 4;"
# Rung 4's entry macro's bounds (not its comment, nor rung 5's macro: the kernel name follows).
BOUNDS_TAIL = "\\\n        rmsnorm_kernel4_t##THREADS"
BOUNDS = "        __launch_bounds__(THREADS, 2048 / THREADS)" + " " * 45 + BOUNDS_TAIL
BOUNDS_1024 = "        __launch_bounds__(THREADS, 1024 / THREADS)" + " " * 45 + BOUNDS_TAIL
# The entry list of RMSNORM4_WEIGHT: lines of RMSNORM4_ENTRY(..., threads, cluster), continued.
ENTRIES = re.compile(
    r"(?:    RMSNORM4_ENTRY\(SUFFIX, T, W, WSUFFIX, \d+, \d+\) +\\\n)+"
    r"    RMSNORM4_ENTRY\(SUFFIX, T, W, WSUFFIX, \d+, \d+\)\n"
)
# The last two: 1024 threads x 8 vectors (128 KB blocks) over 2 and 4, which softmax's rung 16
# ran fastest on 256 KB fp32 rows on the H200 (labs/probe_softmax_slices.py). At 64 registers
# a thread they compile without spills (56 in 16-bit, 51 in fp32, sm_90); on the H200 they were
# slower than the shipped blocks, and than the other v8 blocks, at every row they cover.
V8_SHAPES = ((256, 2), (256, 4), (256, 8), (256, 16), (512, 2), (512, 4), (512, 8))
V8_SHAPES += ((1024, 2), (1024, 4))
VARIANTS = ("wpf", "v8", "v8_wpf", "big", "big_wb", "cg_wb", "wreg", "cap", "k3", "k3cap")
VARIANTS += ("k3w", "k3w_wb")
VARIANTS += tuple(LOAD_HINTS)


def _indented(body: str, indent: str) -> str:
    """``body`` with ``indent`` before each line but the preprocessor's (#pragma)."""
    lines = body.splitlines(True)
    return "".join(line if line.startswith("#") else indent + line for line in lines)


def weights_into_registers(count: str, w: str, tid: str, indent: str = "    ") -> str:
    """C text that loads a thread's weights for its ``count`` vectors (vector i = ``tid`` +
    k * THREADS, below s.count) from ``w`` into ``uint4 wraw[count][WV]``, raw 16-byte words:
    the wreg and k3w variants load them before the sum."""
    body = f"""constexpr int WV = sizeof(W) / sizeof(T);  // probe: weight words per x vector
uint4 wraw[{count}][WV];
if ({w}) {{
#pragma unroll
    for (int k = 0; k < {count}; ++k) {{
        const int i = {tid} + k * THREADS;
#pragma unroll
        for (int c = 0; c < WV; ++c)
            if (i < s.count)
                wraw[k][c] = __ldg(reinterpret_cast<const uint4*>(
                    {w} + static_cast<long long>(i) * V + c * Vec<W>::N));
    }}
}}
"""
    return _indented(body, indent)


def weights_from_registers(w: str, indent: str) -> str:
    """C text that fills ``float wf[V]`` for vector k from ``wraw[k]`` (1.0 without ``w``)."""
    body = f"""#pragma unroll
for (int c = 0; c < WV; ++c) {{  // probe: the weights from registers
    const Vec<W> wvec = *reinterpret_cast<const Vec<W>*>(&wraw[k][c]);
#pragma unroll
    for (int e = 0; e < Vec<W>::N; ++e)
        wf[c * Vec<W>::N + e] = {w} ? to_float(wvec.v[e]) : 1.0f;
}}
"""
    return _indented(body, indent)


SHIPPED_KERNEL = ("cap", "k3", "k3cap")  # the shipped file, launched another way
# k3w: rung 3's staging (stage_vectors, which copies, waits and then sums) written out, with the
# weights' loads between the copies and the wait; its output loop then takes them from registers.
K3_STAGE = """    float ss = 0.0f;
    stage_vectors<T, THREADS>(xr + first, slice, s.count, [&](const Vec<T>& v) {
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = to_float(v.v[e]);
            ss += f * f;
        }
    });
"""
K3W_STAGE = (
    """    float ss = 0.0f;
    constexpr int KW = 8;  // probe: at most 8 vectors a thread (the plans timed have 8)
    const W* wb = w ? w + first : nullptr;  // probe: this block's weights
    for (int i = threadIdx.x; i < s.count; i += THREADS)
        cp_async16(slice + i, xr + first + static_cast<long long>(i) * V);
"""
    + weights_into_registers("KW", "wb", "threadIdx.x")
    + """    cp_async_wait_all();  // each thread reads back only its own copies
    for (int i = threadIdx.x; i < s.count; i += THREADS) {
        const Vec<T> v = slice[i];
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = to_float(v.v[e]);
            ss += f * f;
        }
    }
"""
)
K3_OUT = (
    (
        "#pragma unroll 2  // the default (4) spills registers in fp32 now that no barrier splits "
        "the code\n"
    )
    + """    for (int i = threadIdx.x; i < s.count; i += THREADS) {
        const long long j = first + static_cast<long long>(i) * V;
        float wf[V];
        load_weights(w, j, wf);
"""
)
K3W_OUT = """#pragma unroll
    for (int k = 0; k < KW; ++k) {  // probe: the weights from registers
        const int i = threadIdx.x + k * THREADS;
        if (i >= s.count) break;
        const long long j = first + static_cast<long long>(i) * V;
        float wf[V];
""" + weights_from_registers("w", "        ")
K3_STORE = "        store_vec(yr + j, out);\n"
K3_PLAIN_STORE = (
    "        __stwb(reinterpret_cast<uint4*>(yr + j), *reinterpret_cast<const uint4*>(&out));"
    "  // probe\n"
)
K3_CAPS = (3, 4)  # blocks per SM for k3cap
SM_SMEM = 233472  # shared memory of an sm_90 SM (228 KB), all of it given to shared memory
CAPS = {512: (3, 2), 1024: (1,)}  # blocks per SM the cap variant allows, by block size


def cap_smem(blocks: int) -> int:
    """Dynamic shared memory a block asks for so that at most ``blocks`` fit an SM (the rest
    of the SM's 228 KB, less 3 KB a block for its static memory and the 1 KB the driver
    reserves per block, is more than one more block can have)."""
    return SM_SMEM // blocks - 3072


X_LOAD = "        if (i < s.count) xv[k] = load_vec_plain(xr + static_cast<long long>(i) * V);\n"
BIG_SHAPES = ((1024, 2), (1024, 4))  # added to the shipped entries in "big"
STORE = "            store_vec(yr + static_cast<long long>(i) * V, out);\n"
PLAIN_STORE = (  # __stwb: one 16-byte store (a uint4 assignment here compiled to four 32-bit ones)
    "            __stwb(reinterpret_cast<uint4*>(yr + static_cast<long long>(i) * V),\n"
    "                   *reinterpret_cast<const uint4*>(&out));  // probe: a plain store\n"
)
# wreg: the weights loaded into registers with x, before the sum (QuACK's order), as raw
# 16-byte words; the blocks drop to half the SM (64 registers a thread) to make room.
W_EARLY = """        if (i < s.count) xv[k] = load_vec_plain(xr + static_cast<long long>(i) * V);
    }
""" + weights_into_registers("K", "wr", "tid")
W_LOAD = "            load_weights(wr, static_cast<long long>(i) * V, wf);\n"
W_FROM_REGS = weights_from_registers("wr", "            ")


def variants(src: str) -> dict[str, str]:
    """The kernel source and the three edited copies. Fails if rmsnorm.cu no longer has the
    lines the edits replace (each exactly once)."""
    for text in (LOADS, VECS, BOUNDS, ENTRIES, STORE, W_LOAD, K3_STAGE, K3_OUT, K3_STORE):
        found = len(text.findall(src)) if isinstance(text, re.Pattern) else src.count(text)
        if found != 1:
            what = text.pattern if isinstance(text, re.Pattern) else text
            raise SystemExit(f"probe_rmsnorm_forward_rung4: rmsnorm.cu changed; update:\n{what}")
    entries = "".join(
        f"    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, {t}, {c}) \\\n" for t, c in V8_SHAPES
    ).rstrip(" \\\n")
    v8 = src.replace(VECS, "constexpr int KERNEL4_VECS = 8;").replace(BOUNDS, BOUNDS_1024)
    v8 = ENTRIES.sub(lambda _: entries + "\n", v8)
    shipped_entries = ENTRIES.search(src).group(0).rstrip("\n")
    more = "".join(
        f" \\\n    RMSNORM4_ENTRY(SUFFIX, T, W, WSUFFIX, {t}, {c})" for t, c in BIG_SHAPES
    )
    big = ENTRIES.sub(lambda _: shipped_entries + more + "\n", src)
    return {
        "shipped": src,
        "wpf": src.replace(LOADS, PREFETCH),
        "v8": v8,
        "v8_wpf": v8.replace(LOADS, PREFETCH),
        "big": big,
        "big_wb": big.replace(STORE, PLAIN_STORE),
        "cg_wb": with_load_hint(src, "cg", [X_LOAD]).replace(STORE, PLAIN_STORE),
        "k3w": src.replace(K3_STAGE, K3W_STAGE).replace(K3_OUT, K3W_OUT),
        "k3w_wb": src.replace(K3_STAGE, K3W_STAGE)
        .replace(K3_OUT, K3W_OUT)
        .replace(K3_STORE, K3_PLAIN_STORE),
        "wreg": src.replace(LOADS, W_EARLY)
        .replace(W_LOAD, W_FROM_REGS)
        .replace(BOUNDS, BOUNDS_1024),
        **{hint: with_load_hint(src, hint, [X_LOAD]) for hint in LOAD_HINTS},
    }


def launches(n: int, dtype: torch.dtype) -> list[tuple[str, str, rn.SlicePlan, int]]:
    """(name, variant, plan, dynamic shared memory) for every launch timed at rows of n
    elements."""
    nvec = n // (16 // torch.empty((), dtype=dtype).element_size())
    shipped = rn.plan4(1, n, dtype, (9, 0))
    out = [
        (f"shipped t{shipped.threads} c{shipped.cluster}", "shipped", shipped, 0),
        (f"wpf t{shipped.threads} c{shipped.cluster}", "wpf", shipped, 0),
    ]
    for threads, cluster in V8_SHAPES:
        if threads * 8 * cluster == nvec:  # blocks of exactly 8 vectors a thread
            plan = rn.SlicePlan(cluster, nvec // cluster, threads)
            out += [(f"{v} t{threads} c{cluster}", v, plan, 0) for v in ("v8", "v8_wpf")]
    out += [
        (f"{v} t{shipped.threads} c{shipped.cluster}", v, shipped, 0)
        for v in ("big_wb", "cg_wb", "wreg")
    ]
    out += [(f"{h} t{shipped.threads} c{shipped.cluster}", h, shipped, 0) for h in LOAD_HINTS]
    out += [
        (f"cap{b} t{shipped.threads} c{shipped.cluster}", "cap", shipped, cap_smem(b))
        for b in CAPS[shipped.threads]
    ]
    k3 = rn.plan3(1, n, dtype, SM_SMEM - 1024, (9, 0))  # the H200's opt-in: 227 KB a block
    if k3 is not None and k3.cluster > 1:
        caps = [b for b in K3_CAPS if b < SM_SMEM // (k3.smem + 2048)]  # fewer than fit anyway
        shape = f"t{k3.threads} c{k3.cluster}"
        out.append((f"k3 {shape}", "k3", k3, k3.smem))
        out += [(f"k3 cap{b} {shape}", "k3cap", k3, cap_smem(b)) for b in caps]
        for v in ("k3w", "k3w_wb"):
            out.append((f"{v} {shape}", v, k3, k3.smem))
            out += [(f"{v} cap{b} {shape}", v, k3, cap_smem(b)) for b in caps]
    for threads, cluster in BIG_SHAPES:
        if threads * 4 * cluster == nvec:  # blocks of exactly 4 vectors a thread
            plan = rn.SlicePlan(cluster, nvec // cluster, threads)
            out += [(f"{v} t{threads} c{cluster}", v, plan, 0) for v in ("big", "big_wb")]
    return out


def probe(
    m: int,
    n: int,
    dtype_name: str,
    files: dict[str, Path],
    rounds: int,
    gbps: float,
    only: list[str] | None = None,
) -> None:
    dtype = getattr(torch, dtype_name)
    x, w = rn.make_inputs(m, n, dtype, "cuda", 1)[:2]
    eps = rn.EPS
    rstd = torch.empty(m, device="cuda", dtype=torch.float32)
    real = rn.CU_FILE

    def launcher(variant: str, plan: rn.SlicePlan, out: torch.Tensor, smem: int = 0):  # type: ignore[no-untyped-def]
        def run() -> torch.Tensor:
            rn.CU_FILE = files["shipped" if variant in SHIPPED_KERNEL else variant]
            rung = 3 if variant.startswith("k3") else 4
            try:
                return rn._launch_slices(rung, plan, x, w, out, eps, rstd, smem)
            finally:
                rn.CU_FILE = real

        return run

    ref = launcher("shipped", rn.plan4(m, n, dtype, (9, 0)), torch.empty_like(x))().clone()
    scale = float(ref.float().abs().max())
    tol = (1e-5 if dtype == torch.float32 else 2**-7) * scale  # the sum's order may differ
    y = torch.empty_like(x)
    cands = {}
    for name, variant, plan, smem in launches(n, dtype):
        if only and variant != "shipped" and variant not in only:
            continue
        got = launcher(variant, plan, torch.empty_like(x), smem)()
        err = float((got.float() - ref.float()).abs().max())
        print(f"  {n} {dtype_name} {name}: max diff {err:.3g} {'ok' if err <= tol else 'WRONG'}")
        if err <= tol:
            cands[name] = launcher(variant, plan, y, smem)
    add_peer(cands, "quack", lambda: rn.make_runner("quack", [m, n], dtype, "fwd", seed=1))
    ideal = rn.fwd_bytes(m, n, dtype, dtype) / (gbps * 1e3)
    report(f"{m} x {n} {dtype_name}", ideal, race(cands, rounds), width=24)


def main() -> None:
    parser = probe_parser(__doc__, (n for _, n, _ in SHAPES))
    parser.add_argument("--variants", nargs="*", choices=VARIANTS, help="which to time")
    args = parser.parse_args()
    gbps = gpu_ceiling("probe_rmsnorm_forward_rung4")
    with tempfile.TemporaryDirectory() as tmp:
        files = write_variants(variants(rn.CU_FILE.read_text()), Path(tmp), "rmsnorm_rung4")
        for m, n, dtype_name in SHAPES:
            if not args.n or n in args.n:
                probe(m, n, dtype_name, files, args.rounds, gbps, args.variants)
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
