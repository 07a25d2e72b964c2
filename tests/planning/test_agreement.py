"""One answer per question: `sweep`'s SLO capacity of a policy is a rate `compare` shows carried, and a rate
just above it is not (issue 26, item 4). Both build their runs in `planning/workload.py`: the same jobs for
the same seed, the same warm-up prefix and the same deadlines, judged the same way."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

DEMO = Path(__file__).resolve().parents[2] / "examples" / "demo.yaml"
POLICY = "predicted-latency+chunked-fcfs"
ABOVE = 1.3  # x the capacity: no longer carried (up to noise; the current engine's attainment falls gently near it)
NOISE = 0.02


def _cli(*args: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "slosched.cli", *args, "--json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return document


def _compare(seed: int, num_jobs: int, rate: float) -> tuple[float, float, float]:
    sets = ["--set", f"workload.num_jobs={num_jobs}", "--set", f"workload.arrival.rate={rate!r}"]
    figures = _cli("compare", str(DEMO), "--policies", POLICY, "--seed", str(seed), *sets)
    assert figures["num_jobs"] == num_jobs and figures["seed"] == seed
    policy = figures["policies"][POLICY]
    return policy["slo_attainment"], policy["attainment_second_half"], policy["attainment_judged"]


def test_sweep_capacity_is_carried_in_compare_and_a_rate_above_it_is_not() -> None:
    document = _cli("sweep", str(DEMO), "--quick", "--policies", POLICY, "--workers", "1")
    (row,) = document["rows"]
    for seed, (capacity, num_jobs) in enumerate(
        zip(row["capacity_rps"]["0.90"]["values"], row["num_jobs"], strict=True)
    ):
        whole, late, judged = _compare(seed, num_jobs, capacity)
        assert whole >= 0.90 and judged >= 0.90  # the capacity is carried: both judgements pass
        at_capacity = row["attainment_at_capacity"]
        assert [whole, late, judged] == pytest.approx(
            [at_capacity["all"][seed], at_capacity["second_half"][seed], at_capacity["judged"][seed]]
        )  # the very run the sweep measured
        *_, judged = _compare(seed, num_jobs, ABOVE * capacity)
        assert judged < 0.90 + NOISE  # just above it: not carried, up to noise
