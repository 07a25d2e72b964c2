"""The fidelity pipeline end to end against a real vLLM CPU server: profile, replay, simulate, compare.

Small on purpose (about a minute beside the shared servers' start-up): it proves the pieces work together
on a real engine and that the profiled simulation is in the right range; the benchmark
(``slosched bench fidelity``) measures the error itself.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from slosched.bench.fidelity.runs import simulate_trace
from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.core.request import Outcome
from slosched.devtools.up import ServerAddress
from slosched.fidelity.compare import compare_runs, run_metrics, summarize_cases
from slosched.fidelity.replay import replay
from slosched.fidelity.speed import scaled
from slosched.fidelity.traces import capacity_jobs_per_s, make_trace
from slosched.perf.profile_fit import MeasuredProfile
from slosched.tuning.engine_profile import SweepDesign, profile_endpoint
from slosched.tuning.openai_client import OpenAIClient
from slosched.tuning.saber_profile import ProfileCall

pytestmark = [pytest.mark.vllm, pytest.mark.slow]

# Two repeats: a wave whose tokens reached the client in one burst (the API server packs tokens when the
# machine is loaded) yields no decode observation, and with one repeat the fit once had too few steps left.
DESIGN = SweepDesign(
    prompt_lengths=(16, 256, 1024), concurrencies=(1, 8), output_lengths=(64,), repeats=2, max_batched_tokens=2048
)
# The engine's speed at a moment: four short calls decoding together, three rounds. On this 2-core virtual
# machine a core's speed swings by about 2x for seconds at a time (``devtools.core_speed``; the reference
# moved 0.5-1.65x between profile and replay in five local passes), so each replay is simulated with the
# profile's step costs scaled by the reference's time around that replay over its time around the profile
# (``fidelity.speed.scaled``, as the fidelity bench scales by the plugin's in-engine probe).
# What a speed cannot explain are stalls: in local replays the client sent a wave of arrivals up to 0.3 s
# late and up to seven calls then got every token at once about 0.8 s later (first token = last), putting
# a 1.5-second chat replay at 3.3x and 5.5x the simulated mean latency, and CI's at 3.6x. Stalls only add
# time and do not come back each replay, so each trace is replayed up to three times and passes when a replay
# is in the band; a simulator off by 3x is off in every replay.
# A pass beside a two-worker bench on the same two cores had all three chat replays at 3.0-3.3x the
# simulated mean latency (the API server's own work, which the simulation does not charge, waits for a core
# there); the band leaves room for that, and a simulator off by an order of magnitude still fails.
BAND = 4.0
REFERENCE_CALLS = [ProfileCall(input_tokens=16, output_tokens=32)] * 4


def test_profile_replay_simulate_compare(vllm_servers: list[ServerAddress], tmp_path: Path) -> None:
    # Profile and replay run at different moments on a shared 2-core machine: a burst of other work during
    # one of them (other servers, the test process itself) has put a fresh-clone CI run outside the 3x
    # band twice (real latency 3.9x and 4.9x the simulated one) where the next run passed. A second,
    # freshly profiled attempt tells such a burst from a pipeline that is wrong every time.
    # The same burst can also flatten the profile's timings so far that the fit cannot separate its terms
    # (seen once, with another CPU-heavy command running beside the suite; it passed alone and on rerun).
    misses: list[tuple[str, list[tuple[float, float, float]]]] = []
    for attempt in range(2):
        try:
            misses = _profile_replay_simulate_compare(vllm_servers[0].url, tmp_path / f"attempt-{attempt}")
        except ConfigError as unidentified:
            if attempt == 1:
                raise
            misses = [(f"profile: {unidentified}", [])]
            continue
        if not misses:
            return
    raise AssertionError(f"simulated mean latency outside {BAND}x of the real one, twice: {misses}")


def _profile_replay_simulate_compare(url: str, folder: Path) -> list[tuple[str, list[tuple[float, float, float]]]]:
    """One profile-replay-simulate-compare pass; the traces whose simulated mean latency was outside 3x of the
    real one in each of three replays, with (real, simulated, speed factor) per replay."""
    folder.mkdir(parents=True)
    client = OpenAIClient(url, "tiny")
    before_s = _reference_s(client)
    profile = profile_endpoint(client, DESIGN)
    at_profile_s = statistics.fmean([before_s, _reference_s(client)])
    assert profile.num_gpu_blocks and profile.block_size == 128  # vLLM's CPU KV capacity, from /metrics
    assert profile.request_overhead_s >= 0 and profile.step_model().step_time_s(0, 0, 1, 100) > 0
    model = profile.step_model()
    cases, misses = [], []
    for trace, num_jobs in (("chat", 16), ("relquery", 3)):
        rate = 0.4 * capacity_jobs_per_s(make_trace(trace, 100, 1.0, 0), model)
        jobs = make_trace(trace, num_jobs, rate, seed=1)
        means: list[tuple[float, float, float]] = []
        for replay_index in range(3):
            real, sim, factor = _replay_and_simulate(
                client, jobs, profile, at_profile_s, folder / f"{trace}-{replay_index}"
            )
            assert all(r.outcome is Outcome.COMPLETED for r in real.requests), [r.reason for r in real.requests]
            assert sorted(r.output_tokens for r in real.requests) == sorted(r.output_tokens for r in sim.requests)
            if replay_index == 0:
                cases += compare_runs(trace, "light", real, sim, job_metrics=trace == "relquery")
            means.append((_mean_latency_s(real), _mean_latency_s(sim), factor))
            if means[-1][0] / BAND < means[-1][1] < means[-1][0] * BAND:  # the right range
                break
        else:
            misses.append((trace, means))
    summary = summarize_cases(cases)
    assert math.isfinite(summary["mean_abs_error_pct"]) and math.isfinite(summary["p90_abs_error_pct"])
    return misses


def _replay_and_simulate(
    client: OpenAIClient, jobs: list[JobSpec], profile: MeasuredProfile, at_profile_s: float, stem: Path
) -> tuple[RunResult, RunResult, float]:
    """One replay, and its simulation with the step costs at the speed the reference saw around it."""
    before_s = _reference_s(client)
    real = replay(client.base_url, jobs)
    factor = statistics.fmean([before_s, _reference_s(client)]) / at_profile_s
    return real, simulate_trace(jobs, scaled(profile, factor).save(stem.with_suffix(".json"))), factor


def _mean_latency_s(run: RunResult) -> float:
    return float(run_metrics(run, job_metrics=True)["request_latency_mean_s"])


def _reference_s(client: OpenAIClient) -> float:
    """The median over three rounds of the time the reference calls take together."""
    rounds = [client.run_closed_loop(REFERENCE_CALLS, len(REFERENCE_CALLS)) for _ in range(3)]
    return statistics.median(max(t.finish_s for t in timings) - min(t.start_s for t in timings) for timings in rounds)
