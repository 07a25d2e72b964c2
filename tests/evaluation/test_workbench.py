"""A workbench run's figures: the serving figures (vLLM's terms) of its measured requests, computed as
``slosched compare`` computes them, the warm-up prefix left out."""

from __future__ import annotations

import math

import pytest

import slosched.evaluation.workbench as workbench_module
from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.core.request import Outcome
from slosched.evaluation.workbench import (
    SELF_TUNE,
    TUNE_PREFIX,
    WARMUP_PREFIX,
    Candidate,
    Workbench,
    measure,
    measured_only,
    rate_bucket,
    window_attainment,
)
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


def _self_tuning_bench(num_warmup_jobs: int) -> Workbench:
    options = SimOptions(slo_scale=3.0)
    return Workbench("chat", make_cluster(1, 1), _chat_jobs, 20, options, num_warmup_jobs=num_warmup_jobs)


def test_a_self_tuning_stack_tunes_on_past_traffic_only_and_retunes_by_rate_bucket(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    windows: list[list[JobSpec]] = []
    real = workbench_module.tuned_params

    def spy(params, instances, window, *args):  # type: ignore[no-untyped-def]
        windows.append(list(window))
        return real(params, instances, window[:6], *args)  # a short window keeps the test fast

    monkeypatch.setattr(workbench_module, "tuned_params", spy)
    monkeypatch.setattr(workbench_module, "_TUNED", {})
    bench = _self_tuning_bench(num_warmup_jobs=5)
    stack = Candidate(label="slosched", policy="slosched", job_policy="slosched", extras=((SELF_TUNE, True),))
    jobs, history = bench.workload(rate=2.0, seed=4)
    tuned = bench.self_tuned(stack, 2.0, 4, history)
    assert not tuned.extra(SELF_TUNE)
    assert {"token_budget", "best_effort_share"} <= set(tuned.params.stack["slosched"])
    # The window is the history sample (another seed's jobs), never a measured job.
    (window,) = windows
    measured = [job for job in jobs if not job.id.startswith(WARMUP_PREFIX)]
    assert all(job.id.startswith(TUNE_PREFIX) for job in window)
    assert [job.stages for job in window] == [job.stages for job in history[: len(window)]]
    assert not {job.stages for job in window} & {job.stages for job in measured}
    bucket_rate = workbench_module.RETUNE_RATIO ** rate_bucket(2.0)  # the rate the window replays at
    assert abs(bucket_rate / 2.0 - 1) < 0.05
    assert [job.arrival_s for job in window] == [job.arrival_s / bucket_rate for job in history[: len(window)]]
    # A rate within the same bucket reuses the tuning; one a bucket away retunes.
    assert rate_bucket(2.0) == rate_bucket(2.0 * 1.01) != rate_bucket(2.0 * 1.1)
    assert bench.self_tuned(stack, 2.0 * 1.01, 4, history) == tuned and len(windows) == 1
    bench.self_tuned(stack, 2.0 * 1.1, 4, history)
    assert len(windows) == 2
    # A run says which block it ran with (the bench's JSON shows it at capacity); a fixed candidate, none.
    figures = bench.run(stack, 2.0, 4)
    assert dict(figures.tuned) == tuned.params.stack["slosched"] and len(windows) == 2
    assert bench.run(tuned, 2.0, 4).tuned == ()


def test_a_cold_start_keeps_the_defaults_and_a_pair_cannot_self_tune() -> None:
    stack = Candidate(label="slosched", policy="slosched", job_policy="slosched", extras=((SELF_TUNE, True),))
    cold = _self_tuning_bench(num_warmup_jobs=0)
    _, history = cold.workload(rate=2.0, seed=4)
    plain = Candidate(label="slosched", policy="slosched", job_policy="slosched")
    assert cold.self_tuned(stack, 2.0, 4, history) == plain
    assert cold.run(stack, 2.0, 4).tuned == ()  # nothing tuned, nothing reported
    pair = Candidate.of("least-tokens+chunked-fcfs", extras=((SELF_TUNE, True),))
    with pytest.raises(ConfigError, match=r"self_tune.*not a stack"):
        _self_tuning_bench(num_warmup_jobs=5).self_tuned(pair, 2.0, 4, history)


def test_a_longer_run_of_the_same_workload_learns_its_deadlines_from_the_same_past_traffic() -> None:
    """The convergence check compares a run with one 4x longer: the warm-up prefix grows with the run, but
    the history the deadlines learn from must not (on the stack bench's mixed workload a history that grew
    with it made the same jobs' deadlines 1-10% looser on average, and a baseline's capacity 10-41% higher at
    4x the length: a different SLO, not a longer run)."""
    bench = Workbench("chat", make_cluster(1, 1), _chat_jobs, 400, SimOptions(slo_scale=3.0), num_warmup_jobs=50)
    assert bench.history_size == workbench_module.HISTORY_FLOOR
    longer = bench.sized(4 * bench.num_jobs)
    assert longer.num_warmup_jobs == bench.num_jobs > bench.history_size  # the prefix grew past the history
    _, history = bench.workload(rate=2.0, seed=3)
    jobs, long_history = longer.workload(rate=2.0, seed=3)
    assert long_history == history
    warmup = [job for job in jobs if job.id.startswith(WARMUP_PREFIX)]
    assert len(warmup) == longer.num_warmup_jobs
    # The longer prefix is more of the history's own stream (another seed's jobs), never a measured job.
    past = _chat_jobs(longer.num_warmup_jobs, 3 + workbench_module.HISTORY_SEED_OFFSET)
    assert [job.stages for job in warmup] == [job.stages for job in past]
    assert longer.sized(8 * bench.num_jobs).workload(rate=2.0, seed=3)[1] == history
    # Without a grown prefix nothing changes: the history is the warm-up sample's own jobs, as before.
    short_jobs, short_history = bench.workload(rate=2.0, seed=3)
    assert [job.stages for job in short_jobs[:50]] == [job.stages for job in short_history[:50]]


def test_the_first_eighth_is_judged_on_the_window_s_earliest_arrivals_only() -> None:
    met = [(float(arrival), arrival >= 2) for arrival in range(16)]  # a window of 0-15 s; the first two late
    assert window_attainment(met, 0.0, 15.0 / 8) == 0.0 and window_attainment(met, 2.0, 16.0) == 1.0
    assert math.isnan(window_attainment(met, 20.0, 30.0))  # nobody arrived then
