"""``slosched bench nexus`` pieces: settings, candidates, the JSON figures and the report (no timed run)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from slosched.bench.nexus.experiments import miss_breakdown
from slosched.bench.nexus.report import write_report
from slosched.bench.nexus.runs import board_figures, headline
from slosched.bench.nexus.setup import (
    FULL_SETTINGS,
    PAPER_BASELINE,
    PAPER_POLICY,
    QUICK_SETTINGS,
    baseline_plan,
    paper_candidates,
    unit_rate_jobs,
)
from slosched.evaluation import sizing
from slosched.evaluation.capacity import Spread
from slosched.evaluation.scoreboard import LOADS, TARGETS, CapacityResult, Scoreboard
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate


def test_settings_fix_the_job_counts_and_warm_up() -> None:
    for setting in (*QUICK_SETTINGS, *FULL_SETTINGS):
        bench = setting.workbench()
        assert bench.num_jobs == setting.num_jobs and bench.num_warmup_jobs == setting.num_warmup_jobs > 0
        assert setting.workbench(num_warmup_jobs=0).num_warmup_jobs == 0
    bench = QUICK_SETTINGS[0].workbench()
    jobs, _ = bench.workload(rate=20.0, seed=1)
    warmup = [job for job in jobs if job.id.startswith(WARMUP_PREFIX)]
    assert len(warmup) == bench.warmup_count(20.0, seed=1) >= bench.num_warmup_jobs
    assert len(jobs) - len(warmup) == bench.num_jobs
    assert all(job.ttft_slo_s == 1.0 and job.tpot_slo_s == 0.03 for job in jobs)  # fixed SLOs: nothing leaks
    assert unit_rate_jobs("sharegpt", 5, 3) == unit_rate_jobs("sharegpt", 5, 3)


def test_candidates_and_baseline_plan() -> None:
    labels = [candidate.label for candidate in paper_candidates(quick=True)]
    assert labels[0] == PAPER_POLICY and PAPER_BASELINE in labels and "least-loaded+lens" in labels
    assert len(paper_candidates(quick=False)) == len(labels) + 1  # vLLM's round-robin + fcfs
    assert 128 in baseline_plan(quick=True).token_budgets and 128 in baseline_plan(quick=False).token_budgets
    assert "prism" in baseline_plan(quick=True).routers


def _result(label: str, policy: str, capacity: float) -> CapacityResult:
    spreads = {target: Spread.of([capacity * 0.9, capacity, capacity * 1.1]) for target in TARGETS}
    return CapacityResult(Candidate.of(policy, label=label), spreads)


def _board(name: str) -> Scoreboard:
    board = Scoreboard(name, 100, (1, 2, 3))
    board.baselines = {
        "least-tokens+chunked-fcfs[token_budget=128]": _result("a", "least-tokens+chunked-fcfs", 10.0),
        "prism+chunked-fcfs[token_budget=128]": _result("b", "prism+chunked-fcfs", 8.0),
    }
    board.strongest = "least-tokens+chunked-fcfs[token_budget=128]"
    board.others = {
        PAPER_POLICY: _result(PAPER_POLICY, PAPER_POLICY, 9.0),
        PAPER_BASELINE: _result(PAPER_BASELINE, "least-loaded+chunked-fcfs", 6.0),
    }
    spread = Spread.of([0.5, 0.6])
    board.overload = {label: {load: (spread, spread) for load in LOADS} for label in (board.strongest, PAPER_POLICY)}
    return board


def test_json_carries_both_ratios_and_the_baselines() -> None:
    board = _board("sharegpt on hetero")
    cold = Scoreboard("sharegpt on hetero (cold start)", 100, (1, 2, 3))
    cold.others = {PAPER_POLICY: _result(PAPER_POLICY, PAPER_POLICY, 4.0)}
    figures = headline([board, _board("flowgpt")], [cold, cold])
    assert figures["strongest_baseline"] == board.strongest and figures["seeds"] == [1, 2, 3]
    assert figures["baselines"][board.strongest] == 10.0
    assert figures["ratio_vs_strongest"] == 0.9 and figures["ratio_vs_paper_baseline"] == 1.5
    assert figures["goodput_2x"][PAPER_POLICY] == 0.55
    assert set(figures["settings_results"]) == {board.workbench, "flowgpt"}
    assert figures["cold_start"][cold.workbench][PAPER_POLICY]["median"] == 4.0
    assert board_figures(board)["num_jobs"] == 100
    json.dumps(figures)  # the --json line


def test_report_states_both_ratios_and_the_loss(tmp_path: Path) -> None:
    board = _board("sharegpt on hetero")
    cold = Scoreboard("cold", 100, (1, 2, 3))
    cold.others = {PAPER_POLICY: _result(PAPER_POLICY, PAPER_POLICY, 4.0)}
    accuracy = [
        {
            "hardware": "H100",
            "r2": 0.99,
            "median_rel_error": 0.01,
            "num_steps": 3,
            "shape_fits": 1,
            "linear_fits": 2,
            "points": [(0.01, 0.011), (0.02, 0.019)],
        }
    ]
    zero = {
        "rate": 10.0,
        "join_s": 10.0,
        "converge_s": 4.0,
        "error_curve": [(0.0, 0.5), (1.0, 0.05)],
        "latency_curve": [(0.0, 1.0, 1.2), (2.0, 1.1, 1.0)],
    }
    figures = {**headline([board], [cold]), "settings": ["quick"], "wall_s": 60.0, "cpu_s": 100.0}
    row = {"calls": 10, "ttft_missed": 6, "tpot_missed": 1, "met": 3, "shares": {"h100": 0.7, "a6000": 0.3}}
    figures["overload_diagnostic"] = {"rate": 20.0, "seed": 1, "results": {PAPER_POLICY: row}}
    text = write_report(tmp_path, [board], [cold], accuracy, zero, figures).read_text()
    assert "0.90x" in text and "1.50x" in text and "**loses**" in text and "slosched bench nexus" in text
    assert "6 TTFT / 1 TPOT misses" in text and "70% of calls" in text
    assert (tmp_path / "nexus" / "capacity.png").exists() and (tmp_path / "nexus" / "overload.png").exists()


def test_miss_breakdown_counts_the_measured_calls() -> None:
    bench = replace(QUICK_SETTINGS[0], num_jobs=30, num_warmup_jobs=5).workbench()
    found = miss_breakdown(bench, [Candidate.of("least-loaded+chunked-fcfs")], rate=20.0)
    row = found["results"]["least-loaded+chunked-fcfs"]
    assert row["calls"] == 30 and 0 <= row["met"] <= 30 and sum(row["shares"].values()) == pytest.approx(1.0)
    assert row["met"] <= 30 - max(row["ttft_missed"], row["tpot_missed"])  # a met call missed neither
    serving = row["serving"]  # the same measured calls in vLLM's terms
    met_every_slo = serving["request_goodput"] * serving["duration"]  # deadline, TTFT and TPOT
    assert 0 < serving["completed"] <= row["calls"] and met_every_slo <= row["met"] + 1e-9


def test_the_full_form_sizes_runs_by_the_work_rule_and_the_quick_form_does_not() -> None:
    assert all(setting.workbench().work_tolerance == sizing.WORK_TOLERANCE for setting in FULL_SETTINGS)
    assert all(setting.workbench().work_tolerance is None for setting in QUICK_SETTINGS)


def test_a_save_file_in_a_missing_folder_stops_the_run_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from slosched.bench.nexus import runs
    from slosched.core.errors import ConfigError

    monkeypatch.delenv(runs.SAVE_ENV, raising=False)
    assert runs.save_path() is None
    monkeypatch.setenv(runs.SAVE_ENV, str(tmp_path / "run.pkl"))
    assert runs.save_path() == tmp_path / "run.pkl"
    for bad in (tmp_path / "missing" / "run.pkl", tmp_path):
        monkeypatch.setenv(runs.SAVE_ENV, str(bad))
        with pytest.raises(ConfigError, match=runs.SAVE_ENV):
            runs.run(quick=True)
