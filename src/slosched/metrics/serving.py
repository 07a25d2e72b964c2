"""A run's figures in the terms of vLLM's serving benchmark (``vllm bench serve``, formerly
``benchmarks/benchmark_serving.py``), so a simulated comparison reads like a measured one: request,
output-token and total-token throughput, goodput, and TTFT, TPOT, ITL and end-to-end latency in ms (mean,
median, p99), under vLLM's JSON keys (``output_throughput``, ``mean_ttft_ms``, ``p99_itl_ms``, ...).

Definitions, as vLLM's where the records allow:

- ``duration_s``: the run's makespan (first arrival to last finish), vLLM's benchmark duration.
- TPOT: per completed request with more than one output token, (finish - first token) / (tokens - 1).
- ITL: vLLM pools every gap between consecutive tokens of every request. The simulator records a
  request's first-token and finish times, not each token's, so each request's gaps are taken as equal (its
  TPOT) and pooled weighted by their number (tokens - 1): the mean ITL is then exact, the median and p99
  are those of the pooled gaps under that assumption.
- ``request_goodput``: completed requests that met every SLO they carried (deadline, TTFT, TPOT) per
  second of duration (vLLM's goodput counts the requests within its ``--goodput`` SLOs).
- A record without a first-token time (a live call that was not streamed) still gives the throughputs,
  the goodput (where it carries no TTFT / TPOT SLO) and the end-to-end latency; its TTFT, TPOT and ITL are
  NaN (``null`` in JSON), never guessed.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from slosched.core.records import RequestRecord
from slosched.core.request import Outcome


@dataclass(frozen=True, slots=True)
class MsStats:
    """Mean, median and p99 in milliseconds; NaN when there is no sample."""

    mean_ms: float
    median_ms: float
    p99_ms: float

    @classmethod
    def of(cls, seconds: np.ndarray, weights: np.ndarray | None = None) -> MsStats:
        keep = np.isfinite(seconds)
        values = seconds[keep] * 1e3
        if values.size == 0:
            return cls(math.nan, math.nan, math.nan)
        if weights is None:
            median, p99 = np.percentile(values, [50.0, 99.0])
            return cls(float(values.mean()), float(median), float(p99))
        w = weights[keep]
        order = np.argsort(values)
        values, cumulative = values[order], np.cumsum(w[order])
        total = cumulative[-1]

        def quantile(q: float) -> float:
            return float(values[min(int(np.searchsorted(cumulative, q * total)), values.size - 1)])

        return cls(float((values * w[order]).sum() / total), quantile(0.5), quantile(0.99))


@dataclass(frozen=True, slots=True)
class ServingStats:
    duration_s: float
    completed: int
    total_input_tokens: int
    total_output_tokens: int
    request_throughput: float
    request_goodput: float
    output_throughput: float
    total_token_throughput: float
    ttft: MsStats
    tpot: MsStats
    itl: MsStats
    e2el: MsStats

    def to_json_dict(self) -> dict[str, float | int]:
        """vLLM's keys; NaN stays NaN here (the CLI's ``json_safe`` turns it into null)."""
        out: dict[str, float | int] = {
            "duration": self.duration_s,
            "completed": self.completed,
            "total_input_tokens": self.total_input_tokens,
            "total_output_tokens": self.total_output_tokens,
            "request_throughput": self.request_throughput,
            "request_goodput": self.request_goodput,
            "output_throughput": self.output_throughput,
            "total_token_throughput": self.total_token_throughput,
        }
        for name in ("ttft", "tpot", "itl", "e2el"):
            stats: MsStats = getattr(self, name)
            out[f"mean_{name}_ms"] = stats.mean_ms
            out[f"median_{name}_ms"] = stats.median_ms
            out[f"p99_{name}_ms"] = stats.p99_ms
        return out


def serving_stats(requests: Sequence[RequestRecord], duration_s: float) -> ServingStats:
    """The figures over the completed requests of a run lasting ``duration_s`` (rates NaN when it is not
    positive)."""
    completed, inf = Outcome.COMPLETED, math.inf
    # One row-wise pass over the completed requests, as ``summary.request_columns`` (the sim-speed bench
    # times summarize); SLOs a request lacks are infinite.
    rows = (
        (
            *(r.arrival_s, r.first_token_s, r.finish_s, r.output_tokens, r.prompt_tokens, r.deadline_s),
            inf if r.ttft_slo_s is None else r.ttft_slo_s,
            inf if r.tpot_slo_s is None else r.tpot_slo_s,
        )
        for r in requests
        if r.outcome is completed
    )
    table: np.ndarray = np.fromiter(rows, dtype=np.dtype((float, 8))).reshape(-1, 8).T.astype(float)
    arrival, first, finish, tokens, prompts, deadline, ttft_slo, tpot_slo = table
    gaps = tokens - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        tpot = np.where(gaps > 0, (finish - first) / gaps, np.nan)
    # As ``RequestRecord.token_slos_met``: a single-token output's TPOT is 0, and an SLO a request does not
    # carry is met even where its first token's time is unknown (a live call that was not streamed).
    ttft_met = np.isinf(ttft_slo) | (first - arrival <= ttft_slo)
    tpot_met = np.isinf(tpot_slo) | (np.where(gaps > 0, tpot, 0.0) <= tpot_slo)
    met = (finish <= deadline) & ttft_met & tpot_met
    done = int(table.shape[1])
    input_tokens = int(prompts.sum())
    output_tokens = int(tokens.sum())

    def rate(count: float) -> float:
        return count / duration_s if duration_s > 0 else math.nan

    return ServingStats(
        duration_s=duration_s,
        completed=done,
        total_input_tokens=input_tokens,
        total_output_tokens=output_tokens,
        request_throughput=rate(done),
        request_goodput=rate(float(met.sum())),
        output_throughput=rate(output_tokens),
        total_token_throughput=rate(input_tokens + output_tokens),
        ttft=MsStats.of(first - arrival),
        tpot=MsStats.of(tpot),
        itl=MsStats.of(tpot, np.maximum(gaps, 0)),
        e2el=MsStats.of(finish - arrival),
    )


def median_over_runs(runs: Iterable[Mapping[str, float | int] | None]) -> dict[str, float]:
    """Each key's median over ``runs`` (``ServingStats.to_json_dict`` of several seeds' runs), over the
    runs where it is finite; NaN where none is (or there is no run). A bench reports a figure at a load as
    its median over seeds: this is the serving figures' way of doing so. ``None`` (a run not measured) is
    skipped."""
    measured = [run for run in runs if run is not None]
    keys = list(dict.fromkeys(key for run in measured for key in run))
    out: dict[str, float] = {}
    for key in keys:
        values = [float(run[key]) for run in measured if key in run and math.isfinite(float(run[key]))]
        out[key] = float(statistics.median(values)) if values else math.nan
    return out
