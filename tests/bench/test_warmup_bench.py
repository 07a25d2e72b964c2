"""``slosched bench warmup``: the prefixes, the rate, the verdict, the page, and one small real run."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

import slosched.bench.warmup.report as report
import slosched.bench.warmup.runs as runs
import slosched.bench.warmup.setup as setup
from slosched.bench.registry import get_benchmark
from slosched.core.errors import UnknownNameError
from slosched.evaluation.sizing import prefix_factor


def test_the_bench_is_registered_and_its_workloads_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert get_benchmark("warmup").name == "warmup"
    monkeypatch.delenv(setup.WORKLOADS_ENV, raising=False)
    assert setup.workload_names(quick=True) == setup.QUICK_WORKLOADS and len(setup.workload_names(quick=False)) == 5
    monkeypatch.setenv(setup.WORKLOADS_ENV, "mixed, text2sql")
    assert setup.workload_names(quick=False) == ("text2sql", "mixed")  # the stack bench's order
    monkeypatch.setenv(setup.WORKLOADS_ENV, "sql")
    with pytest.raises(UnknownNameError, match=setup.WORKLOADS_ENV):
        setup.workload_names(quick=False)


def test_the_rate_is_the_strongest_baselines_recorded_capacity(tmp_path: Path) -> None:
    results = tmp_path / "stack.json"
    guess = setup.operating_rate("chat", "prism+chunked-fcfs[token_budget=128]", results)  # no file: the guess
    results.write_text(
        json.dumps({"workloads": {"chat": {"capacity_rps": {"prism+chunked-fcfs[token_budget=128]": 13.6}}}})
    )
    assert setup.operating_rate("chat", "prism+chunked-fcfs[token_budget=128]", results) == 13.6
    assert setup.operating_rate("chat", "other+fcfs", results) == guess


def test_prefixes_count_a_quarter_of_the_run_or_the_arrivals_of_their_span() -> None:
    assert setup.prefix_count(None, 800, 50.0, 0.6) == 200
    assert setup.prefix_count(10.0, 800, 50.0, 0.6) == 300  # 10 x 50 s at 0.6 jobs/s
    assert setup.prefix_label(None) == "a quarter of the run" and setup.prefix_label(prefix_factor()) == "10x p90"


def _row(attainments: dict[str, float]) -> dict[str, Any]:
    return {"prefixes": {label: {"attainment": {"median": value}} for label, value in attainments.items()}}


def test_settled_from_is_the_shortest_prefix_every_longer_one_keeps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(setup, "PREFIXES", (None, 2.5, 5.0, 10.0, 20.0))
    cold = {"a quarter of the run": 0.89, "2.5x p90": 0.85, "5x p90": 0.925, "10x p90": 0.93, "20x p90": 0.933}
    steady = {label: 0.97 for label in cold}
    assert runs.settled_from([_row(cold), _row(steady)]) == "5x p90"
    assert runs.settled_from([_row(steady)]) == "2.5x p90"
    late = {**cold, "10x p90": 0.90}  # a longer prefix that moves again: not settled there
    assert runs.settled_from([_row(late), _row(steady)]) is None


def test_a_small_run_measures_the_same_jobs_after_each_prefix_and_writes_its_page(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(setup, "PREFIXES", (None, 1.0, 4.0))
    monkeypatch.setenv("SLOSCHED_BENCH_WORKERS", "1")
    figures = runs.run(quick=True)
    row = figures["workloads"]["chat"]
    assert set(row["policies"]) == set(setup.policies("chat")) and row["rate"] > 0
    for policy in row["policies"].values():
        entries = list(policy["prefixes"].values())
        assert len({entry["num_jobs"] for entry in entries}) == 1  # the same measured jobs after every prefix
        assert entries[1]["prefix_jobs"] < entries[2]["prefix_jobs"]
        for entry in entries:
            assert all(0.0 <= entry[key]["median"] <= 1.0 for key in runs.FIGURES)
            assert math.isclose(entry["prefix_s"], entry["prefix_jobs"] / row["rate"])
    page = tmp_path / "warmup.md"
    figures["workloads"]["chat"]["run"] = {key: figures[key] for key in report.RUN_KEYS}
    report.write_page(page, figures)
    text = page.read_text(encoding="utf-8")
    assert "## chat: settled from" in text and "| `slosched` | a quarter of the run |" in text
    assert (tmp_path / report.PLOT).exists() and json.loads((tmp_path / report.RESULTS).read_text())["workloads"]
    # A later run of another workload keeps this one's row, and names the run each came from.
    later = {**figures, "workloads": {"code": {**row, "run": None}}}
    both = report.merged(report.read_results(page), later)
    assert list(both["workloads"]) == ["chat", "code"] and both["workloads"]["chat"]["run"]["mode"] == "quick"
