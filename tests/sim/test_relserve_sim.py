"""RelServe in the simulator: every row finishes, results are deterministic, and dynamic priorities
beat FCFS on a loaded relQuery trace; ``static-sum`` gives every row of a job one priority."""

from __future__ import annotations

import pytest

from slosched.core.instance import InstanceSpec
from slosched.core.request import Outcome
from slosched.metrics.breakdown import relquery_breakdown
from slosched.policies.engine.ordering.relserve_overhead import OverheadMeter
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.workloads import make_workload

SPEC = InstanceSpec(name="opt", gpu="A100-40G", model="OPT-13B", max_running=256, max_batched_tokens=2048)


def run(engine: str, jobs: list, meter: OverheadMeter | None = None, job_policy: str = "deadline"):  # type: ignore[no-untyped-def]
    params = PolicyParams(engine={engine: {"overhead_meter": meter}}) if meter is not None else None
    return simulate([SPEC], jobs, PolicyPair.parse(f"round-robin+{engine}"), 2, SimOptions(), params, job_policy)


@pytest.fixture(scope="module")
def jobs() -> list:  # type: ignore[type-arg]
    return make_workload("relquery", {"process": "poisson", "rate": 0.8}, 30, {"dataset": "rotten"}, seed=5)


def mean_latency(result) -> float:  # type: ignore[no-untyped-def]
    assert all(job.outcome is Outcome.COMPLETED for job in result.jobs)
    return sum(job.latency_s for job in result.jobs) / len(result.jobs)


@pytest.mark.parametrize("engine", ["relserve", "relserve-pp", "relserve-dp"])
def test_relserve_variants_finish_every_row(engine: str, jobs: list) -> None:  # type: ignore[type-arg]
    meter = OverheadMeter()
    result = run(engine, jobs, meter)
    assert len(result.requests) == sum(job.num_calls for job in jobs)
    mean_latency(result)
    stats = relquery_breakdown(result)
    assert stats.count == len(jobs) and stats.latency_s == pytest.approx(mean_latency(result))
    assert meter.num_iterations > 0 and 0 < meter.total_s < result.end_s


def test_deterministic_and_faster_than_fcfs(jobs: list) -> None:  # type: ignore[type-arg]
    first, again = run("relserve", jobs), run("relserve", jobs)
    assert [r.finish_s for r in first.requests] == [r.finish_s for r in again.requests]
    assert mean_latency(first) < mean_latency(run("fcfs", jobs))


def test_static_sum_baseline_finishes(jobs: list) -> None:  # type: ignore[type-arg]
    result = run("static-priority", jobs, job_policy="static-sum")
    assert mean_latency(result) < mean_latency(run("fcfs", jobs))
