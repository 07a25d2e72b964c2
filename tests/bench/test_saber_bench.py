"""Pieces of ``slosched bench saber``: jobs and SLAs, leak-free deadlines, the KV-limited regime, the
baseline search on one engine, the paper's baseline, the per-load table and the JSON fields."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import slosched.bench.saber.runs as saber_runs
import slosched.bench.saber.setup as setup
from slosched.bench.saber.figures import MixResult
from slosched.bench.saber.runs import LOADS, RunPlan, _paper_row, figures_of
from slosched.core.errors import ConfigError
from slosched.evaluation import sizing
from slosched.evaluation.baseline_plan import BASELINE_ROUTERS
from slosched.evaluation.capacity import Spread
from slosched.evaluation.scoreboard import CapacityResult, Scoreboard
from slosched.evaluation.workbench import Candidate, Workbench, measured_only
from slosched.metrics.serving import median_over_runs
from slosched.metrics.summary import summarize
from slosched.perf.speed_models import LinearSpeedModel, LogisticSpeedModel, SpeedFit, SpeedProfile, UslSpeedModel
from slosched.sim.runner import PolicyPair, simulate

PAPER_SLA = {"code-qna": 1.0, "code-generation": 8.0, "code-summary": 1.0, "code-translation": 12.0}


def test_jobs_carry_task_max_tokens_and_slas() -> None:
    caps = setup.task_max_tokens(0.9)
    assert caps["code-qna"] < caps["code-generation"] < caps["code-translation"]
    jobs = setup.code_jobs("W3", 5.0, 0, caps)
    assert len(jobs) == setup.NUM_REQUESTS
    for job in jobs:
        call = job.stages[0].calls[0]
        assert call.max_output_tokens == caps[job.template] >= call.output_tokens
        assert job.slo_s == PAPER_SLA[job.template]
    measured = {task: 2.0 * sla for task, sla in PAPER_SLA.items()}
    assert {job.slo_s for job in setup.code_jobs("W1", 5.0, 0, caps, measured)} <= set(measured.values())
    unit = setup.unit_rate_jobs("W2", (), 30, 1)
    assert len(unit) == 30 and unit == setup.code_jobs("W2", 1.0, 1, caps, None, 30)


def test_permuting_true_outputs_within_a_task_leaves_every_deadline_unchanged() -> None:
    jobs = setup.code_jobs("W3", 2.0, 0, setup.task_max_tokens(), num_jobs=40)
    rng = np.random.default_rng(0)
    permuted = list(jobs)
    for task in {job.template for job in jobs}:
        where = [i for i, job in enumerate(jobs) if job.template == task]
        outputs = [jobs[i].stages[0].calls[0].output_tokens for i in where]
        for i, output in zip(where, rng.permutation(outputs).tolist(), strict=True):
            stage = jobs[i].stages[0]
            call = dataclasses.replace(stage.calls[0], output_tokens=output)
            permuted[i] = dataclasses.replace(jobs[i], stages=(dataclasses.replace(stage, calls=(call,)),))
    assert permuted != jobs

    def deadlines(batch: list) -> list[tuple[str, float]]:
        result = simulate([setup.INSTANCE], batch, PolicyPair.parse("least-tokens+chunked-fcfs"), 0, setup.OPTIONS)
        return sorted((record.id, record.deadline_s) for record in result.requests)

    assert deadlines(jobs) == deadlines(permuted)


def test_the_kv_pool_overflows_beyond_about_a_hundred_requests() -> None:
    # W1 (the heaviest mix) well past saturation: uncapped preempts, a cap of 40 never does.
    jobs = setup.code_jobs("W1", 8.0, 0, setup.task_max_tokens(), num_jobs=150)

    def preemptions(policy: str, params: dict[str, object]) -> int:
        candidate = Candidate.of(policy, params)
        result = simulate([setup.INSTANCE], jobs, PolicyPair.parse(policy), 0, setup.OPTIONS, candidate.params)
        return sum(stats.num_preemptions for stats in result.instances)

    assert preemptions("least-tokens+chunked-fcfs", {}) > 0
    assert preemptions(setup.CAPPED, {"cap": 40}) == 0
    whole_card = dataclasses.replace(setup.INSTANCE, num_kv_blocks=None)
    result = simulate([whole_card], jobs, PolicyPair.parse("least-tokens+chunked-fcfs"), 0, setup.OPTIONS)
    assert sum(stats.num_preemptions for stats in result.instances) == 0


def test_on_one_engine_every_baseline_router_makes_the_same_run() -> None:
    # Why the bench sweeps engines behind the reference router only.
    bench = setup.workbench("W3", None, 30, 5)
    runs = {router: bench.run(Candidate.of(f"{router}+chunked-fcfs"), 3.0, 0) for router in BASELINE_ROUTERS}
    assert len(set(runs.values())) == 1


def _result(label: str, capacity: float) -> CapacityResult:
    spread = Spread.of([capacity * 0.9, capacity, capacity * 1.1])
    return CapacityResult(Candidate(label, "least-tokens+static-concurrency"), {0.90: spread, 0.95: spread})


def _board() -> Scoreboard:
    board = Scoreboard("W3 (code-w3)", 100, (0, 1))
    capacities = {10: 1.0, 20: 2.0, 30: 1.5, 256: 3.0}
    board.baselines = {setup.cap_label(cap): _result(setup.cap_label(cap), value) for cap, value in capacities.items()}
    board.others = {name: _result(name, 1.2) for name in ("saber", "saber-first", "saber-predicted")}
    board.strongest = setup.cap_label(256)
    return board


def test_paper_baseline_is_the_best_cap_in_ten_to_a_hundred() -> None:
    board = _board()
    assert setup.paper_baseline(board, (10, 20, 30, 256)) == setup.cap_label(20)
    assert board.ratio("saber") == pytest.approx(0.4)
    assert board.ratio("saber", setup.cap_label(20)) == pytest.approx(0.6)


def _outcome(ratios: list[float], preemptions: int = 0) -> setup.RunOutcome:
    return setup.RunOutcome(np.array(ratios), preemptions)


def test_paper_row_picks_the_best_cap_per_load_ties_to_the_smaller() -> None:
    runs = {
        "saber": [_outcome([0.5, 2.0]), _outcome([0.5, 0.5])],  # 3/4 within SLA
        10: [_outcome([0.5, 0.5]), _outcome([0.5, np.inf])],  # 3/4
        20: [_outcome([0.5, 0.5]), _outcome([0.5, 0.5])],  # 4/4
        30: [_outcome([0.5, 0.5]), _outcome([0.5, 0.5], 3)],  # 4/4, larger cap
        256: [_outcome([2.0, 2.0], 9), _outcome([0.5, 2.0], 5)],
    }
    row = _paper_row(2.0, 5.0, runs, (10, 20, 30))
    assert row["best_cap"] == 20 and row["best_static"] == 1.0 and row["saber"] == 0.75
    assert row["gain_points"] == pytest.approx(-25.0)
    assert row["uncapped"] == 0.25 and row["preemptions"]["cap_256"] == 7.0
    assert row["cv_best_static"] == pytest.approx(0.0)


def test_a_paper_table_run_carries_its_serving_figures_and_the_row_their_medians() -> None:
    bench = setup.workbench("W3", None, 30, 5)
    capped = Candidate.of(f"{setup.REFERENCE_ROUTER}+static-concurrency", {"cap": 20})
    outcomes = [setup.grid_task(setup.GridTask(bench, capped, 2.0, seed)) for seed in (0, 1)]
    jobs, history = bench.workload(2.0, 0)
    result = bench.run_fn(capped, bench.instances, jobs, bench.options, 0, history)
    assert outcomes[0].serving == summarize(measured_only(result)).serving  # as `compare` computes it
    row = _paper_row(1.0, 2.0, {"saber": outcomes, 20: outcomes[::-1], 256: outcomes}, (20,))
    medians = median_over_runs([outcome.serving.to_json_dict() for outcome in outcomes if outcome.serving])
    assert row["serving"]["saber"] == row["serving"]["best_static"] == pytest.approx(medians, nan_ok=True)
    assert medians["output_throughput"] > 0


def test_candidates_and_plans() -> None:
    fit = SpeedFit(UslSpeedModel(lam=100.0, sigma=0.05, kappa=1e-4), 0.99, 1.0)
    profile = SpeedProfile(
        {
            "usl": fit,
            "linear": SpeedFit(LinearSpeedModel(90.0, -0.5), 0.9, 2.0),
            "logistic": SpeedFit(LogisticSpeedModel(120.0, 20.0, 1.0, 0.05), 0.95, 1.5),
        },
        1000,
    )
    quick = {c.label: c for c in setup.saber_candidates(profile, extended=False)}
    assert list(quick) == ["saber", "saber-first", "saber-predicted", "saber-oracle"]
    assert quick["saber-oracle"].oracle and not quick["saber"].oracle
    assert quick["saber-first"].params.engine["saber"]["scan"] == "first"
    assert quick["saber-predicted"].params.engine["saber"]["demand"] == "predicted"
    assert len(setup.saber_candidates(profile, extended=True)) == 6
    assert setup.baseline_plan(False).caps[:10] == setup.PAPER_CAPS
    assert len(RunPlan.of(True).seeds) >= 2 and len(RunPlan.of(False).seeds) >= 5
    assert max(LOADS) >= 2.0 and {1.5, 2.0} <= set(LOADS)


def test_json_carries_both_ratios_baselines_and_seeds() -> None:
    fit = SpeedFit(UslSpeedModel(lam=100.0, sigma=0.05, kappa=1e-4), 0.99, 1.0)
    profile = SpeedProfile({"usl": fit, "linear": fit, "logistic": fit}, 1000)
    row = {"load": 2.0, "gain_points": -5.0, "cv_saber": 0.5, "cv_best_static": 0.4}
    results = [MixResult(mix, _board(), setup.cap_label(20), dict(PAPER_SLA), [row]) for mix in setup.MIXES]
    figures = figures_of(RunPlan.of(True), profile, results)
    for key in ("baselines", "strongest_baseline", "ratio_vs_strongest", "ratio_vs_paper_baseline", "seeds"):
        assert key in figures, key
    assert figures["ratio_vs_strongest"] == pytest.approx(0.4)
    assert figures["ratio_vs_paper_baseline"] == pytest.approx(0.6)
    assert figures["seeds"] == [0, 1] and figures["goodput_gain_vs_best_static"]["W1"] == -5.0


def test_sla_mode_is_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLOSCHED_SABER_SLA", "loose")
    with pytest.raises(ConfigError, match=r"SLOSCHED_SABER_SLA.*allowed"):
        RunPlan.of(quick=True)
    monkeypatch.setenv("SLOSCHED_SABER_SLA", "measured")
    assert RunPlan.of(quick=True).sla_mode == "measured"


class _Measured(Exception):
    """Raised by a stand-in ``evaluate``: the test reads the workbench the bench would have measured."""


def test_the_full_form_sizes_runs_by_the_work_rule_and_the_quick_form_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def evaluate(bench: Workbench, *args: object, **kwargs: object) -> None:
        raise _Measured(bench.work_tolerance)

    monkeypatch.setattr(saber_runs, "evaluate", evaluate)
    monkeypatch.setattr(setup, "saber_candidates", lambda *args, **kwargs: [])  # no speed profile needed
    monkeypatch.delenv("SLOSCHED_SABER_SLA", raising=False)
    for quick, expected in ((False, sizing.WORK_TOLERANCE), (True, None)):
        with pytest.raises(_Measured) as measured:
            saber_runs.run_mix(RunPlan.of(quick), "W1", SpeedProfile({}, 0))
        assert measured.value.args == (expected,)
