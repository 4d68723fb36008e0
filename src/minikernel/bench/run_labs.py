"""Run lab scripts one by one: ``python -m minikernel.bench.run_labs [NAME ...]``.

Each lab runs in its own process and writes its own results file at its end, so one failing lab
does not cost the others their results, and leaves its own previous file untouched.
Exit status: 0 all measured; 1 some lab failed; 2 no GPU (checks ran, nothing was timed).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
NO_GPU_EXIT = 2
# What a lab imports only at its end, to validate and write its results file: checked before the
# first lab starts, so that a missing one fails in a second, not after minutes of measuring.
NEEDED_AT_SAVE = ("jsonschema",)


def available_labs() -> dict[str, Path]:
    return {p.stem.split("_", 1)[1]: p for p in sorted((ROOT / "labs").glob("[0-9][0-9]_*.py"))}


def main(argv: list[str]) -> int:
    import torch

    labs = available_labs()
    names = argv or list(labs)
    unknown = [n for n in names if n not in labs]
    if unknown:
        print(f"unknown lab(s) {unknown}; choose from {list(labs)}", file=sys.stderr)
        return 1
    missing = [m for m in NEEDED_AT_SAVE if importlib.util.find_spec(m) is None]
    if missing:
        print(
            f"{', '.join(missing)} not installed: a lab needs it to write its results file. "
            f"Install it (`pip install {' '.join(missing)}`), or run `nox -s labs` without "
            "--no-venv, which installs the package with its dependencies.",
            file=sys.stderr,
        )
        return 1
    env = dict(os.environ)
    src = str(ROOT / "src")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    gpu = torch.cuda.is_available()
    if not gpu:
        env["TRITON_INTERPRET"] = "1"
        print("No CUDA GPU: each lab runs its correctness checks in Triton's interpreter only.")
    status: dict[str, str] = {}
    for name in names:
        print(f"\n=== lab {name} ({labs[name].relative_to(ROOT)})", flush=True)
        t0 = time.perf_counter()
        code = subprocess.run([sys.executable, str(labs[name])], env=env, cwd=ROOT).returncode
        took = time.perf_counter() - t0
        if code == 0:
            status[name] = f"measured in {took:.0f} s"
        elif code == NO_GPU_EXIT and not gpu:
            status[name] = "checked (no GPU: nothing timed)"
        else:
            status[name] = f"FAILED (exit {code}) after {took:.0f} s; its results file is untouched"
    print("\n=== labs summary")
    for name, s in status.items():
        print(f"  {name:<16} {s}")
    if any(s.startswith("FAILED") for s in status.values()):
        return 1
    if not gpu:
        print(
            "\nNo CUDA GPU: checks ran, nothing was timed and labs/results/ is untouched. "
            "Run `nox -s labs` on a machine with an NVIDIA GPU to measure.",
            file=sys.stderr,
        )
        return NO_GPU_EXIT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
