"""``bench.registry``: benchmarks by name, imported lazily, unknown names listing the known ones."""

from __future__ import annotations

import pytest

from slosched.bench import sim_speed
from slosched.bench.registry import bench_names, get_bench
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
