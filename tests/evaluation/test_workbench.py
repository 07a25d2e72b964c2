"""A workbench run's figures: the serving figures (vLLM's terms) of its measured requests, computed as
``slosched compare`` computes them, the warm-up prefix left out."""

from __future__ import annotations

import math

from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate, Workbench, measure, measured_only
from slosched.metrics.serving import serving_stats
from slosched.metrics.summary import summarize
from slosched.sim.options import SimOptions
from slosched.workloads.generators import make_workload
from tests.conftest import make_cluster


def _chat_jobs(num_jobs: int, seed: int) -> list[JobSpec]:
    return make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, num_jobs, {}, seed=seed)


def test_a_run_carries_the_serving_figures_of_its_measured_requests() -> None:
    bench = Workbench("chat", make_cluster(1, 1), _chat_jobs, 40, SimOptions(slo_scale=4.0), num_warmup_jobs=10)
    candidate = Candidate.of("least-tokens+chunked-fcfs")
    jobs, history = bench.workload(rate=3.0, seed=2)
    result = bench.run_fn(candidate, bench.instances, jobs, bench.options, 2, history)
    figures = measure(result, 3.0, 2)
    assert figures.serving is not None
    # What `compare` reports for the same records, and serving_stats itself over the measured requests.
    assert figures.serving == summarize(measured_only(result)).serving
    measured = [r for r in result.requests if not r.job_id.startswith(WARMUP_PREFIX)]
    ends = [job.finish_s for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)]
    starts = [job.arrival_s for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)]
    assert figures.serving == serving_stats(measured, max(ends) - min(starts))
    assert figures.serving.completed == sum(r.outcome is Outcome.COMPLETED for r in measured) > 0
    assert len(measured) < len(result.requests)  # the warm-up requests were there, and left out
    stats = figures.serving.to_json_dict()
    assert stats["total_token_throughput"] > stats["output_throughput"] > 0
    assert 0 < stats["request_goodput"] <= stats["request_throughput"]
    assert all(math.isfinite(stats[f"p99_{name}_ms"]) for name in ("ttft", "tpot", "itl", "e2el"))
    # The run at this rate through the workbench gives the same figures (same seed, same jobs).
    assert bench.run(candidate, 3.0, 2).serving == figures.serving
