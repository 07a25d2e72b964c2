"""Capacity sweeps and fleet sizing on a small scenario (slosched.planning)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import slosched.cli.sweep as sweep_cli
import slosched.planning.sweep as sweep_module
from slosched.core.errors import ConfigError
from slosched.evaluation.sizing import WORK_TOLERANCE
from slosched.planning.sizing import min_passing, size
from slosched.planning.sweep import CapacityTask, Mix, SweepSettings, Workload, capacity_by_policy, sweep
from slosched.planning.workload import ScenarioJobs, instances_with_counts, unit_rate
from slosched.scenario.config import Scenario, parse_scenario

SMALL = {
    "name": "small",
    "seed": 3,
    "cluster": {
        "instances": [
            {"name": "a100", "gpu": "A100-80G", "model": "Llama-3-8B", "count": 1, "max_running": 8},
            {"name": "a6000", "gpu": "A6000", "model": "Llama-3-8B", "count": 1, "max_running": 8},
        ]
    },
    "workload": {"generator": "azure-conv", "arrival": {"process": "poisson", "rate": 2.0}, "num_jobs": 100},
    "slo": {"scale": 5.0},
    "policies": ["least-tokens+chunked-fcfs", "round-robin+fcfs"],
}
TINY = SweepSettings(seeds=(0,), num_jobs=60, precision=0.1, workers=1, jobs_per_slot=2.0)


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return parse_scenario(SMALL)


def test_mix_parses_labels_and_counts() -> None:
    assert Mix.parse("big=a100:4,a6000:0") == Mix("big", (("a100", 4), ("a6000", 0)))
    assert Mix.parse("a100:2").label == "a100:2"
    for bad in ("a100", "a100:x", "=", "a100:-1"):
        with pytest.raises(ConfigError, match="--mix"):
            Mix.parse(bad)


def test_counts_replace_groups_and_unknown_groups_are_named(scenario: Scenario) -> None:
    specs = instances_with_counts(scenario, {"a100": 3, "a6000": 0})
    assert [spec.gpu for spec in specs] == ["A100-80G"] * 3
    with pytest.raises(ConfigError, match="a100"):
        instances_with_counts(scenario, {"h100": 1})
    with pytest.raises(ConfigError, match="at least one"):
        instances_with_counts(scenario, {"a100": 0, "a6000": 0})


@example([0.0, 5e-324])  # a denormal span: its reciprocal overflows
@given(st.lists(st.floats(0, 1e4, allow_nan=False), min_size=2, max_size=50))
def test_unit_rate_keeps_order_and_has_a_mean_gap_of_one(times: list[float]) -> None:
    jobs = ScenarioJobs(parse_scenario(SMALL))(len(times), 0)
    shaped = unit_rate([replace(job, arrival_s=t) for job, t in zip(jobs, sorted(times), strict=False)])
    arrivals = [job.arrival_s for job in shaped]
    assert arrivals == sorted(arrivals) and arrivals[0] == 0.0
    if arrivals[-1] > 0:
        assert arrivals[-1] == pytest.approx(len(arrivals) - 1)


def test_more_instances_carry_more_and_the_headline_is_per_policy(scenario: Scenario) -> None:
    mixes = [Mix("one", (("a100", 1), ("a6000", 0))), Mix("three", (("a100", 3), ("a6000", 0)))]
    rows = sweep([Workload("small", scenario)], mixes, ["least-tokens+chunked-fcfs"], TINY)
    one, three = (row.capacity[0.90].median for row in rows)
    assert 0 < one < three
    assert rows[0].capacity[0.95].median <= one  # a stricter target is carried at a lower rate
    assert capacity_by_policy(rows) == {"least-tokens+chunked-fcfs": one}


def test_sizing_finds_the_smallest_passing_count(scenario: Scenario) -> None:
    one_a100 = sweep([Workload("s", scenario)], [Mix("one", (("a100", 1), ("a6000", 0)))], None, TINY)
    rate = 2.5 * one_a100[0].capacity[0.90].median  # needs more than one A100
    (row, *_rest) = size(scenario, ["a100"], ["least-tokens+chunked-fcfs"], rate, 0.90, TINY)
    assert row.min_count is not None and row.min_count >= 2
    assert row.tried[row.min_count] >= 0.90
    assert row.tried[row.min_count - 1] < 0.90  # the count below was measured to fail
    assert all(row.tried[count] < 0.90 for count in row.cut_short)  # a cut run only ever fails a count
    assert min_passing({1: 0.5, 2: 0.95, 4: 0.99}, 0.9) == 2


def test_sizing_rejects_unknown_groups_and_bad_rates(scenario: Scenario) -> None:
    with pytest.raises(ConfigError, match="--size"):
        size(scenario, ["h100"], None, 1.0, 0.9, TINY)
    with pytest.raises(ConfigError, match="--rate"):
        size(scenario, ["a100"], None, 0.0, 0.9, TINY)


@pytest.mark.slow
def test_ray_gives_the_same_answer_as_local_processes(scenario: Scenario) -> None:
    pytest.importorskip("ray")
    import ray

    mixes = [Mix("one", (("a100", 1), ("a6000", 0)))]
    local = sweep([Workload("small", scenario)], mixes, ["least-tokens+chunked-fcfs"], TINY)
    try:
        on_ray = sweep(
            [Workload("small", scenario)], mixes, ["least-tokens+chunked-fcfs"], replace(TINY, ray_address="local")
        )
    finally:
        ray.shutdown()
    assert [row.as_json() for row in on_ray] == [row.as_json() for row in local]


class _Searched(Exception):
    """Raised by a stand-in task runner: the test reads the workbenches the sweep would have searched."""


def test_the_full_sweep_sizes_runs_by_the_work_rule_and_the_quick_one_does_not(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    def run_tasks(function: object, tasks: list[CapacityTask], *args: object) -> None:
        raise _Searched({task.workbench.work_tolerance for task in tasks})

    monkeypatch.setattr(sweep_module, "run_tasks", run_tasks)
    assert sweep_cli.FULL.work_tolerance == WORK_TOLERANCE and sweep_cli.QUICK.work_tolerance is None
    for settings in (sweep_cli.FULL, sweep_cli.QUICK):
        with pytest.raises(_Searched) as searched:
            sweep([Workload("small", scenario)], [], None, settings)
        assert searched.value.args == ({settings.work_tolerance},)
