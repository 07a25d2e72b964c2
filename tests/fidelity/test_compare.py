"""The fidelity comparison: metrics of a run, errors, headline figures, saved cases."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import JobKind
from slosched.core.records import JobRecord, RequestRecord, RunResult
from slosched.core.request import Outcome
from slosched.fidelity.compare import Case, compare_replays, compare_runs, error_table, run_metrics, summarize_cases
from slosched.fidelity.records_io import load_run, save_run
from slosched.fidelity.traces import make_trace


def _run(latencies: list[float], ttft: float = 0.1, scale: float = 1.0) -> RunResult:
    requests, jobs = [], []
    for i, latency in enumerate(latencies):
        arrival = float(i)
        first, finish = arrival + ttft * scale, arrival + latency * scale
        requests.append(
            RequestRecord(
                f"r{i}",
                f"j{i}",
                "call",
                "engine",
                arrival,
                10,
                20,
                Outcome.COMPLETED,
                first_token_s=first,
                finish_s=finish,
            )
        )
        jobs.append(
            JobRecord(f"j{i}", JobKind.SINGLE, "", arrival, Outcome.COMPLETED, 1, math.inf, math.nan, finish_s=finish)
        )
    return RunResult("x", 0, 10.0, requests, jobs)


def test_metrics_are_the_usual_statistics() -> None:
    latencies = [0.5, 1.0, 1.5, 2.0, 4.0]
    metrics = run_metrics(_run(latencies), job_metrics=True)
    assert metrics["request_latency_mean_s"] == pytest.approx(np.mean(latencies))
    assert metrics["request_latency_p90_s"] == pytest.approx(np.percentile(latencies, 90))
    assert metrics["ttft_p50_s"] == pytest.approx(0.1)
    assert metrics["job_latency_p99_s"] == pytest.approx(np.percentile(latencies, 99))
    # 5 requests x 20 tokens from the first arrival (0) to the last finish (4 + 4.0).
    assert metrics["throughput_tokens_per_s"] == pytest.approx(100 / 8.0)
    assert "job_latency_mean_s" not in run_metrics(_run(latencies), job_metrics=False)


def test_failed_requests_are_left_out_and_an_empty_run_has_no_metrics() -> None:
    run = _run([1.0, 2.0])
    run.requests[1] = replace(run.requests[1], outcome=Outcome.FAILED)
    assert run_metrics(run, job_metrics=False)["request_latency_mean_s"] == pytest.approx(1.0)
    empty = RunResult("x", 0, 0.0, [], [])
    assert run_metrics(empty, job_metrics=True) == {}
    assert compare_runs("chat", "light", _run([1.0]), empty, job_metrics=False) == []


def test_errors_and_headline_figures() -> None:
    real, sim = _run([1.0, 2.0, 3.0]), _run([1.0, 2.0, 3.0], scale=1.1)  # the simulation 10% slow
    cases = compare_runs("chat", "light", real, sim, job_metrics=True)
    by_metric = {case.metric: case for case in cases}
    assert by_metric["request_latency_mean_s"].error_pct == pytest.approx(10.0)
    assert by_metric["ttft_p90_s"].error_pct == pytest.approx(10.0)
    summary = summarize_cases(cases)
    assert summary["mean_abs_error_pct"] == pytest.approx(10.0)
    assert summary["p90_abs_error_pct"] == pytest.approx(10.0)
    assert len(summary["cases"]) == len(cases) and summary["cases"][0]["error_pct"] == pytest.approx(
        cases[0].error_pct, abs=0.01
    )
    # Mean and P90 headlines only average their own metrics.
    mixed = [
        Case("t", "l", "request_latency_mean_s", 1.0, 1.2),
        Case("t", "l", "request_latency_p90_s", 1.0, 0.9),
        Case("t", "l", "ttft_mean_s", 1.0, 3.0),
    ]
    summary = summarize_cases(mixed)
    assert (summary["mean_abs_error_pct"], summary["p90_abs_error_pct"]) == pytest.approx((20.0, 10.0))
    assert summary["all_abs_error_pct"] == pytest.approx((20 + 10 + 200) / 3, abs=0.01)
    rows = error_table(mixed, ["request_latency_mean_s", "job_latency_mean_s"])
    assert rows == [["t", "l", "1 / 1.2 (+20.0%)", "-"]]


def test_replays_are_compared_by_their_mean_and_keep_their_spread() -> None:
    sim = _run([1.0, 2.0, 3.0])
    replays = [_run([1.0, 2.0, 3.0], scale=0.8), _run([1.0, 2.0, 3.0], scale=1.2)]
    by_metric = {case.metric: case for case in compare_replays("chat", "heavy", replays, [sim], job_metrics=True)}
    mean = by_metric["request_latency_mean_s"]
    assert mean.real == pytest.approx(2.0) and mean.error_pct == pytest.approx(0.0)
    assert mean.real_replays == pytest.approx((1.6, 2.4)) and mean.real_spread_pct == pytest.approx(40.0)
    assert mean.to_json_dict()["real_spread_pct"] == pytest.approx(40.0)
    # One replay: the same cases compare_runs gives, and no spread.
    single = compare_replays("chat", "heavy", replays[:1], [sim], job_metrics=True)
    assert single == compare_runs("chat", "heavy", replays[0], sim, job_metrics=True)
    assert math.isnan(single[0].real_spread_pct) and "real_spread_pct" not in single[0].to_json_dict()
    # A metric one replay lacks (it completed nothing) is not compared.
    assert compare_replays("chat", "heavy", [replays[0], RunResult("x", 0, 0.0, [], [])], [sim], True) == []
    with pytest.raises(ValueError, match="at least one replay"):
        compare_replays("chat", "heavy", [], [sim], job_metrics=True)
    with pytest.raises(ValueError, match="one simulation"):
        compare_replays("chat", "heavy", replays, [], job_metrics=True)


def test_one_simulation_per_replay_is_compared_by_their_mean() -> None:
    replays = [_run([1.0, 2.0, 3.0], scale=0.8), _run([1.0, 2.0, 3.0], scale=1.2)]
    sims = [_run([1.0, 2.0, 3.0], scale=0.9), _run([1.0, 2.0, 3.0], scale=1.5)]
    by_metric = {case.metric: case for case in compare_replays("chat", "heavy", replays, sims, job_metrics=True)}
    mean = by_metric["request_latency_mean_s"]
    assert mean.sim == pytest.approx(2.4) and mean.sim_runs == pytest.approx((1.8, 3.0))
    assert mean.error_pct == pytest.approx(20.0)
    assert mean.to_json_dict()["sim_runs"] == pytest.approx([1.8, 3.0])


def test_a_saved_case_round_trips(tmp_path: Path) -> None:
    jobs = make_trace("workflow", 3, 1.0, seed=0)
    real, sim = _run([1.0, 2.0]), _run([1.5, 2.5])
    real.requests[0].first_token_s = math.nan  # a call that never produced a token
    loaded_jobs, loaded_real, loaded_sim = load_run(save_run(tmp_path / "case.json", jobs, real, sim))
    assert loaded_jobs == jobs
    assert math.isnan(loaded_real.requests[0].first_token_s)
    assert loaded_real.requests[1:] == real.requests[1:] and loaded_sim.jobs == sim.jobs
    with pytest.raises(ConfigError, match="fidelity case"):
        load_run(tmp_path / "missing.json")
