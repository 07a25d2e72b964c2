"""``bench.sim_speed`` (fast pieces only: the full run simulates 10k+ requests): the benchmark's fixed
setup and the results page it writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.bench.sim_speed import LOAD, POLICY, _write_results
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
