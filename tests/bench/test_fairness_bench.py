"""``slosched bench fairness``: its plan sizes, the summary of several runs, the page, and the failure path
(figures printed, one ``error:`` line, exit 2) when fair sharing misses the 5-point bound. The measurement
itself: ``tests/sim/test_fair_flood.py`` (simulated), ``tests/gateway/test_fair_live.py`` (live, slow) and the
slow quick run below."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import slosched.bench.fairness.runs as runs
from slosched.bench.fairness.report import page
from slosched.bench.fairness.setup import FULL, QUICK
from slosched.bench.registry import bench_names
from slosched.cli.main import run as cli
from slosched.experiment import FloodFigures


def _flood(drop_fair: float, seed: int = 0) -> FloodFigures:
    return FloodFigures("batch", 0.99, 0.99 - drop_fair / 100, 0.99, 0.80 - seed / 100, 1.0, 0.9)


def test_plans_follow_the_evaluation_method_and_the_bench_is_registered() -> None:
    assert "fairness" in bench_names()
    assert len(QUICK.seeds) >= 2 and len(FULL.seeds) >= 5 and QUICK.live_runs >= 1


def test_summary_takes_medians_spreads_and_keeps_each_run() -> None:
    figures = runs.summarise([_flood(1.0, 0), _flood(3.0, 1), _flood(2.0, 2)])
    assert figures["runs"] == 3 and figures["flooder"] == "batch"
    assert figures["drop_fair_points"] == pytest.approx(2.0)
    assert figures["drop_fair_points_spread"] == pytest.approx([1.0, 3.0])
    assert figures["flood_fcfs_spread"] == pytest.approx([0.78, 0.80])
    assert [run["drop_fair_points"] for run in figures["per_run"]] == pytest.approx([1.0, 3.0, 2.0])


def _measure(drop_fair: float) -> object:
    def measure(plan: object) -> dict[str, object]:
        sim, live = runs.summarise([_flood(drop_fair)]), runs.summarise([_flood(0.0)])
        sim["seeds"] = [11]
        worst = {"sim": drop_fair, "live": 0.0}
        passed = drop_fair <= 5.0
        return {"sim": sim, "live": live, "max_drop_points": 5.0, "worst_drop_fair_points": worst, "passed": passed}

    return measure


def test_a_drop_over_5_points_prints_the_figures_then_one_error_line_and_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(runs, "measure", _measure(7.5))
    assert cli(["bench", "fairness", "--quick", "--json"]) == 2
    captured = capsys.readouterr()
    figures = json.loads(captured.out.strip().splitlines()[-1])
    assert figures["passed"] is False and figures["worst_drop_fair_points"]["sim"] == 7.5
    assert "error: fairness: with fair sharing the flood costs the other tenant more than 5 points (sim: 7.5)" in (
        captured.err
    )
    monkeypatch.setattr(runs, "measure", _measure(1.0))
    assert cli(["bench", "fairness", "--quick", "--json"]) == 0


def test_the_page_shows_every_half_and_the_verdict(tmp_path: Path) -> None:
    text = page(_measure(1.0)(FULL))  # type: ignore[operator]
    assert "**met**" in text and "| simulated, fair sharing (1 seeds) | 99.0% [99.0, 99.0]" in text
    assert "| live, first come first served | 99.0% [99.0, 99.0] | 80.0% [80.0, 80.0] | 19.0 [19.0, 19.0]" in text


@pytest.mark.slow
def test_the_quick_run_meets_the_done_when_sim_and_live() -> None:
    figures = runs.run(quick=True)
    assert figures["passed"] and figures["sim"]["runs"] == 2 and figures["live"]["runs"] == 1
    for half in ("sim", "live"):
        assert figures[half]["drop_fair_points_spread"][1] <= 5.0
        assert figures[half]["drop_fcfs_points"] > figures[half]["drop_fair_points"]
