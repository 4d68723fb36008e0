"""How long each way of building a CUDA C kernel takes, measured on the machine at hand.

Three paths of the hello-CUDA lab: NVRTC at run time (what minikernel uses), plain ``nvcc`` on
the command line, and PyTorch's ``torch.utils.cpp_extension.load_inline`` (a C++ extension
built with the host compiler and ninja). Each is timed from a cold start: no cache.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from minikernel.cuda import CUDA_DIR, compile_file

_INLINE_CUDA = r"""
#include <torch/extension.h>
__global__ void add_kernel(const float* a, const float* b, float* out, long long n) {
    long long i = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}
torch::Tensor add(torch::Tensor a, torch::Tensor b) {
    auto out = torch::empty_like(a);
    long long n = a.numel();
    add_kernel<<<(n + 255) / 256, 256>>>(a.data_ptr<float>(), b.data_ptr<float>(),
                                          out.data_ptr<float>(), n);
    return out;
}
"""


def nvrtc_seconds(path: Path, arch: str) -> float:
    """One compile in this process, NVRTC already loaded: the cost of each further kernel."""
    return compile_file(path, arch).seconds


_COLD = """
import sys, time
t0 = time.perf_counter()
from minikernel.cuda import compile_file
compile_file(sys.argv[1], sys.argv[2])
print(time.perf_counter() - t0)
"""


def nvrtc_cold_seconds(path: Path, arch: str) -> float:
    """A fresh process: importing the bindings, loading NVRTC, then compiling (first use)."""
    out = subprocess.run(
        [sys.executable, "-c", _COLD, str(path), arch],
        check=True,
        capture_output=True,
        text=True,
    )
    return float(out.stdout.strip().splitlines()[-1])


def nvcc_seconds(path: Path, arch: str) -> float | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        subprocess.run(
            [nvcc, f"-arch={arch}", "-cubin", f"-I{CUDA_DIR}", "-o", f"{tmp}/k.cubin", str(path)],
            check=True,
            capture_output=True,
        )
        return time.perf_counter() - t0


def load_inline_seconds() -> float | str:
    """First-use build of a one-kernel extension; a string says why it could not be built."""
    from torch.utils.cpp_extension import load_inline

    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        try:
            load_inline(
                name="minikernel_inline_add",
                cpp_sources="torch::Tensor add(torch::Tensor a, torch::Tensor b);",
                cuda_sources=_INLINE_CUDA,
                functions=["add"],
                build_directory=tmp,
                verbose=False,
            )
        except Exception as exc:  # a missing host compiler or ninja: report, don't fail the lab
            return f"failed: {type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
        return time.perf_counter() - t0


def measure(path: Path, arch: str, *, with_load_inline: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "file": path.name,
        "arch": arch,
        "nvrtc_s": round(nvrtc_seconds(path, arch), 3),
        "nvrtc_cold_s": round(nvrtc_cold_seconds(path, arch), 3),
    }
    nvcc = nvcc_seconds(path, arch)
    out["nvcc_s"] = None if nvcc is None else round(nvcc, 3)
    if with_load_inline:
        li = load_inline_seconds()
        out["load_inline_s"] = round(li, 1) if isinstance(li, float) else li
    return out
