"""The RelServe bench's pieces: set-up, candidates, the oracle path, JSON figures and the report (no timing)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import slosched.bench.relserve.runs as relserve
import slosched.bench.relserve.setup as relserve_setup
from slosched.bench.relserve.report import write_report
from slosched.evaluation import sizing
from slosched.evaluation.baseline_plan import BASELINE_ROUTERS
from slosched.evaluation.capacity import Spread
from slosched.evaluation.scoreboard import TARGETS, CapacityResult, Scoreboard
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.metrics.summary import json_safe

ONE_ENGINE = relserve_setup.Setting("OPT-13B", 1, "amazon")
TWO_ENGINES = relserve_setup.Setting("OPT-13B", 1, "mixed", num_engines=2)


def test_one_engine_sweeps_engines_only_and_a_cluster_sweeps_every_router() -> None:
    assert relserve_setup.baseline_plan(ONE_ENGINE, quick=False).routers == ("least-tokens",)
    assert relserve_setup.baseline_plan(ONE_ENGINE, quick=False).token_budgets == (256, 512, 1024, 2048)
    assert relserve_setup.baseline_plan(TWO_ENGINES, quick=True).routers == BASELINE_ROUTERS
    assert [spec.name for spec in relserve_setup.instances(TWO_ENGINES)] == ["OPT-13B-tp1-0", "OPT-13B-tp1-1"]
    assert TWO_ENGINES.label == "2x OPT-13B TP1 / mixed" and ONE_ENGINE.gpus == "1x A100-40G"


def test_every_router_makes_the_same_choice_on_one_engine() -> None:
    bench = relserve_setup.workbench(ONE_ENGINE, 6, 2)
    runs = {bench.run(Candidate.of(f"{router}+chunked-fcfs"), 0.3, 1) for router in BASELINE_ROUTERS}
    assert len(runs) == 1


def test_paper_candidates_and_their_job_policies() -> None:
    short = {candidate.label: candidate for candidate in relserve_setup.paper_candidates(extended=False)}
    assert list(short) == [
        "least-tokens+relserve",
        "least-tokens+fcfs",
        "least-tokens+chunked-fcfs",
        "least-tokens+static-priority",
    ]
    assert short["least-tokens+static-priority"].job_policy == "static-sum"
    assert short["least-tokens+relserve"].job_policy == "deadline"
    extended = {candidate.label: candidate for candidate in relserve_setup.paper_candidates(extended=True)}
    assert extended[relserve_setup.ORACLE].oracle and not extended[relserve_setup.PREDICTED_OL].oracle
    assert dict(extended[relserve_setup.PREDICTED_OL].params.engine["relserve"]) == {"output_length": "predicted"}


def test_oracle_runs_the_same_jobs_and_the_plain_path_is_reproducible() -> None:
    bench = relserve_setup.workbench(ONE_ENGINE, 6, 2)
    plain = Candidate.of(relserve_setup.PAPER_POLICY)
    oracle = Candidate(relserve_setup.ORACLE, plain.policy, plain.params, oracle=True)
    assert bench.run(plain, 0.3, 2) == bench.run(plain, 0.3, 2)
    figures = bench.run(oracle, 0.3, 2)
    assert figures.num_jobs == 6 and 0.0 <= figures.attainment <= 1.0


def _spread(value: float) -> Spread:
    return Spread.of([0.9 * value, value, 1.1 * value])


def _result(setting: relserve_setup.Setting) -> relserve.SettingResult:
    board = Scoreboard(setting.label, 10, (1, 2, 3))
    strongest = Candidate.of("least-tokens+chunked-fcfs", {"token_budget": 512})
    board.baselines = {strongest.label: CapacityResult(strongest, {t: _spread(0.2) for t in TARGETS})}
    board.strongest = strongest.label
    capacities = {"relserve": 0.25, "fcfs": 0.1, "chunked-fcfs": 0.15, "static-priority": 0.3}
    for candidate in relserve_setup.paper_candidates(extended=False):
        value = capacities[candidate.policy.split("+")[1]]
        board.others[candidate.label] = CapacityResult(candidate, {t: _spread(value) for t in TARGETS})
    board.overload = {
        label: {load: (_spread(0.9), _spread(0.1 * load)) for load in (0.5, 1.0, 1.5, 2.0)}
        for label in (strongest.label, relserve_setup.PAPER_POLICY)
    }
    result = relserve.SettingResult(setting, board)
    labels = [candidate.label for candidate in relserve_setup.paper_candidates(extended=False)]
    result.latency = [
        {"load": load, "rate_rps": 0.2 * load, "mean_latency_s": dict.fromkeys(labels, 3.0 * load)}
        for load in (0.5, 1.0)
    ]
    part = {"count": 10, "waiting_s": 1.0, "core_s": 0.5, "tail_s": 0.2}
    result.at_ablation_load = {
        "ratio_vs_fcfs": 1.5,
        "ratio_vs_static_priority": 0.9,
        "breakdown": {"static-priority": part, "relserve": part},
        "ablation_mean_latency_s": {
            "relserve": 3.0,
            "relserve-pp": 3.1,
            "relserve-dp": float("inf"),
            "relserve-sep": 3.2,
        },
        "overhead_share": 0.001,
        "us_per_iteration": 150.0,
    }
    return result


def test_json_figures_carry_the_scoreboard_fields_and_both_ratios() -> None:
    plan = relserve.RunPlan.of(quick=True)
    figures = relserve.figures_of(plan, [_result(ONE_ENGINE), _result(TWO_ENGINES)])
    line = json.dumps(json_safe(figures), allow_nan=False)
    loaded = json.loads(line)
    for key in ("baselines", "strongest_baseline", "ratio_vs_strongest", "ratio_vs_paper_baseline", "seeds"):
        assert key in loaded
    assert loaded["ratio_vs_strongest"] == 1.25 and loaded["ratio_vs_paper_baseline"] == 2.5
    assert loaded["ratio_vs_paper_baselines"]["static-priority"] == 0.25 / 0.3
    assert loaded["seeds"] == list(plan.seeds) and loaded["num_jobs"] == plan.num_jobs
    assert set(loaded["ratio_vs_strongest_by_setting"]) == {ONE_ENGINE.label, TWO_ENGINES.label}


def test_report_states_both_ratios_the_losses_and_the_command(tmp_path: Path) -> None:
    plan = relserve.RunPlan.of(quick=True)
    figures = json_safe(relserve.figures_of(plan, [_result(ONE_ENGINE)]))
    page = write_report(tmp_path, figures).read_text(encoding="utf-8")
    assert "slosched bench relserve" in page and "**1.25**" in page
    assert "ratio vs vLLM (paper baseline)" in page and "| 2.50 |" in page
    assert "below vLLM-SP" in page  # 0.25 < 0.30: the loss is named
    assert figures["work_rule"] == "off" and "Each run: 60 relQueries (`relquery`" in page  # quick: no rule
    full = json_safe(relserve.figures_of(relserve.RunPlan.of(quick=False), [_result(ONE_ENGINE)]))
    assert full["work_rule"] == sizing.WORK_RULE_NAME
    ruled = write_report(tmp_path, full).read_text(encoding="utf-8")
    assert f"Each run: 100 relQueries{sizing.work_rule_clause(sizing.WORK_RULE_NAME)} (`relquery`" in ruled
    assert {path.name for path in (tmp_path / "relserve").iterdir()} == {
        "capacity.png",
        "goodput.png",
        "latency_vs_load.png",
    }


class _Measured(Exception):
    """Raised by a stand-in ``evaluate``: the test reads the workbench the bench would have measured."""


def test_the_full_form_sizes_runs_by_the_work_rule_and_the_quick_form_does_not(monkeypatch: pytest.MonkeyPatch) -> None:
    def evaluate(bench: Workbench, *args: object, **kwargs: object) -> None:
        raise _Measured(bench.work_tolerance)

    monkeypatch.setattr(relserve, "evaluate", evaluate)
    for quick, expected in ((False, sizing.WORK_TOLERANCE), (True, None)):
        plan = relserve.RunPlan.of(quick)
        with pytest.raises(_Measured) as measured:
            relserve.run_setting(plan, plan.settings[0])
        assert measured.value.args == (expected,)
