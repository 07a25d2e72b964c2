"""A profiled instance's front end: a serial admission queue plus a constant latency before the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, single_job
from slosched.perf.profile_fit import MeasuredProfile
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate

STEPS = (0.002, 1e-5, 0.0, 1e-4, 1e-8)


def _run(tmp_path: Path, overhead: float, latency: float) -> list[float]:
    profile = MeasuredProfile(STEPS, STEPS, STEPS, 100, 0.01, num_gpu_blocks=1000, block_size=16,
                              request_overhead_s=overhead, request_latency_s=latency)  # fmt: skip
    path = profile.save(tmp_path / f"p-{overhead}-{latency}.json")
    spec = InstanceSpec(name="e", gpu="A100-80G", model="Llama-3-8B", profile=str(path))
    jobs = [single_job(f"j{i}", 0.0, CallSpec(64, 4)) for i in range(6)]  # a burst: all at time 0
    result = simulate([spec], jobs, PolicyPair.parse("round-robin+chunked-fcfs"), 0, SimOptions(noise_sigma=0.0))
    return sorted(record.first_scheduled_s for record in result.requests)


def test_a_burst_reaches_the_engine_one_admission_cost_apart(tmp_path: Path) -> None:
    starts = _run(tmp_path, overhead=0.01, latency=0.004)
    for index, start in enumerate(starts):
        assert start >= 0.004 + 0.01 * (index + 1) - 1e-12  # never before its admission + latency
    assert starts[0] == pytest.approx(0.014)
    assert starts[-1] < 0.004 + 0.01 * 6 + 0.01  # and not much later: the engine keeps up


def test_without_a_front_end_the_burst_starts_at_once(tmp_path: Path) -> None:
    assert _run(tmp_path, overhead=0.0, latency=0.0)[0] == 0.0
