"""Run-time compilation and launch of the CUDA C kernels (see loader.py)."""

from .loader import (
    CUDA_DIR,
    CompiledModule,
    CudaCompileError,
    CudaError,
    CudaLaunchError,
    CudaUnavailableError,
    Kernel,
    ResourceUsage,
    clear,
    compile_file,
    compile_seconds,
    device_arch,
    get_kernel,
    load,
    nvrtc_version,
    parse_ptxas_report,
)

__all__ = [
    "CUDA_DIR",
    "CompiledModule",
    "CudaCompileError",
    "CudaError",
    "CudaLaunchError",
    "CudaUnavailableError",
    "Kernel",
    "ResourceUsage",
    "clear",
    "compile_file",
    "compile_seconds",
    "device_arch",
    "get_kernel",
    "load",
    "nvrtc_version",
    "parse_ptxas_report",
]
