"""``bench.sim_speed`` (fast pieces only: the full run simulates 10k+ requests): the benchmark's fixed
setup (the demo cluster), best-of timing and the results page it writes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from slosched.bench.sim_speed import LOAD, POLICY, _write_results, best_of, demo_cluster
from slosched.sim.runner import PolicyPair


def test_the_measured_setup() -> None:
    assert PolicyPair.parse(POLICY).name == "least-loaded+chunked-fcfs"
    assert 0 < LOAD < 1


def test_results_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _write_results({"requests_per_second": 12345.678, "identical": True, "num_requests": 10})
    text = (tmp_path / "docs/results/sim-speed.md").read_text()
    assert text.startswith("# Simulator speed (`slosched bench sim-speed`)\n")
    assert text.endswith("\n")
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert rows == [
        "| figure | value |",
        "| requests_per_second | 12,345.678 |",
        "| identical | True |",
        "| num_requests | 10 |",
    ]


def test_demo_cluster() -> None:
    cluster = demo_cluster()
    assert [(spec.name, spec.gpu) for spec in cluster] == [
        ("a100-0", "A100-80G"),
        ("a100-1", "A100-80G"),
        ("a6000-0", "A6000"),
        ("a6000-1", "A6000"),
    ]
    assert {(spec.model, spec.max_running, spec.max_batched_tokens) for spec in cluster} == {("Llama-3-8B", 256, 2048)}


def test_best_of_runs_repeats_times_and_keeps_the_last_result() -> None:
    calls: list[int] = []

    def run() -> int:
        calls.append(len(calls))
        return len(calls)

    best, result = best_of(3, run)
    assert calls == [0, 1, 2] and result == 3
    assert 0.0 <= best < math.inf
    with pytest.raises(AssertionError):
        best_of(0, run)
