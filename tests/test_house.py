"""The house rules of ``src/slosched`` (DESIGN sections 7 and 8), checked on the sources themselves.

import-linter (``make lint``) enforces the layers; these tests add what it cannot see: import circles that
only ``TYPE_CHECKING`` or function-level imports close, product modules that reach into the benchmarks,
and the size limits (files <= 400 lines, functions <= 60) met without packing lines under ``# fmt: skip``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "slosched"
MAX_FILE_LINES = 400
MAX_FUNCTION_LINES = 60
# The command line dispatches ``slosched bench NAME``; nothing else of the product may depend on bench/.
MAY_IMPORT_BENCH = ("slosched.bench", "slosched.cli")


def _modules() -> dict[str, Path]:
    modules = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(SRC).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    return modules


MODULES = _modules()


def _imported(name: str, path: Path) -> Iterator[str]:
    """Every slosched module ``name`` imports, wherever the import sits (TYPE_CHECKING blocks, functions)."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    for node in ast.walk(ast.parse(path.read_text())):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parts, base] if base else parts)
            targets = [base, *(f"{base}.{alias.name}" for alias in node.names)]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                yield target


GRAPH = {name: set(_imported(name, path)) for name, path in MODULES.items()}


def _circles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []
    for root in GRAPH:
        if root in index:
            continue
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        circles.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(GRAPH[child]))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return circles


def test_no_import_circle_anywhere_type_checking_imports_included() -> None:
    assert _circles() == []


def test_the_circle_finder_finds_a_circle() -> None:
    """The check above can fail: a two-module circle added to the graph is found."""
    GRAPH["slosched.core.deadline"].add("slosched.core.views")
    try:
        assert ["slosched.core.deadline", "slosched.core.views"] in _circles()
    finally:
        GRAPH["slosched.core.deadline"].discard("slosched.core.views")


def test_nothing_of_the_product_imports_the_benchmarks() -> None:
    users = [
        name
        for name, targets in GRAPH.items()
        if not name.startswith(MAY_IMPORT_BENCH) and any(t.startswith("slosched.bench") for t in targets)
    ]
    assert users == []


@pytest.mark.parametrize("path", MODULES.values(), ids=lambda path: str(path.relative_to(PACKAGE)))
def test_small_files_short_functions_no_packed_lines(path: Path) -> None:
    text = path.read_text()
    assert text.count("\n") <= MAX_FILE_LINES
    assert "fmt: skip" not in text
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            assert node.end_lineno - node.lineno + 1 <= MAX_FUNCTION_LINES, node.name
