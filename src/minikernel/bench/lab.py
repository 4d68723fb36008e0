"""What a lab script uses to measure one op and write its results file.

    lab = Lab("vector_add", VARIANTS)          # needs a GPU; measures env and ceilings first
    lab.measure("cuda:2", run, shape=[n], dtype=torch.float32, bytes=3 * n * 4)
    lab.profile("cuda:2", shape=[n], dtype="float32", model_bytes=3 * n * 4)
    lab.save()                                 # validate, then write atomically

Nothing is written until ``save()``: a lab that fails half-way leaves the previous file as it was.
"""

from __future__ import annotations

import importlib.metadata
import os
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from . import ceilings as _ceilings
from .clocks import ClockSampler
from .duel import DUEL_REP_MS, DUEL_ROUNDS, DUEL_WITHIN, close_call, duel_verdict, run_rounds
from .energy import EnergyCounter, loop_energy
from .env import collect_env, gpu_slug
from .results import RESULTS_DIR, SCHEMA_VERSION, dropped_impls, results_path, write_atomic
from .timing import time_gpu


class NoGPUError(RuntimeError):
    """Raised by Lab() on a machine where PyTorch sees no CUDA GPU."""


PEER_PACKAGES = {
    "torch": "torch",
    "liger": "liger-kernel",
    "quack": "quack-kernels",
    "cublas": "torch",
    "cudnn": "torch",
    "sdpa": "torch",
}


def peer_hash(impl: str) -> str:
    """Source identity of a baseline: the package and version that was measured."""
    family = impl.split(":", 1)[0]
    pkg = PEER_PACKAGES.get(family, family)
    try:
        version = importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        version = "unknown"
    return f"pkg:{pkg}=={version.split('+')[0]}"


def require_gpu(op: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise NoGPUError(
            f"{op}: no CUDA GPU is visible to PyTorch, so nothing can be timed here. "
            "Run `nox -s labs` on a machine with an NVIDIA GPU; the committed results in "
            "labs/results/ are left untouched."
        )


COOLDOWN_BYTES = 1 << 30
"""Cases that move at least this many bytes start from an idle GPU (:func:`cooldown_seconds`)."""
COOLDOWN_FLOPS = 2 * 4096**3
"""Cases that do at least this many flops (a 4096^3 matrix product) start from an idle GPU too.
A large product on the tensor cores draws the board to its power limit as surely as a long
memory-bound row: in the H200's matmul records the software power cap is active from 4096^3 up.
The lab timed Triton's rungs and then cuBLAS back to back at each shape, so cuBLAS always
started at the clock three heavy products had left it."""
COOLDOWN_S = 1.0
"""How long the lab leaves the GPU idle before such a case (``MINIKERNEL_COOLDOWN_S`` overrides
it; 0 turns it off). On an H200, softmax's long rows draw the board to its power limit within a
timing window, and the driver then lowers the SM clock; timed back to back, every kernel after
the first inherited the clock its predecessor left (lab 02's two-speed note), so the order of
the implementations leaked into their times. A probe that idled 1.5 s before each of the same
kernels found each one starting at the full clock and its times repeating."""


def cooldown_seconds(nbytes: int | None, flops: int | None = None) -> float:
    """Seconds of idle before timing a case that moves ``nbytes`` and does ``flops``:
    COOLDOWN_S (or the environment's ``MINIKERNEL_COOLDOWN_S``) from COOLDOWN_BYTES or from
    COOLDOWN_FLOPS up, else none."""
    heavy = (nbytes is not None and nbytes >= COOLDOWN_BYTES) or (
        flops is not None and flops >= COOLDOWN_FLOPS
    )
    if not heavy:
        return 0.0
    raw = os.environ.get("MINIKERNEL_COOLDOWN_S")
    if raw is None:
        return COOLDOWN_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(
            f"MINIKERNEL_COOLDOWN_S must be a number of seconds, got {raw!r}"
        ) from None
    if value < 0:
        raise ValueError(f"MINIKERNEL_COOLDOWN_S must be 0 or more, got {raw!r}")
    return value


SPENT = {
    "idle": "idle before cases",
    "timing": "timing",
    "duels": "duels",
    "loops": "two-second loops",
    "ncu": "Nsight Compute",
}
"""What a lab's seconds are counted under (Lab.spent), in the order its summary line gives them;
the rest of the run (checks, compiles, peers' setup) is what they leave."""


def spent_line(op: str, spent: Mapping[str, float], total_s: float) -> str:
    """One line saying where a lab's ``total_s`` seconds went: each kind of SPENT that took any
    time, then the rest. Raises ValueError on a kind SPENT does not name or on negative time."""
    unknown = sorted(set(spent) - set(SPENT))
    if unknown:
        raise ValueError(f"spent_line: unknown kinds {unknown}; known: {sorted(SPENT)}")
    if total_s < 0 or any(v < 0 for v in spent.values()):
        raise ValueError(f"spent_line: negative seconds in {dict(spent)} or total {total_s}")
    parts = [f"{spent[k]:.0f} s {label}" for k, label in SPENT.items() if spent.get(k, 0) > 0]
    rest = max(total_s - sum(spent.values()), 0.0)
    parts.append(f"{rest:.0f} s the rest (checks, compiles, setup)")
    return f"[{op}] {total_s:.0f} s in this lab: " + ", ".join(parts)


class Lab:
    def __init__(
        self,
        op: str,
        variants: Mapping[str, Any],
        *,
        root: Path | None = None,
        lab_file: str | None = None,
    ) -> None:
        require_gpu(op)
        self.started = time.monotonic()
        self.spent = dict.fromkeys(SPENT, 0.0)  # seconds by kind: the summary line at save()
        self.op = op
        self.variants = variants
        self.root = Path(root or os.environ.get("MINIKERNEL_RESULTS_DIR") or RESULTS_DIR)
        self.env = collect_env()
        self.ceilings = _ceilings.measure()
        # The SM clock and board power behind each record (clocks.py): where a run reaches the
        # power limit, the same kernel can time differently as the clock drops.
        import torch

        self.clocks = ClockSampler(torch.cuda.current_device())
        # The energy of one call in a long loop, for the cases that ask (energy.py).
        self.energy = EnergyCounter(torch.cuda.current_device())
        self.records: list[dict[str, Any]] = []
        self.ncu: list[dict[str, Any]] = []
        self.duels: list[dict[str, Any]] = []
        self.extra: dict[str, Any] = {"lab": lab_file} if lab_file else {}
        print(
            f"[{op}] {self.env['gpu']} (sm_{self.env['cc'].replace('.', '')}, "
            f"{self.env['sms']} SMs), torch {self.env['torch']}, triton {self.env['triton']}, "
            f"commit {self.env['commit']}{' (dirty)' if self.env['dirty'] else ''}\n"
            f"[{op}] ceilings: copy {self.ceilings['copy_GBps']:.0f} GB/s, "
            f"bf16 mm {self.ceilings['bf16_mm_TFLOPs']:.0f} TFLOP/s",
            flush=True,
        )

    @property
    def slug(self) -> str:
        return gpu_slug(self.env["gpu"])

    def source_hash(self, impl: str) -> str:
        variant = self.variants.get(impl)
        return variant.source_hash() if variant is not None else peer_hash(impl)

    def measure(
        self,
        impl: str,
        run: Callable[[], Any],
        *,
        shape: list[Any],
        dtype: Any,
        bytes: int | None = None,
        flops: int | None = None,
        pass_: str = "fwd",
        max_rel_err: float | None = None,
        ceiling: str | None = None,
        graph: bool | None = None,
        rep_ms: float = 100.0,
        energy: bool = False,
        **extra: Any,
    ) -> dict[str, Any]:
        """Time ``run`` and append a record. GB/s from ``bytes``, TFLOP/s from ``flops``;
        ``frac_of_ceiling`` against the copy ceiling (memory-bound) or ``ceiling``. With
        ``energy``, also run it back to back for a couple of seconds and record the loop's time
        per call, mean board power and energy per call (:func:`energy.loop_energy`), where the
        GPU has an energy counter, and from the clock sampler the loop's mean SM clock and how
        much of it ran under the software power cap (:meth:`ClockSampler.loop_window`)."""
        idle = cooldown_seconds(bytes, flops)
        if idle:
            time.sleep(idle)  # an idle GPU first: the clock the last case left is not ours
            self.spent["idle"] += idle
        t0 = time.monotonic()
        t = time_gpu(run, graph=graph, rep_ms=rep_ms)
        clock = self.clocks.window(t0, time.monotonic())
        self.spent["timing"] += time.monotonic() - t0
        seconds = t.median_us * 1e-6
        gbps = bytes / seconds / 1e9 if bytes is not None else None
        tflops = flops / seconds / 1e12 if flops is not None else None
        if ceiling is None:
            ceiling = "copy_GBps" if flops is None else "bf16_mm_TFLOPs"
        achieved = gbps if ceiling.endswith("GBps") else tflops
        frac = achieved / self.ceilings[ceiling] if achieved is not None else None
        dtype_name = str(dtype).removeprefix("torch.")
        rec: dict[str, Any] = {
            "impl": impl,
            "shape": list(shape),
            "dtype": dtype_name,
            "pass": pass_,
            "median_us": round(t.median_us, 3),
            "p20_us": round(t.p20_us, 3),
            "p80_us": round(t.p80_us, 3),
            "bytes": bytes,
            "flops": flops,
            "GBps": None if gbps is None else round(gbps, 1),
            "TFLOPs": None if tflops is None else round(tflops, 2),
            "frac_of_ceiling": None if frac is None else round(frac, 4),
            "source_hash": self.source_hash(impl),
            "max_rel_err": None if max_rel_err is None else float(f"{max_rel_err:.3g}"),
            "timing": t.method,
            **extra,
        }
        if t.host_us is not None:
            rec["host_us"] = round(t.host_us, 3)
        if clock is not None:
            rec.update(clock)
        if energy:
            t_loop = time.monotonic()
            used = loop_energy(run, self.energy)
            if used is not None:
                rec.update(used)
                rec.update(self.clocks.loop_window(t_loop, time.monotonic()) or {})
            self.spent["loops"] += time.monotonic() - t_loop
        if ceiling not in ("copy_GBps", "bf16_mm_TFLOPs"):
            rec["ceiling"] = ceiling
        self.records.append(rec)
        rate = f"{gbps:8.1f} GB/s" if gbps is not None else f"{tflops or 0:8.1f} TFLOP/s"
        print(
            f"[{self.op}] {impl:<14} {dtype_name:<9} {pass_:<7} {shape!s:<22} "
            f"{t.median_us:10.2f} us  {rate}  {100 * (frac or 0):5.1f}%  ({t.method})"
            + (f"  host {t.host_us:.1f} us per call" if t.host_us is not None else "")
            + (
                f"  SM {clock['sm_mhz']} MHz{' (power cap)' if clock['power_capped'] else ''}"
                if clock is not None
                else ""
            )
            + (
                f"  loop {rec['loop_us']:.1f} us at {rec['loop_power_w']:.0f} W: "
                f"{rec['energy_mJ']:.1f} mJ per call"
                if "energy_mJ" in rec
                else ""
            )
            + (
                f", power cap in {100 * rec['loop_capped_frac']:.0f}% of its samples"
                if "loop_capped_frac" in rec
                else ""
            ),
            flush=True,
        )
        return rec

    def close_calls(
        self,
        ours: Callable[[str], bool],
        peers: Callable[[str], bool],
        within: float = DUEL_WITHIN,
    ) -> list[tuple[dict[str, Any], str, str]]:
        """Every case of this run's records where the fastest of ``ours`` and the fastest of
        ``peers`` are within ``within`` of each other (duel.close_call), in the order the cases
        were measured: ``(case, ours_impl, peer_impl)``, where ``case`` holds the keyword
        arguments of :meth:`duel` (shape, dtype, pass_, bytes, flops, and graph: whether the
        two records were timed by graph replay)."""
        seen: list[dict[str, Any]] = []
        for r in self.records:
            sel = {"shape": r["shape"], "dtype": r["dtype"], "pass": r.get("pass", "fwd")}
            if sel not in seen:
                seen.append(sel)
        out = []
        for sel in seen:
            pair = close_call(self.records, ours, peers, within, **sel)
            if pair is None:
                continue
            recs = [
                r
                for r in self.records
                if r["impl"] in pair and all(r.get(k, "fwd") == v for k, v in sel.items())
            ]
            case = {
                "shape": sel["shape"],
                "dtype": sel["dtype"],
                "pass_": sel["pass"],
                "bytes": recs[0]["bytes"],
                "flops": recs[0]["flops"],
                "graph": all(r.get("timing") == "cudagraph" for r in recs),
            }
            out.append((case, *pair))
        return out

    def duel(
        self,
        runs: Mapping[str, Callable[[], Any]],
        *,
        shape: list[Any],
        dtype: Any,
        bytes: int | None = None,
        flops: int | None = None,
        pass_: str = "fwd",
        graph: bool | None = None,
        rounds: int = DUEL_ROUNDS,
        rep_ms: float = DUEL_REP_MS,
    ) -> dict[str, Any]:
        """Time two implementations (``runs``: ours first, then the peer) against each other in
        ``rounds`` interleaved rounds (minikernel.bench.duel), with the idle a heavy case gets
        before each round, and append the per-round medians to the results' ``duels``. Both
        are timed by one method: ``graph`` as the case's records were (None: events)."""
        dtype_name = str(dtype).removeprefix("torch.")
        idle = cooldown_seconds(bytes, flops)
        methods: set[str] = set()

        def rest() -> None:
            if idle:
                time.sleep(idle)
                self.spent["idle"] += idle

        def timer(fn: Callable[[], Any]) -> float:
            t0 = time.monotonic()
            t = time_gpu(fn, graph=bool(graph), rep_ms=rep_ms)
            self.spent["duels"] += time.monotonic() - t0
            methods.add(t.method)
            return t.median_us

        got = run_rounds(runs, rounds, timer, rest)
        a, b = list(runs)
        rec: dict[str, Any] = {
            "impls": [a, b],
            "shape": list(shape),
            "dtype": dtype_name,
            "pass": pass_,
            "rounds": rounds,
            "median_us": {k: [round(x, 3) for x in v] for k, v in got["us"].items()},
            "first": got["first"],
            "bytes": bytes,
            "flops": flops,
            "timing": methods.pop(),
            "source_hash": {k: self.source_hash(k) for k in (a, b)},
        }
        self.duels.append(rec)
        v = duel_verdict(rec, self.records)
        print(
            f"[{self.op}] duel {a} vs {b} {dtype_name} {pass_} {list(shape)}: {a} faster in "
            f"{v['wins']} of {rounds} rounds, {b} in {v['losses']}, {b}/{a} median ratio "
            f"{v['ratio']:.4f}, margin {v['margin']:.4f}: {v['state']}",
            flush=True,
        )
        return rec

    def profile(
        self,
        impl: str,
        shape: list[int],
        dtype: str,
        *,
        model_bytes: int | None = None,
        extra_args: list[str] | None = None,
        env: dict[str, str] | None = None,
        config: dict[str, Any] | None = None,
        pass_: str | None = None,
    ) -> dict[str, Any] | None:
        """Add an ncu excerpt for one call of ``impl``. Where ncu is missing (a learner's
        machine), say so and carry on: the timings are still valid. ``env`` goes to the
        profiled process (a pinned launch config); ``config`` is recorded with the excerpt, and
        so is ``pass_`` ("bwd" for an op's backward, which ``extra_args`` asks the runner for)."""
        from .ncu import NcuUnavailable, profile

        t0 = time.monotonic()
        try:
            rec = profile(
                self.op,
                impl,
                shape,
                dtype,
                model_bytes=model_bytes,
                extra_args=extra_args,
                env=env,
            )
        except NcuUnavailable as exc:
            print(f"[{self.op}] ncu skipped: {exc}", flush=True)
            return None
        finally:
            self.spent["ncu"] += time.monotonic() - t0
        return self._keep(rec, config, pass_)

    def _keep(
        self, rec: dict[str, Any], config: dict[str, Any] | None, pass_: str | None
    ) -> dict[str, Any]:
        """Store an excerpt with the launch it pinned and the pass it profiled, and print it."""
        if config is not None:
            rec["config"] = config
        if pass_ is not None:
            rec["pass"] = pass_
        self.ncu.append(rec)
        print(f"[{self.op}] ncu {rec['impl']} {rec['shape']} {rec['dtype']}", flush=True)
        print(rec["excerpt"], flush=True)
        return rec

    def profile_many(
        self, cases: list[dict[str, Any]], *, skip_failed: bool = False
    ) -> list[dict[str, Any] | None]:
        """:meth:`profile` for several cases, in one ncu process (ncu.profile_many): a few
        seconds saved per case, the start of a Python, PyTorch and CUDA context each. A case is
        a dict of profile()'s arguments: ``impl``, ``shape``, ``dtype`` and optionally
        ``model_bytes``, ``extra_args``, ``config`` and ``pass_`` (a pinned launch's ``env``
        needs a process of its own: profile() it). The excerpts are the same as profile()'s,
        in the order of ``cases``. If the batch fails, each case is profiled alone, so one bad
        case costs only its own excerpt; with ``skip_failed`` a case that fails alone too is
        reported and given None, without it its error is raised."""
        from .ncu import NcuUnavailable
        from .ncu import profile_many as ncu_profile_many

        allowed = {"impl", "shape", "dtype", "model_bytes", "extra_args", "config", "pass_"}
        for i, c in enumerate(cases):
            unknown = set(c) - allowed
            if unknown:
                raise ValueError(f"profile_many: case {i} has unknown keys {sorted(unknown)}")
        if len(cases) < 2:
            return [self._profile_alone(c, skip_failed) for c in cases]
        t0 = time.monotonic()
        try:
            batch = [{k: v for k, v in c.items() if k not in ("config", "pass_")} for c in cases]
            recs = ncu_profile_many(self.op, batch)
        except NcuUnavailable as exc:
            print(f"[{self.op}] ncu skipped: {exc}", flush=True)
            return [None] * len(cases)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            print(f"[{self.op}] ncu batch failed ({first}); one case at a time", flush=True)
            recs = None
        finally:
            self.spent["ncu"] += time.monotonic() - t0
        if recs is None:
            return [self._profile_alone(c, skip_failed) for c in cases]
        return [
            self._keep(rec, c.get("config"), c.get("pass_"))
            for c, rec in zip(cases, recs, strict=True)
        ]

    def _profile_alone(self, case: dict[str, Any], skip_failed: bool) -> dict[str, Any] | None:
        args = {k: v for k, v in case.items() if k not in ("impl", "shape", "dtype")}
        try:
            return self.profile(case["impl"], case["shape"], case["dtype"], **args)
        except Exception as exc:
            if not skip_failed:
                raise
            print(
                f"[{self.op}] ncu {case['impl']} {case['shape']} {case['dtype']} skipped: "
                f"{type(exc).__name__}: {exc}",
                flush=True,
            )
            return None

    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "schema": SCHEMA_VERSION,
            "op": self.op,
            "env": self.env,
            "ceilings": self.ceilings,
            "records": self.records,
        }
        if self.ncu:
            data["ncu"] = self.ncu
        if self.duels:
            data["duels"] = self.duels
        data.update(self.extra)
        return data

    def save(self) -> Path:
        path = results_path(self.op, self.slug, self.root)
        dropped = dropped_impls(path, self.records)
        write_atomic(self.data(), path)
        print(f"[{self.op}] wrote {path} ({len(self.records)} records, {len(self.ncu)} ncu)")
        if dropped:  # a run to compare with the one before it, not to commit in its place
            print(
                f"[{self.op}] note: the file this run replaced had records of "
                f"{', '.join(dropped)}, and this run has none (the lines above say why: not "
                f"installed, or refused). Its pages compare against them: `git diff {path}` "
                f"shows what changed, and `git checkout {path}` puts the previous file back.",
                flush=True,
            )
        print(spent_line(self.op, self.spent, time.monotonic() - self.started), flush=True)
        return path


def main_guard(run_lab: Callable[[], Any], op: str) -> None:
    """Entry point of a lab script: run it, or explain that a GPU is needed and exit 2."""
    try:
        run_lab()
    except NoGPUError as exc:
        print(exc, file=sys.stderr)
        sys.exit(2)
