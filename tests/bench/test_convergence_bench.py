"""``slosched bench convergence``: the ladder of run lengths, its verdict, the page, and one tiny real run."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import slosched.bench.convergence.merge as merge
import slosched.bench.convergence.report as report
import slosched.bench.convergence.runs as runs
import slosched.bench.convergence.setup as setup
import slosched.bench.stack.setup as stack_setup
from slosched.bench.convergence.report import PLOT, write_page
from slosched.bench.registry import get_benchmark
from slosched.bench.stack.setup import Sizes
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.evaluation import sizing
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.evaluation.sizing import OLD_PREFIX_RULE_NAME, PREFIX_RULE_NAME, WORK_RULE_NAME
from slosched.metrics.summary import json_safe


def test_labels_name_the_candidates_the_scoreboard_ran() -> None:
    baseline = setup.candidate("prism+chunked-fcfs[token_budget=512]")
    assert baseline.label == "prism+chunked-fcfs[token_budget=512]" and baseline.policy == "prism+chunked-fcfs"
    assert setup.candidate("least-tokens+static-concurrency[cap=64]").label == "least-tokens+static-concurrency[cap=64]"
    assert setup.candidate("slosched") == stack_setup.stack_candidates()[0]
    assert setup.candidate(stack_setup.ORACLE_LABEL) == stack_setup.stack_candidates()[1]
    with pytest.raises(ConfigError, match="expected ROUTER\\+ENGINE"):
        setup.candidate("prism chunked")


def test_the_strongest_baseline_comes_from_the_stack_bench_json(tmp_path: Path) -> None:
    results = tmp_path / "stack.json"
    assert setup.strongest_baseline("mixed", results) == setup.REFERENCE_BASELINE  # no file: the reference one
    results.write_text(
        json.dumps({"workloads": {"mixed": {"strongest_baseline": "prism+chunked-fcfs[token_budget=512]"}}})
    )
    assert setup.strongest_baseline("mixed", results) == "prism+chunked-fcfs[token_budget=512]"
    assert setup.strongest_baseline("chat", results) == setup.REFERENCE_BASELINE


def test_workloads_and_rungs_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.workload_names(quick=True) == setup.QUICK_WORKLOADS
    assert setup.workload_names(quick=False) == tuple(workload.name for workload in stack_setup.WORKLOADS)
    monkeypatch.setenv(setup.WORKLOADS_ENV, "mixed, relquery")
    assert setup.workload_names(quick=False) == ("relquery", "mixed")  # the stack bench's order
    monkeypatch.setenv(setup.WORKLOADS_ENV, "chat,nope")
    with pytest.raises(UnknownNameError, match="nope"):
        setup.workload_names(quick=False)
    assert setup.rungs(quick=True) == setup.QUICK_RUNGS
    monkeypatch.setenv(setup.RUNGS_ENV, "4")
    assert setup.rungs(quick=False) == 4
    monkeypatch.setenv(setup.RUNGS_ENV, "9")
    with pytest.raises(ConfigError, match="allowed: 2, 3, 4"):
        setup.rungs(quick=False)


def test_the_oracle_climbs_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert setup.policies("code") == [stack_setup.STACK_LABEL, setup.strongest_baseline("code")]
    monkeypatch.setenv(setup.ORACLE_ENV, "1")
    assert setup.policies("code")[-1] == stack_setup.ORACLE_LABEL and len(setup.policies("code")) == 3
    monkeypatch.setenv(setup.ORACLE_ENV, "yes")
    with pytest.raises(ConfigError, match="allowed: 0, 1"):
        setup.policies("code")


def _row(*medians: float) -> dict[str, Any]:
    return runs._row(
        [[(median * scale, 100 * 4**index) for index, median in enumerate(medians)] for scale in (0.9, 1.0, 1.1)]
    )


def test_steady_from_is_the_shortest_rung_every_longer_rung_keeps() -> None:
    row = _row(1.0, 0.8, 0.78)
    assert [rung["capacity"]["median"] for rung in row["rungs"]] == pytest.approx([1.0, 0.8, 0.78])
    assert row["rungs"][1]["vs_rung_below"] == pytest.approx(0.8) and math.isnan(row["rungs"][0]["vs_rung_below"])
    assert row["rungs"][2]["num_jobs"] == 1600
    assert runs._steady_from([row, _row(2.0, 2.02, 2.0)], 3) == 1  # a burst cleared at the first length
    assert runs._steady_from([_row(1.0, 1.03, 0.99)], 3) == 0
    # Holding at one step is not enough when a longer rung moves again.
    assert runs._steady_from([_row(1.0, 1.02, 1.2)], 3) is None
    assert runs._steady_from([_row(1.0, 1.02, 1.2), _row(1.0, 1.0, 1.0)], 3) is None


def test_the_page_shows_each_rung_and_the_verdict(tmp_path: Path) -> None:
    workloads = {
        "relquery": {
            "policies": {
                "slosched": _row(1.0, 0.8, 0.78),
                "prism+chunked-fcfs[token_budget=512]": _row(0.9, 0.82, 0.8),
            },
            "steady_from": 1,
        },
        "code": {"policies": {"slosched": _row(50.0, 50.5, 50.2)}, "steady_from": 0},
    }
    figures = {
        "mode": "full",
        "seeds": [1, 2, 3],
        "rungs": 3,
        "target": 0.9,
        "tolerance": 0.05,
        "workloads": workloads,
        "wall_s": 120.0,
    }
    page = write_page(tmp_path / "convergence.md", figures).read_text(encoding="utf-8")
    assert "## relquery: steady from rung 1 (4x the stack bench's length)" in page
    assert "| `slosched` | 4x | 400 | 0.800 [0.720-0.880] | 0.800 |" in page
    assert "**relquery** needs runs 4x the stack bench's length" in page
    assert "**code**: the stack bench's length already holds" in page
    workloads["relquery"]["stack_vs_baseline"] = runs.stack_vs_baseline(workloads["relquery"]["policies"])
    page = write_page(tmp_path / "convergence.md", figures).read_text(encoding="utf-8")
    assert "- **relquery**, the stack over its strongest baseline by rung: 1.11x -> 0.98x -> 0.97x." in page
    assert "the ORACLE (true output lengths)" not in page  # no oracle climbed
    policies = workloads["relquery"]["policies"]
    policies[stack_setup.ORACLE_LABEL] = _row(1.2, 0.9, 0.9)
    workloads["relquery"]["oracle_vs_baseline"] = runs.oracle_vs_baseline(policies)
    assert workloads["relquery"]["oracle_vs_baseline"] == pytest.approx([1.2 / 0.9, 0.9 / 0.82, 0.9 / 0.8])
    page = write_page(tmp_path / "convergence.md", figures).read_text(encoding="utf-8")
    assert "the ORACLE (true output lengths) over the same baseline: 1.33x -> 1.10x -> 1.12x; the stack at " in page
    assert "0.83 -> 0.89 -> 0.87 of it." in page
    # From the printed JSON too, where the first rung's missing ratio is null.
    printed = json.loads(json.dumps(json_safe(figures)))
    assert write_page(tmp_path / "again.md", printed).read_text(encoding="utf-8").count("| `slosched` | 1x |") == 2
    assert (tmp_path / PLOT).stat().st_size > 0


def test_a_tiny_ladder_runs_end_to_end(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(stack_setup, "STACK_POLICY", "prism+static-priority")  # a cheap stand-in
    monkeypatch.setattr(stack_setup, "STACK_JOB_POLICY", "stage-budget")
    monkeypatch.setattr(stack_setup, "STACK_SELF_TUNE", False)
    tiny = replace(stack_setup.CODE, quick=Sizes(16, 4))
    monkeypatch.setattr(stack_setup, "WORKLOADS", (tiny,))
    monkeypatch.setattr(setup, "QUICK_SEEDS", (1,))
    monkeypatch.setattr(setup, "STACK_RESULTS", tmp_path / "absent.json")
    monkeypatch.setattr(sizing, "WINDOW_FACTOR", 2.0)  # a tiny run: the rule itself is tested in evaluation
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")  # in-process, so the runs see the patched settings
    assert get_benchmark("convergence").run is runs.run
    figures = json.loads(json.dumps(json_safe(runs.run(quick=True))))
    row = figures["workloads"]["code"]
    assert set(row["policies"]) == {"slosched", setup.REFERENCE_BASELINE}
    for policy in row["policies"].values():
        first, second = policy["rungs"]
        assert first["capacity"]["median"] > 0 and second["capacity"]["median"] > 0
        assert second["num_jobs"] >= 4 * first["num_jobs"]  # the 4x search of the rung below
        assert second["vs_rung_below"] == pytest.approx(second["capacity"]["median"] / first["capacity"]["median"])
    assert row["steady_from"] in (0, None) and figures["rungs"] == 2 and figures["seeds"] == [1]
    assert figures["work_rule"] == "off"  # a quick form runs without it
    assert figures["judgement"] == JUDGEMENT_NAME
    stack, baseline = (row["policies"][label]["rungs"] for label in ("slosched", setup.REFERENCE_BASELINE))
    assert row["stack_vs_baseline"] == pytest.approx(
        [
            mine["capacity"]["median"] / theirs["capacity"]["median"]
            for mine, theirs in zip(stack, baseline, strict=True)
        ]
    )


def _figures(workloads: dict[str, Any], wall_s: float, seeds: list[int]) -> dict[str, Any]:
    return {"mode": "full", "seeds": seeds, "rungs": 3, "target": 0.9, "tolerance": 0.05, "wall_s": wall_s} | {
        "workloads": workloads
    }


def test_a_run_of_some_workloads_keeps_the_earlier_rows_of_the_others(tmp_path: Path) -> None:
    chat = {"policies": {"slosched": _row(18.0, 17.0, 17.5)}, "steady_from": 1}
    earlier = _figures(
        {"chat": chat, "mixed": {"policies": {"slosched": _row(4.0, 3.5, 3.7)}, "steady_from": None}}, 600, [1, 2]
    )
    latest = _figures({"mixed": {"policies": {"slosched": _row(3.0, 3.0, 3.0)}, "steady_from": 0}}, 1200, [1, 2, 3])
    figures = report.merged(earlier, latest)
    assert list(figures["workloads"]) == ["chat", "mixed"]  # the stack bench's order
    assert figures["workloads"]["mixed"]["steady_from"] == 0  # the latest run wins where both climbed
    runs_of = {name: row["run"] for name, row in figures["workloads"].items()}
    assert runs_of["chat"]["wall_s"] == 600 and runs_of["mixed"]["seeds"] == [1, 2, 3]
    page = write_page(tmp_path / "convergence.md", figures).read_text(encoding="utf-8")
    assert "- chat: full run, seeds 1, 2, 10.0 min wall" in page
    assert "- mixed: full run, seeds 1, 2, 3, 20.0 min wall" in page
    written = json.loads((tmp_path / report.RESULTS).read_text(encoding="utf-8"))
    assert report.read_results(tmp_path / "convergence.md") == written
    assert set(written["workloads"]) == {"chat", "mixed"}
    # Merged again with itself, a row keeps the run it came from (not the merging run's).
    assert report.merged(written, latest)["workloads"]["chat"]["run"]["wall_s"] == 600
    # One run: one clause, as before.
    single = write_page(tmp_path / "one.md", latest).read_text(encoding="utf-8")
    assert "(full run, seeds 1, 2, 3, 20.0 min wall; warm-up prefix: " in single
    assert "every number below comes from that run." in single
    # A run that names no warm-up rule predates the time rule; one that does names it.
    assert OLD_PREFIX_RULE_NAME in single
    named = write_page(tmp_path / "named.md", {**latest, "warmup": PREFIX_RULE_NAME}).read_text(encoding="utf-8")
    assert f"warm-up prefix: {PREFIX_RULE_NAME}" in named
    # Likewise the work rule: none named is a run before it; a full run since names it.
    assert f"work rule: {report.OLD_WORK_RULE_NAME}" in single and "work rule: " + WORK_RULE_NAME not in single
    ruled = write_page(tmp_path / "ruled.md", {**latest, "work_rule": WORK_RULE_NAME}).read_text(encoding="utf-8")
    assert f"work rule: {WORK_RULE_NAME}" in ruled
    # And the judgement: a run before ``judgement.py`` judged the second half strictly.
    assert f"judged on: {report.OLD_JUDGEMENT_NAME}" in single
    judged = write_page(tmp_path / "judged.md", {**latest, "judgement": JUDGEMENT_NAME}).read_text(encoding="utf-8")
    assert f"judged on: {JUDGEMENT_NAME}" in judged


def test_merging_a_run_into_the_page_from_the_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    page = tmp_path / "convergence.md"
    run = tmp_path / "relquery.json"
    run.write_text(
        json.dumps(
            json_safe(
                _figures({"relquery": {"policies": {"slosched": _row(1.0, 0.9, 0.9)}, "steady_from": 1}}, 60, [1])
            )
        )
    )
    assert merge.main([str(run), "--page", str(page)]) == 0
    assert "## relquery: steady from rung 1" in page.read_text(encoding="utf-8")
    bad = tmp_path / "bad.json"
    for text in ("{not json", json.dumps({"workloads": []})):
        bad.write_text(text)
        assert merge.main([str(bad), "--page", str(page)]) == 2
        assert capsys.readouterr().err.startswith(f"error: runs: {bad}: ")
    assert "## relquery" in page.read_text(encoding="utf-8")  # a bad file changes nothing
