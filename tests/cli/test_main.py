"""The command line: compare prints one JSON object last, errors are clean, traces round-trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from slosched.cli.main import app
from tests.scenario.test_config import BASE

runner = CliRunner()


def _scenario(tmp_path: Path, **overrides: object) -> Path:
    data = {**BASE, **overrides}
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_compare_json_last_line(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    result = runner.invoke(
        app, ["compare", str(path), "--policies", "round-robin+fcfs,least-tokens+chunked-fcfs", "--json"]
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output.strip().splitlines()[-1])
    assert set(payload["policies"]) == {"round-robin+fcfs", "least-tokens+chunked-fcfs"}
    keys = {
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
    }
    for summary in payload["policies"].values():
        assert keys <= set(summary) and summary["jobs"] == 20


def test_simulate_writes_a_report(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    report = tmp_path / "report"
    result = runner.invoke(app, ["simulate", str(path), "--report", str(report)])
    assert result.exit_code == 0, result.output
    assert (report / "report.md").exists() and (report / "slo_scale.png").exists()


def test_trace_then_replay_runs_the_recorded_jobs_at_their_recorded_rate(tmp_path: Path) -> None:
    """``compare --trace`` builds its run the one way ``sweep`` does too (``planning/workload.py``): the
    trace's jobs at the trace's own rate after a warm-up prefix, so it no longer equals the generated run
    (whose warm-up and deadline history come from another seed of the generator); it is reproducible."""
    path = _scenario(tmp_path)
    trace = tmp_path / "jobs.jsonl"
    assert runner.invoke(app, ["trace", str(path), "--out", str(trace)]).exit_code == 0
    assert len(trace.read_text().splitlines()) == 20
    arrivals = [json.loads(line)["arrival_s"] for line in trace.read_text().splitlines()]
    replayed = [runner.invoke(app, ["compare", str(path), "--trace", str(trace), "--json"]) for _ in range(2)]
    first, again = (json.loads(result.output.splitlines()[-1]) for result in replayed)
    assert first == again
    assert first["num_jobs"] == 20 and first["rate"] == pytest.approx(19 / (max(arrivals) - min(arrivals)))
    assert all(summary["jobs"] == 20 for summary in first["policies"].values())


def test_unknown_policy_fails_with_known_names(tmp_path: Path) -> None:
    path = _scenario(tmp_path)
    result = runner.invoke(app, ["compare", str(path), "--policies", "round-robin+fifo"])
    assert result.exit_code != 0
    assert "chunked-fcfs" in str(result.exception)


def test_policies_lists_registries() -> None:
    result = runner.invoke(app, ["policies"])
    assert result.exit_code == 0 and "least-tokens" in result.output and "static-priority" in result.output


def test_bench_list_and_unknown_bench() -> None:
    assert "sim-speed" in runner.invoke(app, ["bench", "list"]).output
    result = runner.invoke(app, ["bench", "nope"])
    assert result.exit_code != 0 and "sim-speed" in str(result.exception)


def test_a_bad_worker_count_stops_a_bench_before_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from slosched.cli.main import run as cli

    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "two")
    started: list[bool] = []
    monkeypatch.setattr("slosched.bench.base.run_keeping_rows", lambda *args, **kwargs: started.append(True))
    assert cli(["bench", "sim-speed", "--quick"]) == 2 and not started


def test_help_shows_bracketed_examples_and_joins_docstring_lines() -> None:
    listing = runner.invoke(app, ["--help"], terminal_width=200).output
    assert "stops it and prints the figures" in " ".join(listing.split())  # the bench docstring, one paragraph
    compare = runner.invoke(app, ["compare", "--help"], terminal_width=200).output
    assert "policies=[least-tokens+fcfs]" in compare  # rich markup read "[...]" as a style tag
