"""A profiled instance's front end: a serial admission queue plus a constant latency before the engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, JobSpec, single_job
from slosched.perf.profile_fit import MeasuredProfile
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate

STEPS = (0.002, 1e-5, 0.0, 1e-4, 1e-8)


def _spec(tmp_path: Path, overhead: float, latency: float, per_token: float = 0.0) -> InstanceSpec:
    front = {"request_overhead_s": overhead, "request_latency_s": latency, "token_overhead_s": per_token}
    profile = MeasuredProfile(STEPS, STEPS, STEPS, 100, 0.01, num_gpu_blocks=1000, block_size=16, **front)
    path = profile.save(tmp_path / f"p-{overhead}-{latency}-{per_token}.json")
    return InstanceSpec(name="e", gpu="A100-80G", model="Llama-3-8B", profile=str(path))


def _starts(spec: InstanceSpec, jobs: list[JobSpec]) -> dict[str, float]:
    result = simulate([spec], jobs, PolicyPair.parse("round-robin+chunked-fcfs"), 0, SimOptions(noise_sigma=0.0))
    return {record.job_id: record.first_scheduled_s for record in result.requests}


def _run(tmp_path: Path, overhead: float, latency: float) -> list[float]:
    jobs = [single_job(f"j{i}", 0.0, CallSpec(64, 4)) for i in range(6)]  # a burst: all at time 0
    return sorted(_starts(_spec(tmp_path, overhead, latency), jobs).values())


def test_a_burst_reaches_the_engine_one_admission_cost_apart(tmp_path: Path) -> None:
    starts = _run(tmp_path, overhead=0.01, latency=0.004)
    for index, start in enumerate(starts):
        assert start >= 0.004 + 0.01 * (index + 1) - 1e-12  # never before its admission + latency
    assert starts[0] == pytest.approx(0.014)
    assert starts[-1] < 0.004 + 0.01 * 6 + 0.01  # and not much later: the engine keeps up


def test_without_a_front_end_the_burst_starts_at_once(tmp_path: Path) -> None:
    assert _run(tmp_path, overhead=0.0, latency=0.0)[0] == 0.0


def test_streaming_tokens_slow_the_front_end_down(tmp_path: Path) -> None:
    """While 16 requests decode, a late arrival's admission is stretched by the front end's token work."""
    jobs = [single_job(f"long{i}", 0.0, CallSpec(32, 400)) for i in range(16)]
    jobs.append(single_job("late", 0.5, CallSpec(32, 4)))
    idle = _starts(_spec(tmp_path, 0.01, 0.0), jobs)["late"]
    loaded = _starts(_spec(tmp_path, 0.01, 0.0, per_token=2e-4), jobs)["late"]
    # 16 sequences per ~3.6 ms step stream ~4,400 tokens/s: with 0.2 ms each the front end is ~0.9 busy.
    assert idle == pytest.approx(0.51, abs=0.005)
    assert loaded > idle + 0.05
