"""bench hexgen on the scoreboard: its candidates, leak-free workbench, JSON fields and report (fast pieces;
the capacity search itself is tested in test_capacity.py)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest

import slosched.bench.hexgen.report as hexgen_report
import slosched.bench.hexgen.runs as hexgen
import slosched.bench.hexgen.setup as setup
from slosched.bench.hexgen.online import OnlineRun, WindowStep
from slosched.core.records import RunResult
from slosched.evaluation import sizing
from slosched.evaluation.baseline_plan import BaselinePlan, baseline_candidates
from slosched.evaluation.capacity import Spread
from slosched.evaluation.scoreboard import CapacityResult, Scoreboard
from slosched.evaluation.workbench import Candidate, Workbench


def test_paper_candidates_carry_alpha_job_policy_and_oracle_label() -> None:
    ours = setup.paper_candidate(0.4)
    assert ours.label == "workload-balanced+urgency" and ours.job_policy == "stage-budget"
    assert ours.params.router["workload-balanced"]["alpha"] == 0.4 and ours.extra("alpha") == 0.4
    oracle = setup.paper_candidate(0.4, oracle=True)
    assert oracle.oracle and oracle.label.endswith("(oracle)")
    assert [c.label for c in setup.paper_baselines(False)] == ["round-robin+fcfs"]
    assert len(setup.paper_baselines(True)) == 3


def test_quick_plan_is_small_and_the_full_plan_is_unchanged() -> None:
    quick, full = hexgen.QUICK, hexgen.FULL
    assert len(quick.seeds) >= 2 and quick.num_jobs < full.num_jobs and not quick.full
    candidates = baseline_candidates(quick.baselines, None, None) + baseline_candidates(quick.baselines, 256, 16)
    assert len(candidates) == 7 and any(c.label.startswith("cache-aware+") for c in candidates)
    assert full.settings == (("natural", "paper-tp2"),) and (full.num_jobs, full.num_warmup_jobs) == (120, 25)
    assert full.seeds == (0, 1, 2, 3, 4) and full.drift_jobs == 240
    assert full.baselines == BaselinePlan() and full.full


def test_workbench_deadline_is_the_same_for_every_query_and_runs_warm() -> None:
    bench = setup.workbench("paper-tp2", "natural", 8, 3)
    jobs, history = bench.workload(0.2, seed=0)
    # The bench's 3 jobs, or more: the prefix spans 10x the workload's p90 latency of arrivals (warmup.py).
    assert sum(job.id.startswith("warmup-") for job in jobs) == bench.warmup_count(0.2, seed=0) >= 3
    result = setup.run_candidate(setup.paper_candidate(0.0), bench.instances, jobs, bench.options, 0, history)
    slos = {round(job.slo_s, 6) for job in result.jobs}
    assert len(slos) == 1  # leak-free: one deadline per template, whatever each query's rounds and lengths
    oracle = setup.run_candidate(
        setup.paper_candidate(0.0, oracle=True), bench.instances, jobs, bench.options, 0, history
    )
    assert oracle.policy.endswith("(oracle)") and len(oracle.jobs) == len(jobs)


def _result(label: str, values: list[float]) -> CapacityResult:
    spread = Spread.of(values)
    return CapacityResult(Candidate.of(label), {0.9: spread, 0.95: Spread.of([v * 0.9 for v in values])})


def _board() -> Scoreboard:
    board = Scoreboard("natural / paper-tp2", 100, (0, 1))
    board.baselines = {"least-tokens+fcfs": _result("least-tokens+fcfs", [0.5, 0.6])}
    board.others = {
        "workload-balanced+urgency": _result("workload-balanced+urgency", [0.4, 0.5]),
        "round-robin+fcfs": _result("round-robin+fcfs", [0.1, 0.2]),
    }
    oracle = setup.paper_candidate(0.0, oracle=True)
    board.others[oracle.label] = CapacityResult(oracle, {0.9: Spread.of([0.5]), 0.95: Spread.of([0.4])})
    board.strongest = "least-tokens+fcfs"
    board.overload = {"least-tokens+fcfs": {1.5: (Spread.of([0.8]), Spread.of([0.7]))}}
    return board


def _outcome() -> hexgen.Outcome:
    step = WindowStep(0.0, 20, 50.0, None, 0.2, True, 0)
    tuning = OnlineRun(RunResult(policy="p", seed=0, end_s=1.0, requests=[], jobs=[], instances=[]), [step])
    outcome = hexgen.Outcome("natural", "paper-tp2", 0.2, tuning, _board(), Scoreboard("cold", 100, (0, 1)))
    outcome.drift = {
        "rate": 0.5,
        "num_jobs": 10,
        "attainment_online": 0.8,
        "attainment_held": 0.7,
        "held_alpha": 0.2,
        "windows": [asdict(step)],
    }
    outcome.descriptive = {
        "rate": 0.55,
        "min_scale_95": {"least-tokens+fcfs": 2.0, "workload-balanced+urgency": 2.5},
        "stage_shares": {"workload-balanced+urgency": {"GEN": {"a100-0": 0.7, "a40-2": 0.3}}},
        "queue_snapshot": {},
    }
    return outcome


def test_json_carries_both_ratios_the_baselines_and_the_seeds() -> None:
    figures = hexgen.outcome_json(_outcome())
    assert figures["baselines"] == {"least-tokens+fcfs": pytest.approx(0.55)}
    assert figures["strongest_baseline"] == "least-tokens+fcfs"
    assert figures["ratio_vs_strongest"] == pytest.approx(0.45 / 0.55)
    assert figures["ratio_vs_paper_baseline"] == pytest.approx(0.45 / 0.15)
    assert figures["seeds"] == [0, 1] and figures["alpha"] == 0.2


def test_report_states_both_ratios_and_where_the_policy_loses(tmp_path: Path) -> None:
    bench = hexgen.outcome_json(_outcome())
    figures = {
        "workbenches": [bench],
        "seeds": [0, 1],
        "num_jobs": 100,
        "num_warmup_jobs": 20,
        "slo_scale": 3.0,
        "alpha_tune_seconds": 1.0,
        "alpha_tune_seconds_1qps": 2.0,
        "bench_seconds": 60.0,
    }
    path = hexgen_report.write(figures, [_outcome().board], [_outcome().cold], tmp_path)
    text = path.read_text()
    assert "0.82x against the strongest baseline" in text and "3.00x against the paper's baseline" in text
    assert "**loses to**" in text and "slosched bench hexgen" in text
    assert (tmp_path / "hexgen" / "capacity.png").exists() and (tmp_path / "hexgen" / "overload.png").exists()


class _Measured(Exception):
    """Raised by a stand-in pilot: the test reads the workbench the bench would have measured."""


def test_the_full_form_sizes_runs_by_the_work_rule_and_the_quick_form_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def pilot_rate(workbench: Workbench, plan: hexgen.Plan) -> float:
        raise _Measured(workbench.work_tolerance)

    monkeypatch.setattr(hexgen, "pilot_rate", pilot_rate)
    for plan, expected in ((hexgen.FULL, sizing.WORK_TOLERANCE), (hexgen.QUICK, None)):
        with pytest.raises(_Measured) as measured:
            hexgen.run_workbench(plan.settings[0], plan, None)  # type: ignore[arg-type]  # never reached
        assert measured.value.args == (expected,)
