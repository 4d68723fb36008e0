"""The machine code of a compiled kernel (SASS), read with ``cuobjdump``, and its opcodes.

What a line of CUDA C becomes is not always what it says: a 16-byte vector written with a plain
assignment may compile to four 32-bit stores, and a store hint changes one opcode's suffix
(``STG.E.EF.128`` streams, ``STG.E.128`` does not). A probe or a test that depends on such a
detail reads it here instead of trusting the source::

    module = compile_file("src/minikernel/kernels/rmsnorm/rmsnorm.cu", "sm_90")
    opcodes(sass(module, "rmsnorm_kernel5_t512_c2_bf16"), "STG")
    # Counter({'STG.E.EF.128': 4, 'STG.E': 1}): y in four 16-byte streaming stores, rstd in one

``cuobjdump`` comes with the CUDA toolkit, and Triton's wheel carries a copy
(``triton/backends/nvidia/bin``), so it is found without a toolkit where Triton is installed.
No GPU is needed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections import Counter
from pathlib import Path

from .loader import CompiledModule

_OPCODE = re.compile(
    r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P[T0-9]+\s+)?([A-Z][A-Z0-9_]*(?:\.[A-Z0-9_]+)*)"
)


class SassUnavailable(RuntimeError):
    """No cuobjdump on PATH nor in Triton's wheel."""


def cuobjdump() -> Path:
    """The cuobjdump to use: the toolkit's on PATH, else the copy in Triton's wheel."""
    found = shutil.which("cuobjdump")
    if found:
        return Path(found)
    try:
        import triton
    except ImportError:
        triton = None
    if triton is not None:
        bundled = Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"
        if bundled.is_file():
            return bundled
    raise SassUnavailable(
        "cuobjdump not found: install the CUDA toolkit, or Triton (its wheel carries a copy)"
    )


def sass(module: CompiledModule, kernel: str) -> str:
    """The SASS of ``kernel`` in ``module`` as cuobjdump prints it. Raises KeyError naming the
    kernels the module has if ``kernel`` is not one of them."""
    if kernel not in module.kernel_names:
        raise KeyError(f"{kernel} is not in {module.path.name}: {sorted(module.kernel_names)}")
    with tempfile.TemporaryDirectory() as tmp:
        cubin = Path(tmp) / "module.cubin"
        cubin.write_bytes(module.cubin)
        out = subprocess.run(
            [str(cuobjdump()), "-sass", "-fun", kernel, str(cubin)],
            capture_output=True,
            text=True,
            check=True,
        )
    return out.stdout


def opcodes(text: str, prefix: str = "") -> Counter[str]:
    """How many times each opcode (with its suffixes, e.g. ``STG.E.EF.128``) appears in the
    SASS ``text``, counting only those that start with ``prefix``. A predicate (``@P0``) is
    not part of the opcode."""
    return Counter(op for op in _OPCODE.findall(text) if op.startswith(prefix))
