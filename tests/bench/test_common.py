"""``bench.common``: the demo cluster, saturation throughput on a tiny burst, best-of runs and the printed
figures table."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slosched.evaluation.throughput import best_of, demo_cluster, print_figures, saturation_throughput
from tests.conftest import make_jobs


def test_demo_cluster() -> None:
    cluster = demo_cluster()
    assert [(spec.name, spec.gpu) for spec in cluster] == [
        ("a100-0", "A100-80G"), ("a100-1", "A100-80G"), ("a6000-0", "A6000"), ("a6000-1", "A6000"),
    ]  # fmt: skip
    assert {(spec.model, spec.max_running, spec.max_batched_tokens) for spec in cluster} == {("Llama-3-8B", 256, 2048)}


def test_saturation_throughput_queues_everything_at_once() -> None:
    jobs = make_jobs(num_jobs=60, mean_in=300, mean_out=40)
    cluster = demo_cluster()
    rate = saturation_throughput(cluster, jobs, "least-loaded+chunked-fcfs")
    assert math.isfinite(rate) and rate > 0
    assert rate == saturation_throughput(cluster, jobs, "least-loaded+chunked-fcfs")
    # A burst: the jobs' own arrival times do not matter.
    later = [replace(job, arrival_s=job.arrival_s * 10 + 5) for job in jobs]
    assert saturation_throughput(cluster, later, "least-loaded+chunked-fcfs") == rate


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


def test_print_figures_goes_to_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    print_figures("demo", {"rate": 1234.5678, "identical": True, "count": 7})
    out, err = capsys.readouterr()
    assert out == ""
    assert "demo" in err and "1,234.568" in err and "True" in err and "7" in err
