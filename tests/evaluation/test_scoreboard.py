"""The scoreboard on a tiny workbench: strongest baseline chosen after the fact, both ratios, fields."""

from __future__ import annotations

import math
from copy import deepcopy
from dataclasses import replace
from typing import Any

import pytest

import slosched.evaluation.overload as overload
from slosched.core.job import JobSpec
from slosched.evaluation import sizing
from slosched.evaluation.baseline_plan import BaselinePlan
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.evaluation.overload import others_overload
from slosched.evaluation.rows import keeping_rows
from slosched.evaluation.scoreboard import Scoreboard, evaluate, unscreen
from slosched.evaluation.scoreboard_report import (
    capacity_table,
    overload_table,
    plot_capacities,
    plot_overload,
    serving_table,
)
from slosched.evaluation.screening import SCREEN_MARGIN
from slosched.evaluation.steady import steady_jobs
from slosched.evaluation.workbench import Candidate, Workbench, measured_only
from slosched.metrics.serving import median_over_runs
from slosched.metrics.summary import summarize
from slosched.sim.options import SimOptions
from slosched.workloads.generators import make_workload
from tests.conftest import make_cluster


def _chat_jobs(num_jobs: int, seed: int) -> list[JobSpec]:
    return make_workload("azure-conv", {"process": "poisson", "rate": 1.0}, num_jobs, {}, seed=seed)


BENCH = Workbench("chat", make_cluster(1, 1), _chat_jobs, 80, SimOptions(slo_scale=6.0), num_warmup_jobs=20)
FAST_WINDOW = 4.0  # a shorter steady-state window keeps these tests quick (tests/evaluation/test_steady.py)


@pytest.fixture(scope="module")
def evaluated() -> tuple[Scoreboard, dict[str, Any]]:
    """The scoreboard, and the rows it finished (kept as ``slosched bench`` keeps them)."""
    plan = BaselinePlan(token_budgets=(512, 2048), caps=(16, 64), routers=("least-tokens", "least-loaded"))
    paper = [Candidate.of("round-robin+static-priority"), Candidate.of("round-robin+fcfs")]
    patch = pytest.MonkeyPatch()
    patch.setenv("SLOSCHED_BENCH_WORKERS", "1")  # in-process, so the runs see the patched window
    patch.setattr(sizing, "WINDOW_FACTOR", FAST_WINDOW)
    try:
        with keeping_rows() as finished:
            board = evaluate(BENCH, seeds=[1, 2], others=paper, plan=plan, guess=2.0, loads=(1.0, 2.0))
        return board, finished.rows
    finally:
        patch.undo()


@pytest.fixture(scope="module")
def board(evaluated: tuple[Scoreboard, dict[str, Any]]) -> Scoreboard:
    return evaluated[0]


def test_strongest_is_the_best_baseline_and_never_a_paper_policy(board: Scoreboard) -> None:
    best = max(result.median_90 for label, result in board.baselines.items() if label not in board.screened_out)
    assert board.strongest in board.baselines and board.strongest not in board.screened_out
    assert board.capacity_of(board.strongest) == best
    assert board.ratio(board.strongest) == 1.0
    for label, result in board.baselines.items():
        assert len(result.searches) == (1 if label in board.screened_out else len(board.seeds))
        spread = result.capacity[0.9]
        assert spread.low <= spread.median <= spread.high
        for at_95, at_90 in zip(result.capacity[0.95].values, spread.values, strict=True):
            assert at_95 <= at_90 * 1.02  # the 95% search starts inside the 90% one's bracket


def test_json_carries_both_ratios_and_the_seeds(board: Scoreboard) -> None:
    figures = board.as_json("round-robin+static-priority", "round-robin+fcfs")
    for key in ("baselines", "strongest_baseline", "ratio_vs_strongest", "ratio_vs_paper_baseline", "seeds"):
        assert key in figures
    assert figures["seeds"] == [1, 2]
    expected = board.capacity_of("round-robin+static-priority") / board.capacity_of(board.strongest)
    assert figures["ratio_vs_strongest"] == pytest.approx(expected)
    overload = figures["overload"][board.strongest]
    assert set(overload) == {"1.0x", "2.0x"}
    assert not math.isnan(overload["2.0x"]["goodput_jobs_per_s"]["median"])


def test_tables_and_plots(board: Scoreboard, tmp_path) -> None:  # type: ignore[no-untyped-def]
    table = "\n".join(capacity_table(board))
    assert "**strongest baseline**" in table and "round-robin+fcfs" in table
    assert "2.0x" in "\n".join(overload_table(board))
    plot_capacities([board], tmp_path / "capacity.png", "test")
    plot_overload([board], tmp_path / "overload.png", "test")
    assert (tmp_path / "capacity.png").stat().st_size > 0 and (tmp_path / "overload.png").stat().st_size > 0


def test_screened_out_baselines_were_too_far_below_the_best_on_the_first_seed(board: Scoreboard) -> None:
    """Every baseline was searched on seed 1; those too far below the best there (``screening.py``) only."""
    first = {label: result.searches[0].capacity[0.9] for label, result in board.baselines.items()}
    assert board.screened_out, "the tiny plan's weakest baselines are screened out"
    best = max(first.values())
    for label in board.screened_out:
        assert first[label] < (1 - SCREEN_MARGIN) * best
    assert board.as_json()["screened_out"] == board.screened_out
    assert "screened out on seed 1" in "\n".join(capacity_table(board))


def test_strongest_at_each_load_is_chosen_after_the_fact_among_every_baseline(board: Scoreboard) -> None:
    """Every baseline ran at every load on the first seed; the strongest at a load is chosen among those that
    went on to every seed (the contenders there)."""
    assert set(board.overload_baselines) == set(board.baselines)
    figures = board.as_json("round-robin+static-priority", "round-robin+fcfs")
    for load in (1.0, 2.0):
        label, goodput = board.strongest_at(load)
        assert label in board.baselines
        every = [per_load[load][1].median for per_load in board.overload_baselines.values() if load in per_load]
        assert len(board.overload_baselines[board.strongest][load][1].values) == len(board.seeds)
        assert goodput == max(every)
        assert goodput >= board.overload[board.strongest][load][1].median
        serving = board.serving_at(label, load)
        assert serving["request_throughput"] > 0  # the chosen baseline's runs at that load, in vLLM's terms
        expected = {"label": label, "goodput_jobs_per_s": goodput, "serving": serving}
        assert figures["strongest_per_load"][f"{load}x"] == expected
        ours = board.overload["round-robin+static-priority"][load][1].median
        assert figures["goodput_ratio_vs_strongest_per_load"][f"{load}x"] == pytest.approx(ours / goodput)
    assert "best baseline at this load" in "\n".join(overload_table(board))


def test_json_carries_the_convergence_figure_and_the_truth(board: Scoreboard) -> None:
    figures = board.as_json("round-robin+static-priority", "round-robin+fcfs")
    # The paper policy (first of ``others``) and the strongest baseline, at 4x the run length, same seeds.
    assert set(figures["capacity_4x"]) == {"round-robin+static-priority", board.strongest}
    for label, long in figures["capacity_4x"].items():
        short = board.capacity_of(label)
        assert figures["steady_state_by_policy"][label] == (abs(short - long) <= 0.05 * long)
    assert figures["steady_state"] == all(figures["steady_state_by_policy"].values())
    assert figures["truth"] == sorted({spec.stack for spec in make_cluster(1, 1)})
    assert figures["judgement"] == JUDGEMENT_NAME  # every bench JSON names how its runs were judged
    runs = figures["runs"][board.strongest]
    assert len(runs["num_jobs"]) == 2 and min(runs["num_jobs"]) >= 80
    assert runs["attainment_all"]["min"] >= 0.9 and runs["attainment_judged"]["min"] >= 0.9


SERVING_KEYS = {
    "request_throughput",
    "output_throughput",
    "total_token_throughput",
    "request_goodput",
    *(f"{stat}_{name}_ms" for stat in ("mean", "median", "p99") for name in ("ttft", "tpot", "itl", "e2el")),
}


def test_an_overload_row_carries_the_serving_figures_of_its_runs(
    board: Scoreboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The strongest baseline at 2x, rerun on the same records: its serving figures as `compare` computes
    them, medians over the seeds, are what the row carries."""
    figures = board.as_json("round-robin+static-priority", "round-robin+fcfs")
    row = figures["overload"][board.strongest]["2.0x"]
    assert set(row["serving"]) >= SERVING_KEYS
    monkeypatch.setattr(sizing, "WINDOW_FACTOR", FAST_WINDOW)  # the sizing the evaluation ran under
    base = board.capacity_of(board.strongest)
    candidate = board.baselines[board.strongest].candidate
    runs = []
    for seed in board.seeds:
        sized = BENCH.sized(steady_jobs(BENCH, seed, 2.0 * base))
        jobs, history = sized.workload(2.0 * base, seed)
        result = sized.run_fn(candidate, sized.instances, jobs, sized.options, seed, history)
        runs.append(summarize(measured_only(result)).serving.to_json_dict())
    assert row["serving"] == pytest.approx(median_over_runs(runs), nan_ok=True)
    # Attainment and goodput are untouched: the same runs' figures as before the serving keys.
    assert set(row) == {"attainment", "goodput_jobs_per_s", "serving"}


def test_every_capacity_carries_the_serving_figures_of_its_run_at_capacity(board: Scoreboard) -> None:
    figures = board.as_json()
    for label, runs in figures["runs"].items():
        serving = runs["serving_at_capacity"]
        assert set(serving) >= SERVING_KEYS, label
        search = board.baselines.get(label) or board.others[label]
        per_seed = [each.serving.to_json_dict() for each in search.searches if each.serving is not None]
        assert len(per_seed) == (1 if label in board.screened_out else len(board.seeds))
        assert serving == median_over_runs(per_seed)


def test_a_finished_scoreboard_is_a_finished_row(evaluated: tuple[Scoreboard, dict[str, Any]]) -> None:
    board, rows = evaluated
    assert list(rows) == [board.workbench]
    assert rows[board.workbench] == board.as_json("round-robin+static-priority")


def test_the_serving_table_shows_each_policy_at_each_load(board: Scoreboard) -> None:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(serving_table(board))
    text = console.export_text()
    assert "p99 TTFT ms" in text and "out tok/s" in text
    strongest = board.serving_at(board.strongest, 2.0)
    assert f"{strongest['p99_ttft_ms']:.1f}" in text and f"{strongest['output_throughput']:.1f}" in text


def _in_process_fast(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs in this process (so they see the patched window), on the fixture's short window."""
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    monkeypatch.setattr(sizing, "WINDOW_FACTOR", FAST_WINDOW)


def test_unscreen_searches_a_screened_out_baseline_on_every_seed(
    board: Scoreboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bench that reports a screened-out baseline (SABER's paper baseline) completes its seeds first."""
    _in_process_fast(monkeypatch)
    copy = deepcopy(board)
    label = copy.screened_out[0]
    first = copy.baselines[label].searches[0]
    unscreen(BENCH, copy, label)
    assert label not in copy.screened_out and label in copy.baselines
    searches = copy.baselines[label].searches
    assert len(searches) == len(board.seeds) and searches[0] is first  # the first seed's search is kept
    before = copy.baselines[copy.strongest]
    unscreen(BENCH, copy, copy.strongest)  # not screened out: nothing to do
    assert copy.baselines[copy.strongest] is before


def _counting_overload_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """Each call's labels (the strongest first), the runs made as ``overload_runs`` makes them."""
    calls: list[list[str]] = []
    real = overload.overload_runs

    def counted(workbench, board, labels, *args, **kwargs):  # type: ignore[no-untyped-def]
        runs = real(workbench, board, labels, *args, **kwargs)
        calls.append(list(runs))
        return runs

    monkeypatch.setattr(overload, "overload_runs", counted)
    return calls


def test_a_remeasure_keeps_the_baselines_overload_runs_and_reruns_only_the_strongest_as_the_check(
    board: Scoreboard, monkeypatch: pytest.MonkeyPatch
) -> None:
    _in_process_fast(monkeypatch)
    calls = _counting_overload_runs(monkeypatch)
    loads, others = list(board.overload[board.strongest]), list(board.others)
    copy = deepcopy(board)
    copy.overload_baselines.setdefault("stale row", {})  # a label no longer among the baselines is dropped
    others_overload(BENCH, copy, others, loads, workers=1, keep=True)
    # The check (every baseline once, on the first seed at the highest load), then the strongest and the others.
    assert len(calls) == 2 and set(calls[0]) == set(board.baselines) and calls[1] == [board.strongest, *others]
    assert copy.overload == board.overload and copy.overload_baselines == board.overload_baselines
    assert copy.overload_serving == board.overload_serving  # the same figures a full run gave


def test_kept_baseline_runs_that_a_fresh_run_of_the_strongest_contradicts_are_all_run_again(
    board: Scoreboard, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _in_process_fast(monkeypatch)
    calls = _counting_overload_runs(monkeypatch)
    loads, others = list(board.overload[board.strongest]), list(board.others)
    copy = deepcopy(board)
    first = loads[0]
    attainment, goodput = copy.overload_baselines[copy.strongest][first]
    copy.overload_baselines[copy.strongest][first] = (attainment, replace(goodput, median=goodput.median + 1.0))
    others_overload(BENCH, copy, others, loads, workers=1, keep=True)
    assert len(calls) == 3 and set(calls[2]) == {*others, *board.baselines}
    assert f"kept baseline runs differ from fresh ones ({board.strongest} at {first}x)" in capsys.readouterr().err
    assert copy.overload_baselines == board.overload_baselines  # the contradicted figures replaced

    calls.clear()  # a baseline's first-seed run at the highest load contradicted: nothing else runs before all do
    copy = deepcopy(board)
    other = next(label for label in copy.baselines if label != copy.strongest)
    copy.overload_baselines.pop(other, None)  # as if it ran on the first seed only: its serving figures are held
    copy.overload_serving[other][max(loads)] = {"request_throughput": -1.0}
    others_overload(BENCH, copy, others, loads, workers=1, keep=True)
    assert len(calls) == 2 and set(calls[1]) == {*others, *board.baselines}
    assert f"({other})" in capsys.readouterr().err and copy.overload_serving == board.overload_serving

    calls.clear()  # a board lacking a baseline's runs at a load cannot keep them either
    copy = deepcopy(board)
    del copy.overload_serving[other]
    others_overload(BENCH, copy, others, loads, workers=1, keep=True)
    assert len(calls) == 1 and set(calls[0]) == {*others, *board.baselines}
