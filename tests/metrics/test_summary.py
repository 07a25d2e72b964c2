import json
import math

import numpy as np
import pytest

from slosched.core.records import InstanceStats
from slosched.core.request import Outcome
from slosched.metrics.summary import LatencyStats, json_safe, summarize

from .factories import job, rejected, request, run

JSON_KEYS = {
    "jobs",
    "rejected",
    "slo_attainment",
    "mean_latency_s",
    "p50_latency_s",
    "p90_latency_s",
    "p99_latency_s",
    "min_slo_scale_95",
    "min_slo_scale_99",
    "throughput_jobs_per_s",
    "goodput_jobs_per_s",
    "mean_ttft_s",
    "p90_ttft_s",
    "mean_tpot_s",
    "p90_tpot_s",
    "serving",  # vLLM's benchmark keys (tests/metrics/test_serving_stats.py)
}


def mixed_run():
    """Latencies 1, 2, 3, 4 (the 4 s one misses its 3.5 s SLO), one rejected, one failed.

    First arrival 0, last finish 2 + 4 = 6 (the failed job's finish at 5 is earlier): makespan 6 s.
    """
    jobs = [
        job("a", arrival_s=0.0, latency_s=1.0, slo_s=3.5),
        job("b", arrival_s=1.0, latency_s=2.0, slo_s=3.5),
        job("c", arrival_s=1.0, latency_s=3.0, slo_s=3.5),
        job("d", arrival_s=2.0, latency_s=4.0, slo_s=3.5),
        rejected("e", arrival_s=0.5),
        job("f", arrival_s=1.0, latency_s=4.0, outcome=Outcome.FAILED),
    ]
    requests = [
        request("q1", ttft_s=0.1, tpot_s=0.01, output_tokens=11, queueing_s=0.05),
        request("q2", ttft_s=0.3, tpot_s=0.03, output_tokens=21, queueing_s=0.15),
        request("q3", ttft_s=0.2, output_tokens=1, queueing_s=0.0),
        request("q4", ttft_s=9.0, output_tokens=50, outcome=Outcome.FAILED),
    ]
    instances = [
        InstanceStats(
            "i0", num_steps=10, busy_s=3.0, prefix_query_tokens=300, prefix_hit_tokens=100, num_preemptions=2
        ),
        InstanceStats("i1", num_steps=5, busy_s=1.0, prefix_query_tokens=100, prefix_hit_tokens=0, num_preemptions=1),
    ]
    return run(jobs, requests, instances, policy="mix")


def test_counts_and_attainment_count_rejected_and_failed_as_missed():
    s = summarize(mixed_run())
    assert (s.policy, s.jobs, s.completed, s.rejected, s.failed, s.cancelled) == ("mix", 6, 4, 1, 1, 0)
    assert s.deadline_met == 3
    assert s.slo_attainment == pytest.approx(3 / 6)


def test_rates_use_makespan_from_first_arrival_to_last_finish_and_goodput_the_arrival_window():
    s = summarize(mixed_run())
    assert s.makespan_s == pytest.approx(6.0)
    assert s.goodput_jobs_per_s == pytest.approx(3 / 2)  # arrivals span 0..2 s: giving up cannot raise it
    assert s.throughput_jobs_per_s == pytest.approx(4 / 6)
    assert s.throughput_tokens_per_s == pytest.approx((11 + 21 + 1) / 6)


def test_job_latency_percentiles_interpolate_linearly_over_completed_jobs():
    lat = summarize(mixed_run()).job_latency
    assert lat.count == 4
    assert (lat.mean_s, lat.p50_s) == pytest.approx((2.5, 2.5))
    assert lat.p90_s == pytest.approx(3.7)
    assert lat.p99_s == pytest.approx(3.97)


def test_request_metrics_cover_completed_requests_and_tpot_skips_single_token_outputs():
    s = summarize(mixed_run())
    assert s.ttft.count == 3
    assert s.ttft.mean_s == pytest.approx(0.2)
    assert s.queueing.mean_s == pytest.approx(0.2 / 3)
    assert s.tpot.count == 2
    assert s.tpot.mean_s == pytest.approx(0.02)
    assert s.request_latency.p50_s == pytest.approx(0.2)  # latencies 0.2, 0.2, 0.9


def test_slo_scale_prefix_cache_and_preemptions():
    s = summarize(mixed_run())
    # ratios 1, 2, 3, 4, inf, inf: 95% and 99% both need the 6th smallest.
    assert s.min_slo_scale_95 == math.inf and s.min_slo_scale_99 == math.inf
    assert s.prefix_hit_rate == pytest.approx(0.25)
    assert s.num_preemptions == 3


def test_min_slo_scale_is_finite_when_every_job_completes():
    jobs = [job(str(i), latency_s=float(i), no_contention_s=1.0, slo_s=100) for i in range(1, 101)]
    s = summarize(run(jobs))
    assert (s.min_slo_scale_95, s.min_slo_scale_99) == (95.0, 99.0)
    assert s.slo_attainment == 1.0


def test_empty_result_gives_nan_not_errors():
    s = summarize(run())
    assert (s.jobs, s.completed, s.rejected, s.num_requests, s.num_preemptions) == (0, 0, 0, 0, 0)
    for value in (
        s.slo_attainment,
        s.makespan_s,
        s.goodput_jobs_per_s,
        s.throughput_tokens_per_s,
        s.job_latency.p99_s,
        s.ttft.mean_s,
        s.min_slo_scale_95,
        s.prefix_hit_rate,
    ):
        assert math.isnan(value)
    record = s.to_json_dict()
    assert record["jobs"] == 0 and record["slo_attainment"] is None
    json.dumps(record, allow_nan=False)


def test_only_rejected_jobs():
    s = summarize(run([rejected("a"), rejected("b")]))
    assert (s.jobs, s.rejected, s.slo_attainment) == (2, 2, 0.0)
    assert s.min_slo_scale_95 == math.inf
    assert math.isnan(s.throughput_jobs_per_s)  # nothing finished: no makespan


def test_to_json_dict_has_exactly_the_cli_keys_and_encodes_infinity_as_null():
    record = summarize(mixed_run()).to_json_dict()
    assert set(record) == JSON_KEYS
    assert record["min_slo_scale_95"] is None
    assert record["jobs"] == 6 and record["rejected"] == 1
    assert record["p90_latency_s"] == pytest.approx(3.7)
    assert json.loads(json.dumps(record, allow_nan=False)) == record


def test_json_safe_handles_nested_numpy_and_non_finite_values():
    obj = {
        "a": math.nan,
        "b": [math.inf, -math.inf, 1.5],
        "c": (np.float64(2.0), np.int64(3)),
        "d": np.array([1.0, np.nan]),
        4: {"e": np.bool_(True), "f": "text", "g": None},
    }
    safe = json_safe(obj)
    assert safe == {
        "a": None,
        "b": [None, None, 1.5],
        "c": [2.0, 3],
        "d": [1.0, None],
        "4": {"e": True, "f": "text", "g": None},
    }
    assert type(safe["c"][1]) is int and type(safe["4"]["e"]) is bool
    json.dumps(safe, allow_nan=False)


def test_latency_stats_ignore_non_finite_samples():
    stats = LatencyStats.of(np.array([1.0, np.nan, 3.0, np.inf]))
    assert (stats.count, stats.mean_s, stats.p50_s) == (2, 2.0, 2.0)


def test_deadline_met_agrees_with_the_record():
    jobs = mixed_run().jobs
    assert summarize(run(jobs)).deadline_met == sum(j.deadline_met for j in jobs)


def test_token_slos_count_in_job_attainment() -> None:
    from slosched.core.job import JobKind
    from slosched.core.records import JobRecord, RequestRecord, RunResult
    from slosched.core.request import Outcome
    from slosched.metrics.summary import token_slo_missed_jobs

    def job(job_id: str) -> JobRecord:
        return JobRecord(job_id, JobKind.SINGLE, "t", 0.0, Outcome.COMPLETED, 1, 10.0, 1.0, finish_s=2.0)

    def request(job_id: str, ttft_s: float) -> RequestRecord:
        return RequestRecord(
            f"{job_id}/r",
            job_id,
            "call",
            "i0",
            0.0,
            10,
            11,
            Outcome.COMPLETED,
            first_token_s=ttft_s,
            finish_s=2.0,
            ttft_slo_s=0.5,
            tpot_slo_s=0.2,
        )

    result = RunResult("p", 0, 2.0, requests=[request("ok", 0.1), request("slow", 0.9)], jobs=[job("ok"), job("slow")])
    assert token_slo_missed_jobs(result.requests) == {"slow"}
    summary = summarize(result)
    assert summary.deadline_met == 1 and summary.slo_attainment == 0.5
