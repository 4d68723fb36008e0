"""Labs read module-level names from their functions; each must be bound before the first call.

A lab is a script run top to bottom, and most of it runs only on a GPU, so a name that a
function reads before the module has bound it (a constant defined under a later section, say)
fails only on the GPU runner, minutes into a run. Lab 01 did: its B sweep called measure_case,
which read ENERGY_AT, defined under the N sweep below it. This check finds such names statically,
on CPU: for every top-level statement that calls a function of the module, the module-level
names that function reads (directly or through the module's other functions it calls) must be
bound by an earlier statement.
"""

from __future__ import annotations

import ast
import builtins
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LABS = sorted((ROOT / "labs").glob("*.py"))
BUILTINS = set(dir(builtins)) | {"__file__", "__name__", "__doc__"}


def bound_names(node: ast.AST) -> set[str]:
    """Names a statement binds in the scope it runs in (not inside functions it defines)."""
    out: set[str] = set()

    def visit(n: ast.AST) -> None:
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(n.name)
            return  # its body is another scope
        if isinstance(n, ast.Lambda):
            return
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            out.add(n.id)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                out.add((a.asname or a.name).split(".")[0])
        elif isinstance(n, ast.ExceptHandler) and n.name:
            out.add(n.name)
        for child in ast.iter_child_nodes(n):
            visit(child)

    visit(node)
    return out


def function_reads(fn: ast.FunctionDef) -> tuple[set[str], set[str]]:
    """(names the function reads that it does not bind itself, names of functions it calls)."""
    local: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.arg):
            local.add(n.arg)
        elif isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            local.add(n.id)
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n is not fn:
            local.add(n.name)
        elif isinstance(n, (ast.Import, ast.ImportFrom)):
            local.update((a.asname or a.name).split(".")[0] for a in n.names)
        elif isinstance(n, ast.ExceptHandler) and n.name:
            local.add(n.name)
        elif isinstance(n, ast.Global):
            local.difference_update(n.names)
    reads = {
        n.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in local
    }
    calls = {
        n.func.id for n in ast.walk(fn) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }
    return reads, calls


def order_problems(source: str) -> list[str]:
    """Each (statement line, function, name) where a call reads a module name not yet bound."""
    tree = ast.parse(source)
    funcs = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    reads = {name: function_reads(fn) for name, fn in funcs.items()}

    def needs(name: str) -> set[str]:
        seen, todo, out = set(), [name], set()
        while todo:
            f = todo.pop()
            if f in seen or f not in reads:
                continue
            seen.add(f)
            r, c = reads[f]
            out |= r
            todo.extend(c)
        return out

    problems: list[str] = []
    bound: set[str] = set(BUILTINS)
    for stmt in tree.body:
        if not isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            here = bound | bound_names(stmt)
            called = {
                n.func.id
                for n in ast.walk(stmt)
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in funcs
            }
            for f in sorted(called):
                for missing in sorted(needs(f) - here):
                    problems.append(f"line {stmt.lineno}: {f}() reads {missing}, not bound yet")
        bound |= bound_names(stmt)
    return problems


@pytest.mark.parametrize("lab", LABS, ids=lambda p: p.name)
def test_lab_binds_names_before_its_functions_read_them(lab: Path) -> None:
    assert order_problems(lab.read_text()) == []


def test_the_check_finds_a_name_bound_after_the_first_call() -> None:
    # Lab 01's bug in miniature (fixture): the first loop calls measure() before LIMIT exists.
    src = (
        "def measure(n):\n"
        "    return n in LIMIT\n"
        "for n in [1, 2]:\n"
        "    measure(n)\n"
        "LIMIT = (1,)\n"
        "measure(3)\n"
    )
    assert order_problems(src) == ["line 3: measure() reads LIMIT, not bound yet"]


def test_the_check_follows_calls_between_functions() -> None:
    src = "def inner():\n    return K\ndef outer():\n    return inner()\nouter()\nK = 1\n"
    assert order_problems(src) == ["line 5: outer() reads K, not bound yet"]


def test_the_check_accepts_names_bound_first_and_locals() -> None:
    src = (
        "import math\n"
        "K = 2\n"
        "def f(x):\n"
        "    y = [i for i in range(x)]\n"
        "    return math.sqrt(K) + len(y)\n"
        "f(3)\n"
    )
    assert order_problems(src) == []
