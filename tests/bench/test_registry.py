"""``bench.registry``: benchmarks by name, imported lazily, unknown names listing the known ones; every
registered benchmark follows the ``Benchmark`` shape (``bench.base``) and its layout."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from slosched.bench import sim_speed
from slosched.bench.base import Benchmark
from slosched.bench.registry import _BENCH_MODULES, bench_names, get_bench, get_benchmark
from slosched.core.errors import UnknownNameError


def test_names_are_sorted_and_cover_the_cli_benchmarks() -> None:
    names = bench_names()
    assert names == sorted(names)
    assert {"sim-speed", "gateway", "overhead", "fidelity", "soak"} <= set(names)


def test_get_bench_returns_the_module_run_function_once() -> None:
    assert get_bench("sim-speed") is sim_speed.run
    assert get_bench("sim-speed") is get_bench("sim-speed")


def test_unknown_names_list_the_known_ones() -> None:
    with pytest.raises(UnknownNameError) as error:
        get_bench("sim_speed")
    assert error.value.field == "bench" and error.value.known == bench_names()


@pytest.mark.parametrize("name", bench_names())
def test_every_benchmark_follows_the_shape(name: str) -> None:
    benchmark = get_benchmark(name)
    assert isinstance(benchmark, Benchmark) and benchmark.name == name
    assert benchmark.summary and "\n" not in benchmark.summary
    assert list(inspect.signature(benchmark.run).parameters) == ["quick"]
    assert get_bench(name) is benchmark.run


def _slosched_imports(path: Path) -> set[str]:
    """Every module a file imports (function-level and TYPE_CHECKING imports included)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


@pytest.mark.parametrize("name", bench_names())
def test_a_report_never_imports_the_runs_that_feed_it(name: str) -> None:
    """Imports go runs -> report -> setup: a report reads figures, so report and runs form no circle."""
    module = importlib.import_module(_BENCH_MODULES[name])
    if not hasattr(module, "__path__"):
        return  # a one-module benchmark has no separate report
    package = Path(module.__path__[0])
    assert (package / "runs.py").is_file()
    for other in package.glob("*.py"):
        if other.name not in ("runs.py", "__init__.py"):
            assert f"{module.__name__}.runs" not in _slosched_imports(other), other
