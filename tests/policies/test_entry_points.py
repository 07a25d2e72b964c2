"""Third-party policies through the ``slosched.policies`` entry-point group: nothing is installed; the tests
stand in for ``importlib.metadata.entry_points`` and put the modules on ``sys.path``."""

from __future__ import annotations

import importlib.metadata
import json
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from slosched.cli.main import app
from slosched.core.errors import ConfigError
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies import registry
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ADMISSIONS, BATCHINGS, ENGINE_PRESETS, ORDERINGS
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.registry import ENTRY_POINT_GROUP, PolicyContext, PolicyPluginError
from slosched.policies.spec import PolicyParams, PolicySpec
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from tests.conftest import make_cluster, make_jobs
from tests.scenario.test_config import BASE

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "third_party_policy"
_REGISTRIES = (ROUTERS, ORDERINGS, ADMISSIONS, BATCHINGS, ENGINE_PRESETS, JOB_POLICIES)

_PLUGIN = """
from slosched.policies.cluster.base import ROUTERS

class LastRouter:
    def route(self, request, instances, now_s):
        return len(instances) - 1

def register():
    ROUTERS.register("test-last")(lambda params, context: LastRouter())
"""


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[importlib.metadata.EntryPoint]]:
    """Entry points the registries load on next use (append to the list); names registered meanwhile and
    the modules imported are removed afterwards, so other tests see the built-in set."""
    points: list[importlib.metadata.EntryPoint] = []

    def fake(**kwargs: Any) -> list[importlib.metadata.EntryPoint]:
        return points if kwargs.get("group") == ENTRY_POINT_GROUP else []

    ROUTERS.names()  # the built-in policies first, so the snapshot below holds them
    before = [set(r._entries) for r in _REGISTRIES]
    modules = set(sys.modules)
    monkeypatch.setattr(importlib.metadata, "entry_points", fake)
    registry._load_all_policies.cache_clear()
    yield points
    for reg, names in zip(_REGISTRIES, before, strict=True):
        for name in set(reg._entries) - names:
            del reg._entries[name]
    for name in set(sys.modules) - modules:
        if not name.startswith("slosched."):
            del sys.modules[name]
    registry._load_all_policies.cache_clear()


def _point(name: str, value: str) -> importlib.metadata.EntryPoint:
    return importlib.metadata.EntryPoint(name, value, ENTRY_POINT_GROUP)


def _context() -> PolicyContext:
    return PolicyContext(make_cluster(2, 1), np.random.default_rng(0), HistoryOutputPredictor())


def test_an_entry_point_module_registers_its_policies(
    entry_points: list[importlib.metadata.EntryPoint], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fake_slosched_plugin.py").write_text(_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_points.append(_point("last", "fake_slosched_plugin:register"))  # a hook: called once
    assert "test-last" in ROUTERS.names()
    router, _ = PolicySpec.from_text("test-last+fcfs").build(_context()).cluster_layer()
    assert router.route(None, [1, 2, 3], 0.0) == 2  # type: ignore[arg-type]


def test_a_broken_entry_point_is_named_on_every_use(
    entry_points: list[importlib.metadata.EntryPoint], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken_slosched_plugin.py").write_text("import not_a_module_anywhere\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    entry_points.append(_point("broken", "broken_slosched_plugin"))
    for _ in range(2):  # the same message again, not a 'registered twice' from a half-done retry
        with pytest.raises(PolicyPluginError) as error:
            ROUTERS.names()
        message = str(error.value)
        assert "'broken' = 'broken_slosched_plugin'" in message and ENTRY_POINT_GROUP in message
        assert "ModuleNotFoundError" in message and "not_a_module_anywhere" in message


def test_the_example_package_declares_its_entry_point() -> None:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())
    assert project["project"]["entry-points"][ENTRY_POINT_GROUP] == {"my-router": "slosched_example_policy.router"}
    assert "pip install -e examples/third_party_policy" in (EXAMPLE / "README.md").read_text()


@pytest.fixture
def example_router(entry_points: list[importlib.metadata.EntryPoint], monkeypatch: pytest.MonkeyPatch) -> None:
    """The example package as if pip-installed: its source on sys.path, its declared entry point."""
    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    entry_points.append(_point("my-router", "slosched_example_policy.router"))


@pytest.mark.usefixtures("example_router")
def test_the_example_router_builds_routes_and_simulates() -> None:
    router, _ = PolicySpec.from_text("my-router+fcfs").build(_context()).cluster_layer()
    assert router.decode_weight == 1.0  # type: ignore[attr-defined]
    result = simulate(make_cluster(1, 1), make_jobs(20, rate=4.0), PolicyPair.parse("my-router+fcfs"), 0, SimOptions())
    assert result.policy == "my-router+fcfs" and len(result.jobs) == 20
    params = PolicyParams(router={"my-router": {"decode_weight": -1}})
    with pytest.raises(ConfigError, match=r"my-router\.decode_weight: expected a number >= 0"):
        PolicySpec.from_text("my-router+fcfs", params).build(_context())


@pytest.mark.usefixtures("example_router")
def test_the_cli_lists_and_compares_the_example(tmp_path: Path) -> None:
    scenario = tmp_path / "s.yaml"
    scenario.write_text(yaml.safe_dump(BASE))
    runner = CliRunner()
    listed = runner.invoke(app, ["policies"])
    assert listed.exit_code == 0 and "my-router" in listed.output
    compared = runner.invoke(app, ["compare", str(scenario), "--policies", "my-router+fcfs,round-robin+fcfs", "--json"])
    assert compared.exit_code == 0, compared.output
    assert "my-router+fcfs" in json.loads(compared.output.strip().splitlines()[-1])["policies"]
