"""The fidelity pipeline end to end against a real vLLM CPU server: profile, replay, simulate, compare.

Small on purpose (about a minute beside the shared servers' start-up): it proves the pieces work together
on a real engine and that the profiled simulation is in the right range; the benchmark
(``slosched bench fidelity``) measures the error itself.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from slosched.bench.fidelity.runs import simulate_trace
from slosched.core.errors import ConfigError
from slosched.core.request import Outcome
from slosched.devtools.up import ServerAddress
from slosched.fidelity.compare import compare_runs, run_metrics, summarize_cases
from slosched.fidelity.replay import replay
from slosched.fidelity.traces import capacity_jobs_per_s, make_trace
from slosched.tuning.engine_profile import SweepDesign, profile_endpoint
from slosched.tuning.openai_client import OpenAIClient

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# Two repeats: a wave whose tokens reached the client in one burst (the API server packs tokens when the
# machine is loaded) yields no decode observation, and with one repeat the fit once had too few steps left.
DESIGN = SweepDesign(
    prompt_lengths=(16, 256, 1024), concurrencies=(1, 8), output_lengths=(64,), repeats=2, max_batched_tokens=2048
)


def test_profile_replay_simulate_compare(vllm_servers: list[ServerAddress], tmp_path: Path) -> None:
    # Profile and replay run at different moments on a shared 2-core machine: a burst of other work during
    # one of them (other servers, the test process itself) has put a fresh-clone CI run outside the 3x
    # band twice (real latency 3.9x and 4.9x the simulated one) where the next run passed. A second,
    # freshly profiled attempt tells such a burst from a pipeline that is wrong every time.
    # The same burst can also flatten the profile's timings so far that the fit cannot separate its terms
    # (seen once, with another CPU-heavy command running beside the suite; it passed alone and on rerun).
    misses: list[tuple[str, float, float]] = []
    for attempt in range(2):
        try:
            misses = _profile_replay_simulate_compare(vllm_servers[0].url, tmp_path / f"attempt-{attempt}")
        except ConfigError as unidentified:
            if attempt == 1:
                raise
            misses = [(f"profile: {unidentified}", math.nan, math.nan)]
            continue
        if not misses:
            return
    raise AssertionError(f"simulated mean latency outside 3x of the real one, twice: {misses}")


def _profile_replay_simulate_compare(url: str, folder: Path) -> list[tuple[str, float, float]]:
    """One profile-replay-simulate-compare pass; the traces whose simulated mean latency is outside 3x."""
    folder.mkdir(parents=True)
    profile = profile_endpoint(OpenAIClient(url, "tiny"), DESIGN)
    assert profile.num_gpu_blocks and profile.block_size == 128  # vLLM's CPU KV capacity, from /metrics
    assert profile.request_overhead_s >= 0 and profile.step_model().step_time_s(0, 0, 1, 100) > 0
    path = profile.save(folder / "profile.json")
    model = profile.step_model()
    cases, misses = [], []
    for trace, num_jobs in (("chat", 16), ("relquery", 3)):
        rate = 0.4 * capacity_jobs_per_s(make_trace(trace, 100, 1.0, 0), model)
        jobs = make_trace(trace, num_jobs, rate, seed=1)
        real = replay(url, jobs)
        sim = simulate_trace(jobs, path)
        assert all(r.outcome is Outcome.COMPLETED for r in real.requests), [r.reason for r in real.requests]
        assert sorted(r.output_tokens for r in real.requests) == sorted(r.output_tokens for r in sim.requests)
        real_mean = run_metrics(real, job_metrics=True)["request_latency_mean_s"]
        sim_mean = run_metrics(sim, job_metrics=True)["request_latency_mean_s"]
        if not real_mean / 3 < sim_mean < real_mean * 3:  # the right range
            misses.append((trace, real_mean, sim_mean))
        cases += compare_runs(trace, "light", real, sim, job_metrics=trace == "relquery")
    summary = summarize_cases(cases)
    assert math.isfinite(summary["mean_abs_error_pct"]) and math.isfinite(summary["p90_abs_error_pct"])
    return misses
