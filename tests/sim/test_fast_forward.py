"""Fast-forwarding runs of decode steps must give bit-identical results to stepping every iteration."""

from __future__ import annotations

import dataclasses

import pytest

from slosched.core.records import RunResult
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from tests.conftest import make_cluster, make_jobs


def _run(policy: str, fast_forward: bool, staleness: float = 0.0, **instance: object) -> RunResult:
    specs = make_cluster(1, 1, **instance)
    jobs = make_jobs(num_jobs=60, rate=6.0, seed=3, prefix_share=0.3)
    options = SimOptions(noise_sigma=0.05, fast_forward=fast_forward, view_staleness_s=staleness, slo_scale=4.0)
    return simulate(specs, jobs, PolicyPair.parse(policy), seed=11, options=options)


def _assert_identical(fast: RunResult, slow: RunResult) -> None:
    assert [dataclasses.astuple(r) for r in fast.requests] == [dataclasses.astuple(r) for r in slow.requests]
    assert [dataclasses.astuple(j) for j in fast.jobs] == [dataclasses.astuple(j) for j in slow.jobs]
    for fast_stats, slow_stats in zip(fast.instances, slow.instances, strict=True):
        assert fast_stats.num_steps == slow_stats.num_steps
        assert fast_stats.num_preemptions == slow_stats.num_preemptions
        assert fast_stats.prefix_hit_tokens == slow_stats.prefix_hit_tokens
        assert fast_stats.peak_kv_blocks_used == slow_stats.peak_kv_blocks_used
        assert fast_stats.busy_s == pytest.approx(slow_stats.busy_s, rel=1e-9)


@pytest.mark.parametrize(
    "policy",
    ["round-robin+fcfs", "least-tokens+chunked-fcfs", "least-loaded+static-priority", "random+chunked-fcfs"],
)
def test_fast_forward_matches_stepping(policy: str) -> None:
    fast = _run(policy, fast_forward=True)
    slow = _run(policy, fast_forward=False)
    _assert_identical(fast, slow)
    assert fast.num_events < slow.num_events  # and it actually skipped work


def test_fast_forward_matches_stepping_under_kv_pressure_and_stale_views() -> None:
    # A tiny KV cache forces preemptions inside would-be runs; stale views exercise lazy snapshots.
    fast = _run("least-tokens+chunked-fcfs", True, staleness=0.5, num_kv_blocks=400, max_model_len=4096)
    slow = _run("least-tokens+chunked-fcfs", False, staleness=0.5, num_kv_blocks=400, max_model_len=4096)
    assert sum(stats.num_preemptions for stats in fast.instances) > 0
    _assert_identical(fast, slow)
