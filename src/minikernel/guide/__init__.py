"""Code of the Triton guide (docs/triton/): teaching kernels and exercise solutions.

The ops each lesson shows live in their own packages under ``minikernel.kernels``; this package
holds what is not an op: the small kernels that make one idea visible (:mod:`.teaching`) and
the worked solutions of each lesson's exercises (:mod:`.solutions`).

``LESSON_CODE`` maps each lesson to the snippet sections a page can include, as
``(path relative to the repository root, section)``; ``tests/test_guide.py`` checks that every
one of them exists.
"""

from __future__ import annotations

_K = "src/minikernel/kernels"
_G = "src/minikernel/guide"


def _ex(lesson: int, *sections: str) -> list[tuple[str, str]]:
    return [(f"{_G}/solutions/lesson{lesson:02d}.py", s) for s in sections]


LESSON_CODE: dict[int, list[tuple[str, str]]] = {
    1: _ex(1, "ex1", "ex2"),
    2: [
        (f"{_K}/copy/triton_kernels.py", "kernel1"),
        (f"{_K}/copy/triton_kernels.py", "launch1"),
        (f"{_K}/copy/__init__.py", "environment"),
        (f"{_K}/copy/__init__.py", "copy"),
        (f"{_K}/copy/__init__.py", "sanity"),
        *_ex(2, "ex1", "ex2"),
    ],
    3: [
        (f"{_G}/teaching.py", "program_ids"),
        (f"{_G}/teaching.py", "metadata"),
        (f"{_K}/copy/triton_kernels.py", "kernel1"),
        *_ex(3, "ex1", "ex2", "ex3"),
    ],
    4: [
        (f"{_G}/teaching.py", "masked_load"),
        (f"{_K}/copy/triton_kernels.py", "kernel1"),
        *_ex(4, "ex1", "ex2", "ex3"),
    ],
    5: [
        (f"{_K}/vector_add/triton_kernels.py", "kernel1"),
        *_ex(5, "ex1", "ex2"),
    ],
    6: [
        (f"{_K}/copy/triton_kernels.py", "launch1"),
        *_ex(6, "ex1", "ex2", "ex3"),
    ],
    7: [
        (f"{_G}/teaching.py", "tile_ids"),
        (f"{_K}/transpose/triton_kernels.py", "copy2d"),
        (f"{_K}/transpose/triton_kernels.py", "kernel1"),
        (f"{_K}/transpose/triton_kernels.py", "kernel2"),
        (f"{_K}/transpose/__init__.py", "transpose"),
        (f"{_K}/add_bias/triton_kernels.py", "kernel1"),
        (f"{_K}/add_bias/__init__.py", "add_bias"),
        *_ex(7, "ex1", "ex2", "ex3"),
    ],
    8: _ex(8, "ex1", "ex2", "ex3"),  # the row softmax itself: minikernel.kernels.softmax
    9: _ex(9, "ex1", "ex2", "ex3"),  # the GEMM itself: minikernel.kernels.matmul
    10: _ex(10, "ex1", "ex2"),
    11: [],
}
