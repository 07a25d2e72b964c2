"""Fleet search (``planning/fleet.py``) and prices (``planning/prices.py``) on a tiny workload."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from tests.planning.test_sweep import SMALL

from slosched.core.errors import ConfigError
from slosched.perf.roofline import CALIBRATION
from slosched.planning.fleet import calibrated_gpus, search_fleet, tokens_per_job
from slosched.planning.fleet_counts import FleetProbe, fleet_probe
from slosched.planning.fleet_rows import FleetRow, FleetType, MixRow
from slosched.planning.prices import Prices, per_dollar
from slosched.planning.probe import lower_median
from slosched.planning.sweep import SweepSettings
from slosched.planning.workload import (
    ScenarioJobs,
    candidates_of,
    instances_with_counts,
    with_slo_reference,
    workbench_of,
)
from slosched.scenario.config import Scenario, parse_scenario

TINY = SweepSettings(seeds=(0,), num_jobs=40, precision=0.1, workers=1, jobs_per_slot=2.0)
GPUS = ["A100-80G", "A6000", "H100"]


@pytest.fixture(scope="module")
def scenario() -> Scenario:
    return parse_scenario(SMALL)


def test_prices_override_in_order_and_cost_a_fleet(scenario: Scenario) -> None:
    prices = Prices.of({"A100": 1.0}, ["A100-80G=2.5", "A6000=0.5"])
    assert prices.per_gpu_hour("A100-80G") == 2.5  # the flag wins over the scenario, the alias resolves
    assert prices.per_gpu_hour("H100") == 2.99  # the hardware file's list price
    assert prices.fleet_per_hour(instances_with_counts(scenario, {})) == 3.0
    assert per_dollar(6.0, 3.0) == 2.0 and per_dollar(6.0, None) is None
    for bad in ("H100", "H100=x", "H100=-1", "H100=nan"):
        with pytest.raises(ConfigError, match="--price"):
            Prices.of({}, [bad])
    with pytest.raises(ConfigError, match="gpu"):
        Prices.of({}, ["H300=1"])


def test_the_roofline_floor_is_a_lower_bound_on_instances() -> None:
    kind = FleetType("H100", 1, 3.0, roofline_rps=2.5, fits=True)
    assert [kind.floor(rate) for rate in (0.1, 2.5, 2.6, 10.0)] == [1, 1, 2, 4]
    assert kind.cost(3) == 9.0


def test_tokens_per_job_counts_uncached_prompts_and_outputs(scenario: Scenario) -> None:
    jobs = ScenarioJobs(scenario)(20, 0)
    full = sum(c.input_tokens + c.output_tokens for j in jobs for s in j.stages for c in s.calls) / len(jobs)
    assert 1.0 <= tokens_per_job(jobs) <= full


def test_slo_reference_reaches_the_options(scenario: Scenario) -> None:
    instances = instances_with_counts(scenario, {"a6000": 0})
    bench = workbench_of(scenario, instances, 40, "x")
    reference = instances_with_counts(scenario, {})
    assert with_slo_reference(bench, reference).options.slo_reference == reference
    assert with_slo_reference(bench, ()) is bench


def _search(scenario: Scenario, prices: Prices) -> dict:
    found = search_fleet(scenario, 1.0, 0.9, "least-tokens+chunked-fcfs", TINY, prices, GPUS, [1], measure=1)
    document = found.as_json()
    carried = [row for row in document["candidates"] + document["mixes"] if row["status"] == "carries"]
    answer = document["answer"]
    assert answer is not None and min(carried, key=lambda row: row["cost_per_hour"]) == answer
    # Every two-type fleet tried costs less than the cheapest one-type fleet; only the last may carry.
    one_type = min(row["cost_per_hour"] for row in document["candidates"] if row["status"] == "carries")
    assert all(row["cost_per_hour"] < one_type for row in document["mixes"])
    assert all(row["status"] == "not carried" for row in document["mixes"][:-1])
    assert all(answer["cost_per_hour"] <= row["cost_per_hour"] for row in carried)
    for row in document["candidates"]:
        if row["status"] == "pruned":  # its roofline floor alone costs more than the answer
            assert row["roofline_min_instances"] * row["price_per_gpu_hour"] > answer["cost_per_hour"]
    assert answer["capacity_rps"]["median"] >= 1.0  # it carries the rate, so its capacity is at least it
    assert math.isclose(answer["capacity_per_dollar"], answer["capacity_rps"]["median"] / answer["cost_per_hour"])
    return document


def test_search_picks_the_cheapest_fleet_and_follows_prices(scenario: Scenario) -> None:
    document = _search(scenario, Prices())
    assert set(document) == {"rate", "target", "policy", "model", "answer", "candidates", "mixes"}
    assert {row["gpu"] for row in document["candidates"]} == set(GPUS)
    # Make the H100 nearly free: it becomes the answer, and the others cannot beat one of it.
    cheap = _search(scenario, Prices.of({}, ["H100=0.01"]))
    assert cheap["answer"]["parts"] == [{"gpu": "H100", "tp": 1, "instances": 1}] and not cheap["mixes"]


def test_search_rejects_bad_rates(scenario: Scenario) -> None:
    with pytest.raises(ConfigError, match="--rate"):
        search_fleet(scenario, 0.0, 0.9, "round-robin+fcfs", TINY, Prices(), GPUS)
    with pytest.raises(ConfigError, match="--measure"):
        search_fleet(scenario, 1.0, 0.9, "round-robin+fcfs", TINY, Prices(), GPUS, measure=-1)


def test_a_fleet_that_carries_the_rate_has_a_capacity_of_at_least_it(scenario: Scenario) -> None:
    """One answer per question (issue 26, item 4): the count probe and the capacity search ask the same runs
    (``planning/probe.py``), and with two seeds a count carries only where both seeds pass, so every fleet
    found has each seed's capacity, and so the median, at or above the rate."""
    two_seeds = replace(TINY, seeds=(0, 1))
    rate = 3.0  # where a two-type fleet carries too (``test_fleet_mixes.py``)
    found = search_fleet(scenario, rate, 0.9, "least-tokens+chunked-fcfs", two_seeds, Prices(), GPUS, [1], measure=3)
    measured = [row for row in found.ranked() if row.capacity is not None]
    assert all(row.status == "carries" for row in measured)
    assert {type(row) for row in measured} == {FleetRow, MixRow}
    reference = tuple(instances_with_counts(scenario, {}))
    (candidate,) = candidates_of(scenario, ["least-tokens+chunked-fcfs"])
    for row in measured:
        assert row.capacity is not None and min(row.capacity.values) >= rate
        # The figure shown for the fleet is the lower median of the very runs a capacity search starts from.
        runs = [
            fleet_probe(FleetProbe(scenario, row.parts, candidate, two_seeds, reference, seed, rate, 0.9))
            for seed in two_seeds.seeds
        ]
        shown = row.figure if isinstance(row, MixRow) else row.tried[row.parts[0][1]]
        assert shown == lower_median(runs).value


def test_the_search_does_not_depend_on_the_number_of_workers(scenario: Scenario) -> None:
    alone = search_fleet(scenario, 2.0, 0.9, "least-tokens+chunked-fcfs", TINY, Prices(), GPUS, [1], measure=1)
    many = search_fleet(
        scenario, 2.0, 0.9, "least-tokens+chunked-fcfs", replace(TINY, workers=2), Prices(), GPUS, [1], measure=1
    )
    assert alone.as_json() == many.as_json()


@pytest.mark.slow
def test_ray_gives_the_same_search_as_local_processes(scenario: Scenario) -> None:
    pytest.importorskip("ray")
    import ray

    local = search_fleet(scenario, 3.0, 0.9, "least-tokens+chunked-fcfs", TINY, Prices(), GPUS, [1], measure=1)
    try:
        on_ray = search_fleet(
            scenario, 3.0, 0.9, "least-tokens+chunked-fcfs", replace(TINY, ray_address="local"), Prices(), GPUS, [1], 1
        )
    finally:
        ray.shutdown()
    assert on_ray.as_json() == local.as_json()


def test_default_candidates_are_the_gpus_measured_for_the_stack() -> None:
    """H200 has scales of its own on the current engine (fitted to H200 steps), not on the older stacks."""
    current, older = calibrated_gpus("vllm-v1"), calibrated_gpus("splitwise")
    assert "H200" in current and "H200" not in older
    assert set(older) == set(CALIBRATION.gpus) and set(current) == set(older) | {"H200"}
    assert not {"B200", "L4", "MI300X"} & set(current)  # borrowed efficiencies stay opt-in (--gpus)
