"""Aggregate metrics of one run (``RunResult``) into a ``PolicySummary``.

Invariants: ``jobs == completed + rejected + failed + cancelled``; every rate and percentile is a plain
float and is NaN (never a sentinel, never an exception) where it is undefined, e.g. no jobs or a zero
makespan. Throughput is per second of makespan, goodput per second of the arrival window. Records are
turned into numpy arrays once; everything after that is vectorised.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from slosched.core.records import InstanceStats, JobRecord, RequestRecord, RunResult
from slosched.core.request import Outcome
from slosched.metrics.serving import ServingStats, serving_stats
from slosched.metrics.slo_scale import min_scale_from_ratios, slowdown_ratios

JsonValue = int | float | str | bool | None


@dataclass(frozen=True, slots=True)
class LatencyStats:
    """Mean and percentiles (linear interpolation, numpy's default) of ``count`` samples, in seconds."""

    count: int
    mean_s: float
    p50_s: float
    p90_s: float
    p99_s: float

    @classmethod
    def of(cls, values: np.ndarray) -> LatencyStats:
        """Stats over the finite entries of ``values``; all NaN when there are none."""
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            return cls(count=0, mean_s=math.nan, p50_s=math.nan, p90_s=math.nan, p99_s=math.nan)
        p50, p90, p99 = np.percentile(finite, [50.0, 90.0, 99.0])
        return cls(
            count=int(finite.size),
            mean_s=float(finite.mean()),
            p50_s=float(p50),
            p90_s=float(p90),
            p99_s=float(p99),
        )


@dataclass(frozen=True, slots=True)
class PolicySummary:
    """Aggregates of one run. Job-level latency and request-level stats cover completed ones only;
    ``slo_attainment`` divides by *all* jobs, so rejected, failed and cancelled jobs count as missed.
    """

    policy: str
    jobs: int
    completed: int
    rejected: int
    failed: int
    cancelled: int
    deadline_met: int
    num_requests: int
    slo_attainment: float
    makespan_s: float
    goodput_jobs_per_s: float
    throughput_jobs_per_s: float
    throughput_tokens_per_s: float
    job_latency: LatencyStats
    ttft: LatencyStats
    tpot: LatencyStats
    request_latency: LatencyStats
    queueing: LatencyStats
    min_slo_scale_95: float
    min_slo_scale_99: float
    prefix_hit_rate: float
    num_preemptions: int
    serving: ServingStats  # the same run in vLLM serving-benchmark terms (``metrics/serving.py``)

    def to_json_dict(self) -> dict[str, Any]:
        """The CLI's ``--json`` record: fixed keys, NaN and infinities already turned into ``None``;
        ``serving`` holds vLLM's benchmark keys (``output_throughput``, ``mean_ttft_ms``, ...)."""
        raw: dict[str, JsonValue] = {
            "jobs": self.jobs,
            "rejected": self.rejected,
            "slo_attainment": self.slo_attainment,
            "mean_latency_s": self.job_latency.mean_s,
            "p50_latency_s": self.job_latency.p50_s,
            "p90_latency_s": self.job_latency.p90_s,
            "p99_latency_s": self.job_latency.p99_s,
            "min_slo_scale_95": self.min_slo_scale_95,
            "min_slo_scale_99": self.min_slo_scale_99,
            "throughput_jobs_per_s": self.throughput_jobs_per_s,
            "goodput_jobs_per_s": self.goodput_jobs_per_s,
            "mean_ttft_s": self.ttft.mean_s,
            "p90_ttft_s": self.ttft.p90_s,
            "mean_tpot_s": self.tpot.mean_s,
            "p90_tpot_s": self.tpot.p90_s,
        }
        return {
            **{key: json_safe(value) for key, value in raw.items()},
            "serving": json_safe(self.serving.to_json_dict()),
        }


def json_safe(obj: Any) -> Any:
    """A copy of ``obj`` that ``json.dumps(..., allow_nan=False)`` accepts: NaN and +-inf become ``None``,
    numpy scalars and arrays become Python numbers and lists, tuples become lists, mapping keys become str.
    """
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, int | np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        value = float(obj)
        return value if math.isfinite(value) else None
    if isinstance(obj, np.ndarray):
        return json_safe(obj.tolist())
    if isinstance(obj, Mapping):
        return {str(key): json_safe(value) for key, value in obj.items()}
    if isinstance(obj, list | tuple):
        return [json_safe(value) for value in obj]
    return obj


def summarize(result: RunResult) -> PolicySummary:
    """Aggregate ``result``; never raises on empty or partial results (undefined values are NaN)."""
    jobs = result.jobs
    outcomes = [j.outcome for j in jobs]
    completed = outcomes.count(Outcome.COMPLETED)
    missed_tokens = token_slo_missed_jobs(result.requests)
    num_met = sum(1 for j in jobs if j.deadline_met and j.id not in missed_tokens)
    makespan = _makespan_s(jobs)
    ratios = slowdown_ratios(jobs)
    requests = request_columns(result.requests)
    done = requests["completed"]
    return PolicySummary(
        policy=result.policy,
        jobs=len(jobs),
        completed=completed,
        rejected=outcomes.count(Outcome.REJECTED),
        failed=outcomes.count(Outcome.FAILED),
        cancelled=outcomes.count(Outcome.CANCELLED),
        deadline_met=num_met,
        num_requests=len(result.requests),
        slo_attainment=_ratio(num_met, len(jobs)),
        makespan_s=makespan,
        goodput_jobs_per_s=_rate(num_met, _arrival_window_s(jobs, makespan)),
        throughput_jobs_per_s=_rate(completed, makespan),
        throughput_tokens_per_s=_rate(float(requests["output_tokens"][done].sum()), makespan),
        job_latency=LatencyStats.of(completed_job_latencies(jobs)),
        ttft=LatencyStats.of(requests["ttft"][done]),
        # TPOT is undefined for single-token outputs; counting them as 0 would flatter short answers.
        tpot=LatencyStats.of(requests["tpot"][done & (requests["output_tokens"] > 1)]),
        request_latency=LatencyStats.of(requests["latency"][done]),
        queueing=LatencyStats.of(requests["queueing"][done]),
        min_slo_scale_95=min_scale_from_ratios(ratios, 0.95),
        min_slo_scale_99=min_scale_from_ratios(ratios, 0.99),
        prefix_hit_rate=prefix_hit_rate(result.instances),
        num_preemptions=sum(stats.num_preemptions for stats in result.instances),
        serving=serving_stats(result.requests, makespan),
    )


def serving_of(result: RunResult) -> ServingStats:
    """The serving figures (vLLM's terms) of ``result`` exactly as ``summarize`` reports them: over its
    requests, its makespan as the duration. Benches call it on the measured part of a run
    (``evaluation.workbench.measured_only``), as ``compare`` does."""
    return serving_stats(result.requests, _makespan_s(result.jobs))


def token_slo_missed_jobs(requests: Sequence[RequestRecord]) -> set[str]:
    """Ids of jobs with a request that carries a TTFT/TPOT SLO and missed it: such a job misses its SLO
    even when it finished within ``slo_s`` (a job meets its SLO only if every call met its token SLOs)."""
    return {
        r.job_id for r in requests if (r.ttft_slo_s is not None or r.tpot_slo_s is not None) and not r.token_slos_met
    }


def prefix_hit_rate(instances: Sequence[InstanceStats]) -> float:
    """Hit tokens / queried tokens over all instances, in [0, 1]; NaN when nothing was queried."""
    queried = sum(stats.prefix_query_tokens for stats in instances)
    hits = sum(stats.prefix_hit_tokens for stats in instances)
    return _ratio(hits, queried)


def _arrival_window_s(jobs: Sequence[JobRecord], makespan_s: float) -> float:
    """Last arrival minus first arrival: goodput is counted per second of offered traffic, so a policy cannot
    raise it by giving up on jobs to shorten its makespan. Jobs all arriving at once have no window; their
    makespan stands in."""
    if len(jobs) < 2:
        return makespan_s
    arrivals = [j.arrival_s for j in jobs]
    window = max(arrivals) - min(arrivals)
    return window if window > 0 else makespan_s


def _makespan_s(jobs: Sequence[JobRecord]) -> float:
    """Last finite job finish (any outcome) minus first job arrival; NaN if nothing finished."""
    if not jobs:
        return math.nan
    finishes = np.fromiter((j.finish_s for j in jobs), dtype=float, count=len(jobs))
    finishes = finishes[np.isfinite(finishes)]
    if finishes.size == 0:
        return math.nan
    first_arrival = min(j.arrival_s for j in jobs)
    return float(finishes.max() - first_arrival)


def completed_job_latencies(jobs: Sequence[JobRecord]) -> np.ndarray:
    """``finish_s - arrival_s`` of the completed jobs, in input order."""
    return np.fromiter((j.finish_s - j.arrival_s for j in jobs if j.outcome is Outcome.COMPLETED), dtype=float)


def request_columns(requests: Sequence[RequestRecord]) -> dict[str, np.ndarray]:
    """Per-request columns (all requests, input order): ``completed`` (bool), ``output_tokens``, ``ttft``,
    ``tpot``, ``latency``, ``queueing``. Entries of unfinished requests are NaN or meaningless; mask with
    ``completed``. TPOT is NaN/inf for single-token outputs.
    """
    completed = Outcome.COMPLETED
    # One row-wise pass: np.fromiter's per-item cost is paid once per record, not once per field (the
    # sim-speed bench times summarize: 55 -> 23 ms for 40,000 records). Each row's tuple is freed at once;
    # a list of 40,000 live tuples instead woke the cyclic GC for a full pass (+100 ms).
    rows = (
        (r.arrival_s, r.first_token_s, r.finish_s, r.output_tokens, r.first_scheduled_s, r.outcome is completed)
        for r in requests
    )
    table = np.fromiter(rows, dtype=np.dtype((float, 6)), count=len(requests)).T.copy()
    arrival, first_token, finish, output_tokens, first_scheduled, done = table
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = (finish - first_token) / (output_tokens - 1)
    return {
        "completed": done == 1.0,
        "output_tokens": output_tokens,
        "ttft": first_token - arrival,
        "tpot": tpot,
        "latency": finish - arrival,
        "queueing": first_scheduled - arrival,
    }


def _ratio(numerator: float, denominator: float) -> float:
    return numerator / denominator if denominator > 0 else math.nan


def _rate(count: float, makespan_s: float) -> float:
    """``count / makespan_s``; NaN for a NaN or non-positive makespan (a rate over no time is undefined)."""
    return count / makespan_s if makespan_s > 0 else math.nan
