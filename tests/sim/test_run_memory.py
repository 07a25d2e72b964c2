"""A finished simulation is freed by reference counting (``ClusterSim.run`` breaks its reference cycles).

The run pauses the cyclic collector and moves what it made to the oldest generation, which is seldom walked
in full: a finished run held by cycles stayed there as garbage, jobs and records included, and a bench
worker doing hundreds of runs grew to 13 GB. Here, everything of this package a run leaves behind must be
freed without the collector's help (the collector would report it as garbage)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.workloads.generators import make_workload
from tests.conftest import make_instance

POLICIES = ("least-tokens+chunked-fcfs", "slosched", "workload-balanced+urgency", "prism+lens")
JOB_POLICIES = {"slosched": "slosched", "workload-balanced+urgency": "stage-budget"}


@pytest.fixture
def saved_garbage() -> Iterator[list[object]]:
    """``gc.garbage`` while the collector keeps what it finds (restored afterwards)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        yield gc.garbage
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.mark.parametrize("policy", POLICIES)
def test_a_finished_run_leaves_no_cyclic_garbage(policy: str, saved_garbage: list[object]) -> None:
    instances = [make_instance("a"), make_instance("b", gpu="A100-40G")]
    jobs = make_workload("text2sql-chess", {"process": "poisson", "rate": 0.5}, 12, seed=2)
    options = SimOptions(slo_scale=3.0)
    result = simulate(
        instances, jobs, PolicyPair.parse(policy), 1, options, job_policy=JOB_POLICIES.get(policy, "deadline")
    )
    assert len(result.jobs) == len(jobs)
    del result
    gc.collect()
    ours = sorted({type(item).__qualname__ for item in saved_garbage if type(item).__module__.startswith("slosched")})
    assert ours == []
