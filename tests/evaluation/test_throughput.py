"""``evaluation.throughput``: saturation throughput on a tiny burst, and the sustained
throughput of a candidate on a workbench under overload."""

from __future__ import annotations

import math
from dataclasses import replace

from slosched.core.job import JobSpec
from slosched.evaluation.throughput import saturation_throughput, sustained_throughput
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.sim.options import SimOptions
from slosched.workloads.generators import make_workload
from tests.conftest import make_cluster, make_jobs


def test_saturation_throughput_queues_everything_at_once() -> None:
    jobs = make_jobs(num_jobs=60, mean_in=300, mean_out=40)
    cluster = make_cluster()
    rate = saturation_throughput(cluster, jobs, "least-loaded+chunked-fcfs")
    assert math.isfinite(rate) and rate > 0
    assert rate == saturation_throughput(cluster, jobs, "least-loaded+chunked-fcfs")
    # A burst: the jobs' own arrival times do not matter.
    later = [replace(job, arrival_s=job.arrival_s * 10 + 5) for job in jobs]
    assert saturation_throughput(cluster, later, "least-loaded+chunked-fcfs") == rate


def _chat_jobs(num_jobs: int, seed: int) -> list[JobSpec]:
    return make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, num_jobs, {}, seed=seed)


def test_sustained_throughput_is_bounded_by_the_overload_and_reproducible() -> None:
    bench = Workbench("chat", make_cluster(1, 1), _chat_jobs, 60, SimOptions(slo_scale=6.0), num_warmup_jobs=10)
    candidate = Candidate.of("least-loaded+chunked-fcfs")
    light = sustained_throughput(bench, candidate, 0.5, seed=1)
    heavy = sustained_throughput(bench, candidate, 50.0, seed=1)
    assert 0 < light <= 0.5 * 1.5  # below saturation it completes about what arrives
    assert light < heavy < 50.0  # under overload it completes more, but far less than arrives
    assert heavy == sustained_throughput(bench, candidate, 50.0, seed=1)
