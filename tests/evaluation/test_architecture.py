"""Layering the import linter checks too, kept here so a plain ``pytest`` run catches it: benchmarks sit on
top, so nothing of the product (anything outside ``bench/`` and the CLI) imports them, and ``evaluation``
imports neither ``planning`` nor ``bench``. Function-level and TYPE_CHECKING imports count."""

from __future__ import annotations

import ast
from pathlib import Path

import slosched

ROOT = Path(slosched.__file__).parent


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def _offenders(files: list[Path], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        f"{path.relative_to(ROOT)} imports {module}"
        for path in files
        for module in _imports(path)
        if module == "slosched" or module.startswith(tuple(f"slosched.{name}" for name in forbidden))
    )


def test_nothing_outside_bench_and_the_cli_imports_bench() -> None:
    product = [
        path
        for path in ROOT.rglob("*.py")
        if path.relative_to(ROOT).parts[0] != "bench" and not path.relative_to(ROOT).parts[0].startswith("cli")
    ]
    assert _offenders(product, ("bench",)) == []


def test_evaluation_sits_below_planning_and_bench() -> None:
    assert _offenders(list((ROOT / "evaluation").rglob("*.py")), ("bench", "planning")) == []
