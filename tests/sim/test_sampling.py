"""Sampled instance time series: read-only (results do not change) and the same whether fast-forwarding."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from slosched.core.records import RunResult
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from slosched.sim.sampling import MAX_SAMPLES, auto_interval_s
from tests.conftest import make_cluster, make_jobs


def _run(fast_forward: bool = True, interval: float | None = None, **instance: object) -> RunResult:
    specs = make_cluster(1, 1, **instance)
    jobs = make_jobs(num_jobs=60, rate=6.0, seed=3, prefix_share=0.3)
    options = SimOptions(fast_forward=fast_forward, slo_scale=4.0, sample_interval_s=interval)
    return simulate(specs, jobs, PolicyPair.parse("least-tokens+chunked-fcfs"), seed=11, options=options)


def test_sampling_does_not_change_results() -> None:
    sampled, plain = _run(interval=0.05), _run(interval=0.0)
    assert plain.series == [] and len(sampled.series) == 2
    assert [dataclasses.astuple(r) for r in sampled.requests] == [dataclasses.astuple(r) for r in plain.requests]
    assert [dataclasses.astuple(j) for j in sampled.jobs] == [dataclasses.astuple(j) for j in plain.jobs]


@pytest.mark.parametrize("kv_blocks", [None, 400])
def test_fast_forward_samples_equal_stepping_samples(kv_blocks: int | None) -> None:
    extra = {} if kv_blocks is None else {"num_kv_blocks": kv_blocks, "max_model_len": 4096}
    fast, slow = _run(True, 0.05, **extra), _run(False, 0.05, **extra)
    for f, s in zip(fast.series, slow.series, strict=True):
        assert f.times_s == s.times_s
        assert f.num_waiting == s.num_waiting and f.num_running == s.num_running
        assert f.kv_used_blocks == s.kv_used_blocks
        assert f.busy_s == pytest.approx(s.busy_s, rel=1e-9, abs=1e-9)


def test_series_are_consistent_with_the_instance_stats() -> None:
    result = _run(interval=0.05)
    for series, stats in zip(result.series, result.instances, strict=True):
        times = np.array(series.times_s)
        assert times[0] == 0.0 and np.allclose(np.diff(times), series.interval_s)
        assert max(series.kv_used_blocks) <= min(stats.peak_kv_blocks_used, series.num_kv_blocks)
        assert max(series.kv_used_blocks) > 0 and max(series.num_running) > 0
        busy = np.array(series.busy_s)
        assert np.all(np.diff(busy) >= -1e-9) and np.all(np.diff(busy) <= np.diff(times) + 1e-9)
        assert busy[-1] <= stats.busy_s + 1e-9


def test_long_runs_keep_a_bounded_uniform_grid() -> None:
    result = _run(interval=0.001)  # far more ticks than MAX_SAMPLES over this run
    series = result.series[0]
    assert len(series.times_s) < MAX_SAMPLES and series.interval_s > 0.001
    assert np.allclose(np.diff(series.times_s), series.interval_s)
    assert auto_interval_s(0.0) == 0.1 and auto_interval_s(1000.0) == pytest.approx(2.0)
