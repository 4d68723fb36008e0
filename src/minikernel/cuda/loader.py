"""The one loader for every CUDA C kernel in minikernel.

A ``.cu`` file is compiled at run time with NVRTC (NVIDIA's run-time compiler, reached through
``cuda-bindings``) into a cubin for the GPU at hand, loaded with the driver API and launched on
PyTorch's current stream. Compiling one of our files takes about half a second; the result is
kept in memory for the process and on disk (``~/.cache/minikernel``) across processes.

NVRTC needs no GPU: :func:`compile_file` turns a ``.cu`` into a cubin for any architecture on
a CPU-only machine, which is how the tests compile every kernel for sm_90 and sm_120 and read
its register / spill report.

Why not ``torch.utils.cpp_extension.load_inline``? It writes a C++ extension and builds it with
the host compiler and ninja: about 78 s on first use on our H200 runner, against about 0.5 s here.
The hello-CUDA lab shows both, and the plain ``nvcc`` command line.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CUDA_DIR = Path(__file__).resolve().parent
"""Folder holding ``common.cuh``; every compile gets it as an include path."""

_DEFAULT_OPTIONS = ("-std=c++17", "-lineinfo")


class CudaError(RuntimeError):
    """Base class for the loader's errors."""


class CudaUnavailableError(CudaError):
    """No GPU, no driver or no CUDA Python bindings: CUDA C kernels cannot run here."""


class CudaCompileError(CudaError):
    """NVRTC rejected a source file; the message carries NVRTC's log (``file(line): error``)."""


class CudaLaunchError(CudaError):
    """The driver refused a launch or a module load."""


@dataclass(frozen=True)
class ResourceUsage:
    """What ptxas reports for one kernel: the numbers that decide occupancy and spills."""

    registers: int
    spill_stores: int
    spill_loads: int
    stack_frame: int
    shared_bytes: int


@dataclass
class CompiledModule:
    """The output of one NVRTC compile: a cubin, its log and the per-kernel resource report."""

    path: Path
    arch: str
    cubin: bytes
    log: str
    seconds: float
    usage: dict[str, ResourceUsage] = field(default_factory=dict)

    @property
    def kernel_names(self) -> set[str]:
        """The kernels in the cubin, read from its ELF section names (``.text.<name>``): what
        the module holds even where ptxas' report came back empty."""
        return {m.decode() for m in _TEXT_SECTION.findall(self.cubin)}


def clusters_available(device: Any) -> bool:
    """Whether the cluster kernels (sm_90+) can run on ``device`` (a torch CUDA device): the GPU
    has clusters and NVIDIA's Python bindings import. What the dispatchers check before they
    pick a CUDA C rung by default."""
    import torch

    if torch.cuda.get_device_capability(device) < (9, 0):
        return False
    try:
        _bindings()
    except CudaUnavailableError:
        return False
    return True


def _bindings() -> tuple[Any, Any]:
    try:
        from cuda.bindings import driver, nvrtc
    except ImportError:  # cuda-python < 12.6 spelled it `from cuda import ...`
        try:
            from cuda import cuda as driver  # type: ignore[no-redef]
            from cuda import nvrtc  # type: ignore[no-redef]
        except ImportError as exc:
            raise CudaUnavailableError(
                "minikernel's CUDA C kernels need NVIDIA's Python bindings: "
                "pip install cuda-bindings nvidia-cuda-nvrtc"
            ) from exc
    return driver, nvrtc


def _check_nvrtc(nvrtc: Any, result: Any, what: str) -> None:
    if int(result) != 0:
        _, msg = nvrtc.nvrtcGetErrorString(result)
        raise CudaCompileError(f"{what}: {msg.decode() if isinstance(msg, bytes) else msg}")


def _check_driver(driver: Any, result: Any, what: str | Callable[[], str]) -> None:
    """Raise CudaLaunchError naming ``what`` (a string, or a callable that makes one: a launch
    formats its grid and block only when it fails) if ``result`` is not CUDA_SUCCESS."""
    if int(result) != 0:
        _, name = driver.cuGetErrorName(result)
        _, text = driver.cuGetErrorString(result)
        name = name.decode() if isinstance(name, bytes) else name
        text = text.decode() if isinstance(text, bytes) else text
        raise CudaLaunchError(f"{what() if callable(what) else what} failed: {name} ({text})")


_INVALID_CONTEXT = 201  # CUDA_ERROR_INVALID_CONTEXT


def _call_in_context(
    driver: Any, what: str | Callable[[], str], fn: Any, *args: Any
) -> tuple[Any, ...]:
    """``fn(*args)``, a driver call that needs a current context, checked; its results after
    the status. A thread PyTorch made (autograd runs backward on one per device) may never
    have made the primary context current: the runtime binds it lazily, and PyTorch skips
    ``cudaSetDevice`` on a thread already "on" the device. Then the call fails with
    CUDA_ERROR_INVALID_CONTEXT, and it is made current and tried once more. The check costs
    nothing on the usual path, which matters on every launch."""
    err, *rest = fn(*args)
    if int(err) == _INVALID_CONTEXT:
        import torch

        _ensure_context(driver, torch.cuda.current_device())
        err, *rest = fn(*args)
    _check_driver(driver, err, what)
    return tuple(rest)


def source_text(path: Path) -> str:
    """The file as compiled: its own text. Includes are resolved by NVRTC from CUDA_DIR."""
    return Path(path).read_text()


def sources_digest(path: Path) -> str:
    """sha256 of a .cu file and every header it may include (CUDA_DIR's and its own folder's)."""
    h = hashlib.sha256()
    h.update(Path(path).read_bytes())
    headers = {*CUDA_DIR.glob("*.cuh"), *Path(path).resolve().parent.glob("*.cuh")}
    for header in sorted(headers):
        h.update(header.name.encode())
        h.update(header.read_bytes())
    return h.hexdigest()


_TEXT_SECTION = re.compile(rb"\.text\.([A-Za-z_][A-Za-z0-9_]*)\x00")
_PTXAS_FUNC = re.compile(r"Compiling entry function '([^']+)'")
_PTXAS_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_PTXAS_REGS = re.compile(r"Used (\d+) registers")
_PTXAS_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_report(log: str) -> dict[str, ResourceUsage]:
    """Read ptxas' ``-v`` report (one block per entry function) into ResourceUsage records."""
    usage: dict[str, ResourceUsage] = {}
    blocks = _PTXAS_FUNC.split(log)
    # split() gives [preamble, name1, block1, name2, block2, ...]
    for name, block in zip(blocks[1::2], blocks[2::2], strict=True):
        frame = _PTXAS_FRAME.search(block)
        regs = _PTXAS_REGS.search(block)
        smem = _PTXAS_SMEM.search(block)
        if frame is None or regs is None:
            raise CudaCompileError(f"could not read ptxas' report for {name}:\n{block}")
        usage[name] = ResourceUsage(
            registers=int(regs.group(1)),
            stack_frame=int(frame.group(1)),
            spill_stores=int(frame.group(2)),
            spill_loads=int(frame.group(3)),
            shared_bytes=int(smem.group(1)) if smem else 0,
        )
    return usage


def compile_file(
    path: str | os.PathLike[str],
    arch: str,
    *,
    options: Sequence[str] = (),
) -> CompiledModule:
    """Compile ``path`` with NVRTC into a cubin for ``arch`` (e.g. ``"sm_90"``). Needs no GPU.

    Raises CudaCompileError with NVRTC's log, whose lines read ``<path>(<line>): error: ...``.
    """
    _, nvrtc = _bindings()
    path = Path(path).resolve()
    src = source_text(path).encode()
    opts = [
        f"--gpu-architecture={arch}",
        f"--include-path={CUDA_DIR}",
        f"--include-path={path.parent}",
        "-Xptxas=-v",
        *_DEFAULT_OPTIONS,
        *options,
    ]
    t0 = time.perf_counter()
    err, prog = nvrtc.nvrtcCreateProgram(src, str(path).encode(), 0, [], [])
    _check_nvrtc(nvrtc, err, "nvrtcCreateProgram")
    try:
        (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
        err, size = nvrtc.nvrtcGetProgramLogSize(prog)
        _check_nvrtc(nvrtc, err, "nvrtcGetProgramLogSize")
        buf = b" " * size
        (err,) = nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.decode(errors="replace").rstrip("\x00 \n")
        if int(result) != 0:
            raise CudaCompileError(f"NVRTC could not compile {path} for {arch}:\n{log}")
        err, size = nvrtc.nvrtcGetCUBINSize(prog)
        _check_nvrtc(nvrtc, err, "nvrtcGetCUBINSize")
        cubin = b" " * size
        (err,) = nvrtc.nvrtcGetCUBIN(prog, cubin)
        _check_nvrtc(nvrtc, err, "nvrtcGetCUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    seconds = time.perf_counter() - t0
    usage = parse_ptxas_report(log)
    module = CompiledModule(path, arch, cubin, log, seconds, usage)
    if set(usage) != module.kernel_names and os.environ.get("MINIKERNEL_PTXAS_SUBPROCESS") != "1":
        # Seen on the H200 runner (NVRTC 13.0, several compiles in one process): a compile
        # came back fast with a valid cubin and an empty log, so no ptxas report, even with an
        # extra define. The report is what the resource checks read, so ask a fresh process,
        # where it is the first compile, for the log (the cubin we keep is this one). A report
        # that names only some of the cubin's kernels is retried the same way, and the fresh
        # one kept if it covers more of them.
        fresh = _log_from_fresh_process(path, arch, options)
        fresh_usage = parse_ptxas_report(fresh) if fresh else {}
        if len(set(fresh_usage) & module.kernel_names) > len(set(usage) & module.kernel_names):
            module.log, module.usage = fresh, fresh_usage
    return module


_FRESH = """
import json, sys
from minikernel.cuda.loader import compile_file
m = compile_file(sys.argv[1], sys.argv[2], options=json.loads(sys.argv[3]))
sys.stdout.write(m.log)
"""


def _log_from_fresh_process(path: Path, arch: str, options: Sequence[str]) -> str:
    import json
    import subprocess
    import sys

    env = dict(os.environ, MINIKERNEL_PTXAS_SUBPROCESS="1")
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [src, env.get("PYTHONPATH")]))
    try:
        out = subprocess.run(
            [sys.executable, "-c", _FRESH, str(path), arch, json.dumps(list(options))],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout


def nvrtc_version() -> str:
    _, nvrtc = _bindings()
    err, major, minor = nvrtc.nvrtcVersion()
    _check_nvrtc(nvrtc, err, "nvrtcVersion")
    return f"{major}.{minor}"


# ---------------------------------------------------------------------------------------------
# Running on a GPU
# ---------------------------------------------------------------------------------------------


def device_arch(device: int | None = None) -> str:
    """``sm_XY`` of a CUDA device, or CudaUnavailableError naming what is missing."""
    import torch

    if not torch.cuda.is_available():
        raise CudaUnavailableError(
            "no CUDA GPU is visible to PyTorch (torch.cuda.is_available() is False), so CUDA C "
            "kernels cannot run here. On a machine without a GPU, run the Triton variants under "
            "TRITON_INTERPRET=1 or the NumPy reference; the .cu files still compile (NVRTC)."
        )
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"


def _cache_dir() -> Path | None:
    if os.environ.get("MINIKERNEL_CUDA_CACHE", "1") == "0":
        return None
    root = os.environ.get("MINIKERNEL_CACHE_DIR") or Path.home() / ".cache" / "minikernel"
    return Path(root) / "cubin"


class Kernel:
    """One ``extern "C" __global__`` function of a loaded module, ready to launch.

    Arguments are passed by C type, which must match the kernel's parameter list: a tensor
    becomes its data pointer; every scalar must be a ctypes value (``ctypes.c_int64(n)``,
    ``ctypes.c_float(eps)``), because a bare Python int does not say whether the kernel expects
    ``int`` or ``long long``, and guessing wrong shifts every later argument.
    """

    def __init__(self, module: LoadedModule, name: str, function: Any) -> None:
        self.module = module
        self.name = name
        self._function = function
        self._max_dynamic_smem: int | None = None  # what a launch may take; asked on first use
        self._occupancy: dict[tuple[int, int, int], int] = {}
        self._nonportable = False

    @property
    def usage(self) -> ResourceUsage | None:
        return self.module.compiled.usage.get(self.name)

    def _set_attribute(self, attribute: str, value: int, what: str) -> None:
        """cuFuncSetAttribute for this kernel: ``attribute`` names a CUfunction_attribute."""
        driver = self.module.driver
        attr = getattr(driver.CUfunction_attribute, attribute)
        _call_in_context(driver, what, driver.cuFuncSetAttribute, self._function, attr, value)

    def _allow_smem(self, shared_mem: int) -> None:
        if shared_mem == 0:
            return
        if self._max_dynamic_smem is None:
            # Without opting in, a block gets 48 KB of shared memory in all: the kernel's static
            # shared memory (its __shared__ arrays) comes out of it. Taking exactly 48 KB of
            # dynamic memory in a kernel with any static memory fails to launch otherwise.
            driver = self.module.driver
            (static,) = _call_in_context(
                driver,
                f"reading {self.name}'s static shared memory",
                driver.cuFuncGetAttribute,
                driver.CUfunction_attribute.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES,
                self._function,
            )
            self._max_dynamic_smem = 48 * 1024 - int(static)
        if shared_mem > self._max_dynamic_smem:
            # Past that a kernel must opt in to more dynamic shared memory, once per new maximum.
            self._set_attribute(
                "CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES",
                shared_mem,
                f"raising {self.name}'s shared memory to {shared_mem} B",
            )
            self._max_dynamic_smem = shared_mem

    def allow_cluster_size(self, cluster: int) -> None:
        """Let a kernel compiled with ``__cluster_dims__(cluster)`` for a cluster of more than 8
        blocks launch. Up to 8 blocks is the portable size every cluster GPU runs; sm_90 runs 16
        too, but a kernel must opt in ("non-portable" size) before it launches, once. Raises
        CudaLaunchError where the driver refuses."""
        if cluster <= 8 or self._nonportable:
            return
        self._set_attribute(
            "CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED",
            1,
            f"allowing {self.name} clusters of {cluster} blocks",
        )
        self._nonportable = True

    def max_active_clusters(self, block: int, shared_mem: int, cluster: int) -> int:
        """How many clusters of ``cluster`` blocks (the size compiled into the kernel with
        ``__cluster_dims__``; 1 for a kernel without) of ``block`` threads and ``shared_mem``
        bytes of dynamic shared memory the GPU can hold at once: the grid of a persistent
        kernel, whose every cluster must be resident (a cluster left for a second wave would
        double the time). The driver accounts for registers, shared memory and, for clusters,
        how the SMs are grouped in GPCs."""
        import torch

        key = (block, shared_mem, cluster)
        if key in self._occupancy:
            return self._occupancy[key]
        driver = self.module.driver
        self._allow_smem(shared_mem)
        if cluster == 1:
            (per_sm,) = _call_in_context(
                driver,
                f"occupancy of {self.name}",
                driver.cuOccupancyMaxActiveBlocksPerMultiprocessor,
                self._function,
                block,
                shared_mem,
            )
            props = torch.cuda.get_device_properties(torch.cuda.current_device())
            self._occupancy[key] = int(per_sm) * props.multi_processor_count
            return self._occupancy[key]
        config = driver.CUlaunchConfig()
        config.gridDimX, config.gridDimY, config.gridDimZ = cluster, 1, 1
        config.blockDimX, config.blockDimY, config.blockDimZ = block, 1, 1
        config.sharedMemBytes = shared_mem
        config.hStream = 0
        config.numAttrs = 0  # the cluster size comes from the kernel's __cluster_dims__
        (count,) = _call_in_context(
            driver,
            f"cluster occupancy of {self.name}",
            driver.cuOccupancyMaxActiveClusters,
            self._function,
            config,
        )
        self._occupancy[key] = int(count)
        return int(count)

    def __call__(
        self,
        grid: int | tuple[int, ...],
        block: int | tuple[int, ...],
        args: Sequence[Any],
        *,
        shared_mem: int = 0,
        stream: Any = None,
        cooperative: bool = False,
    ) -> None:
        """Launch on ``stream`` (the current one by default). ``cooperative=True`` launches
        with cuLaunchCooperativeKernel: the driver guarantees every block of the grid is
        resident at once, or refuses the launch, which a kernel that waits for all its blocks
        (a grid-wide barrier) needs."""
        import torch

        driver = self.module.driver
        grid3 = _dim3(grid, "grid")
        block3 = _dim3(block, "block")
        holders: list[Any] = []
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor):
                if not a.is_cuda:
                    raise ValueError(
                        f"{self.name}: argument {i} is a tensor on {a.device}; "
                        "CUDA C kernels read CUDA tensors only"
                    )
                holders.append(ctypes.c_void_p(a.data_ptr()))
            elif isinstance(a, ctypes._SimpleCData):
                holders.append(a)
            else:
                raise TypeError(
                    f"{self.name}: argument {i} is {type(a).__name__}; pass a tensor or a ctypes "
                    "value (e.g. ctypes.c_int64(n)) so that its C type is explicit"
                )
        self._allow_smem(shared_mem)
        pointers = (ctypes.c_void_p * max(1, len(holders)))(*[ctypes.addressof(h) for h in holders])
        if stream is None:
            stream = current_raw_stream()

        def what() -> str:  # formatted only if the launch fails: this runs on every call
            return f"launching {self.name} with grid={grid3} block={block3} smem={shared_mem}"

        if cooperative:
            _call_in_context(
                driver,
                lambda: what() + " (cooperative)",
                driver.cuLaunchCooperativeKernel,
                self._function,
                *grid3,
                *block3,
                shared_mem,
                stream,
                ctypes.addressof(pointers),
            )
            return
        _call_in_context(
            driver,
            what,
            driver.cuLaunchKernel,
            self._function,
            *grid3,
            *block3,
            shared_mem,
            stream,
            ctypes.addressof(pointers),
            0,
        )


def current_raw_stream() -> int:
    """The current CUDA stream of the current device, as the driver's handle (an int).
    ``torch.cuda.current_stream().cuda_stream`` gives the same number, but through a
    torch.cuda.Stream object built on each call: several microseconds a launch, which a short
    kernel pays in full when the host sets the pace. PyTorch's own raw accessor (the one Triton's
    launcher uses) is a single C call; the public route stays as the fallback."""
    global _raw_stream
    if _raw_stream is None:  # look the accessors up once: torch._C attributes are slow to fetch
        import torch

        get_device = getattr(torch._C, "_cuda_getDevice", None)
        get_raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        if get_device is None or get_raw is None:
            _raw_stream = lambda: int(torch.cuda.current_stream().cuda_stream)
        else:
            _raw_stream = lambda: int(get_raw(get_device()))
    return _raw_stream()


_raw_stream: Callable[[], int] | None = None


def _dim3(d: int | tuple[int, ...], what: str) -> tuple[int, int, int]:
    if type(d) is int and d >= 1:  # the usual launch: one int, checked in one step
        return (d, 1, 1)
    t = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(t) <= 3 or any(int(x) < 1 for x in t):
        raise ValueError(f"{what} must be 1 to 3 positive integers, got {d!r}")
    return tuple(int(x) for x in t) + (1,) * (3 - len(t))  # type: ignore[return-value]


@dataclass
class LoadedModule:
    compiled: CompiledModule
    driver: Any
    handle: Any
    kernels: dict[str, Kernel] = field(default_factory=dict)

    def kernel(self, name: str) -> Kernel:
        k = self.kernels.get(name)
        if k is None:
            err, fn = self.driver.cuModuleGetFunction(self.handle, name.encode())
            if int(err) != 0:
                names = sorted(self.compiled.usage)
                raise CudaLaunchError(
                    f'{self.compiled.path.name} has no extern "C" kernel named {name!r}; '
                    f"it defines {names}"
                )
            k = self.kernels[name] = Kernel(self, name, fn)
        return k


_modules: dict[tuple[str, int, str], LoadedModule] = {}
_kernels: dict[tuple[str, int, str], Kernel] = {}
_lock = threading.Lock()
compile_seconds: dict[str, float] = {}
"""Seconds NVRTC took per compiled file in this process (cache hits are not recorded)."""


def _ensure_context(driver: Any, device: int) -> None:
    import torch

    torch.cuda.init()
    torch.cuda.set_device(device)
    # PyTorch's runtime makes the device's primary context current on this thread once it has
    # touched the device; make sure of it, so that our module lands in the same context.
    torch.empty(1, device=f"cuda:{device}")
    err, ctx = driver.cuCtxGetCurrent()
    _check_driver(driver, err, "cuCtxGetCurrent")
    if int(ctx) == 0:
        err, dev = driver.cuDeviceGet(device)
        _check_driver(driver, err, "cuDeviceGet")
        err, ctx = driver.cuDevicePrimaryCtxRetain(dev)
        _check_driver(driver, err, "cuDevicePrimaryCtxRetain")
        (err,) = driver.cuCtxSetCurrent(ctx)
        _check_driver(driver, err, "cuCtxSetCurrent")


def load(path: str | os.PathLike[str], *, device: int | None = None) -> LoadedModule:
    """Compile (or fetch from cache) and load ``path`` on a CUDA device."""
    import torch

    driver, _ = _bindings()
    arch = device_arch(device)
    dev = torch.cuda.current_device() if device is None else device
    path = Path(path).resolve()
    digest = sources_digest(path)
    key = (str(path), dev, digest)
    with _lock:
        mod = _modules.get(key)
        if mod is not None:
            return mod
        compiled = _load_cached_cubin(path, arch, digest)
        if compiled is None:
            compiled = compile_file(path, arch)
            compile_seconds[path.name] = compiled.seconds
            _store_cached_cubin(compiled, digest)
        _ensure_context(driver, dev)
        err, handle = driver.cuModuleLoadData(compiled.cubin)
        _check_driver(driver, err, f"loading {path.name} ({arch})")
        mod = _modules[key] = LoadedModule(compiled, driver, handle)
        return mod


def get_kernel(path: str | os.PathLike[str], name: str) -> Kernel:
    """The kernel ``name`` of the .cu file ``path``, compiled for the current device.

    This sits on every launch, so after the first call it is one dictionary lookup: reading and
    hashing the sources each time cost about 100 us per launch, far more than a small kernel.
    (Edit a .cu file in a running process and call :func:`clear` to pick up the change.)
    """
    import torch

    key = (os.fspath(path), torch.cuda.current_device() if torch.cuda.is_available() else -1, name)
    kernel = _kernels.get(key)
    if kernel is None:
        kernel = _kernels[key] = load(path).kernel(name)
    return kernel


def clear() -> None:
    """Forget every loaded module and kernel of this process (the disk cache stays)."""
    with _lock:
        _kernels.clear()
        _modules.clear()


def _cache_stem(arch: str, digest: str) -> str:
    return f"{digest[:32]}-{arch}-nvrtc{nvrtc_version()}"


def _load_cached_cubin(path: Path, arch: str, digest: str) -> CompiledModule | None:
    root = _cache_dir()
    if root is None:
        return None
    stem = root / _cache_stem(arch, digest)
    cubin, log = stem.with_suffix(".cubin"), stem.with_suffix(".log")
    if not (cubin.exists() and log.exists()):
        return None
    text = log.read_text()
    return CompiledModule(path, arch, cubin.read_bytes(), text, 0.0, parse_ptxas_report(text))


def _store_cached_cubin(compiled: CompiledModule, digest: str) -> None:
    root = _cache_dir()
    if root is None:
        return
    try:
        root.mkdir(parents=True, exist_ok=True)
        stem = root / _cache_stem(compiled.arch, digest)
        for suffix, data in ((".cubin", compiled.cubin), (".log", compiled.log.encode())):
            tmp = stem.with_suffix(suffix + f".tmp{os.getpid()}")
            tmp.write_bytes(data)
            tmp.replace(stem.with_suffix(suffix))  # atomic: a reader never sees half a cubin
    except OSError:
        pass  # a read-only home is not an error; we simply compile again next time
