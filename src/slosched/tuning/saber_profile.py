"""SABER's profiling phase: measure per-request speed against concurrency and fit ``f(L)``.

The profiler drives a :class:`ProfileClient` (anything that can run a list of calls with at most N in
flight and report each call's timing): :class:`SimulatorClient` runs them on a simulated instance now,
:class:`slosched.tuning.openai_client.OpenAIClient` on a live OpenAI-compatible endpoint (vLLM) later;
the code path after the client is the same. For each concurrency level the client runs a closed loop of
calls drawn from a mixed workload; every finished call gives one sample:

* concurrency = the time-averaged number of calls in flight while it generated (first token -> finish),
* speed = (output tokens - 1) / (finish - first token), tokens per second.

About 1,000 samples are fitted with every form of :mod:`slosched.perf.speed_models` (USL, linear,
logistic) into a :class:`SpeedProfile` that the ``saber`` engine preset loads.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, JobSpec, single_job
from slosched.core.request import Outcome
from slosched.perf.speed_models import SPEED_MODEL_KINDS, SpeedProfile, SpeedSample, fit_profile
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.workloads.generators import make_workload

DEFAULT_LEVELS = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 80, 100)


@dataclass(slots=True, frozen=True)
class ProfileCall:
    """One call to send: prompt length and the number of tokens to generate (the client forces it)."""

    input_tokens: int
    output_tokens: int


@dataclass(slots=True, frozen=True)
class CallTiming:
    """When a call was sent, produced its first token and finished (seconds on one clock)."""

    start_s: float
    first_token_s: float
    finish_s: float
    output_tokens: int


class ProfileClient(Protocol):
    def run_closed_loop(self, calls: Sequence[ProfileCall], concurrency: int) -> list[CallTiming]:
        """Run every call, keeping at most ``concurrency`` in flight; one timing per finished call."""
        ...


def samples_from_timings(timings: Sequence[CallTiming]) -> list[SpeedSample]:
    """One sample per call with >= 2 output tokens and a positive generation time."""
    if not timings:
        return []
    starts = np.array([t.start_s for t in timings])
    finishes = np.array([t.finish_s for t in timings])
    samples: list[SpeedSample] = []
    for timing in timings:
        duration = timing.finish_s - timing.first_token_s
        if timing.output_tokens < 2 or duration <= 0:
            continue
        overlap = np.minimum(finishes, timing.finish_s) - np.maximum(starts, timing.first_token_s)
        concurrency = float(np.clip(overlap, 0.0, None).sum()) / duration
        speed = (timing.output_tokens - 1) / duration
        samples.append(SpeedSample(max(concurrency, 1.0), speed))
    return samples


def profile_calls(workload: str, count: int, seed: int) -> list[ProfileCall]:
    """``count`` calls with the prompt/output lengths of a workload generator (e.g. ``code-w3``)."""
    jobs = make_workload(workload, {"process": "poisson", "rate": 1.0}, count, {"slo": "none"}, seed)
    return [ProfileCall(c.input_tokens, c.output_tokens) for job in jobs for s in job.stages for c in s.calls]


@dataclass(slots=True)
class SimulatorClient:
    """Runs calls on one simulated instance. A closed loop of N is the engine capped at N running
    requests with everything submitted at once (the queue sits in the engine instead of the client);
    a call's start is when it was admitted, as a client holding N in flight would send it then."""

    instance: InstanceSpec
    seed: int = 0
    noise_sigma: float = 0.05

    def run_closed_loop(self, calls: Sequence[ProfileCall], concurrency: int) -> list[CallTiming]:
        if concurrency < 1:
            raise ConfigError("concurrency", f"must be >= 1, got {concurrency}")
        jobs: list[JobSpec] = [
            single_job(f"p{i}", 0.0, CallSpec(c.input_tokens, c.output_tokens, c.output_tokens), template="profile")
            for i, c in enumerate(calls)
        ]
        params = PolicyParams(engine={"static-concurrency": {"cap": concurrency}})
        pair = PolicyPair("round-robin", "static-concurrency")
        options = SimOptions(noise_sigma=self.noise_sigma)
        result = simulate(
            [replace(self.instance, max_running=max(concurrency, 1))], jobs, pair, self.seed, options, params
        )
        return [
            CallTiming(r.first_scheduled_s, r.first_token_s, r.finish_s, r.output_tokens)
            for r in result.requests
            if r.outcome is Outcome.COMPLETED
        ]


def collect_samples(
    client: ProfileClient,
    calls: Sequence[ProfileCall],
    levels: Sequence[int] = DEFAULT_LEVELS,
    target_samples: int = 1000,
) -> list[SpeedSample]:
    """Run each concurrency level on its own slice of ``calls`` (about ``target_samples`` in total; each
    level gets at least twice its concurrency so the loop reaches steady state)."""
    if not levels:
        raise ConfigError("levels", "need at least one concurrency level")
    per_level = [max(target_samples // len(levels), 2 * level) for level in levels]
    if sum(per_level) > len(calls):
        raise ConfigError("calls", f"need {sum(per_level)} calls for these levels, got {len(calls)}")
    samples: list[SpeedSample] = []
    offset = 0
    for level, count in zip(levels, per_level, strict=True):
        samples += samples_from_timings(client.run_closed_loop(calls[offset : offset + count], level))
        offset += count
    return samples


def profile_speed(
    client: ProfileClient,
    calls: Sequence[ProfileCall],
    levels: Sequence[int] = DEFAULT_LEVELS,
    target_samples: int = 1000,
    kinds: Sequence[str] = SPEED_MODEL_KINDS,
    meta: dict[str, object] | None = None,
) -> SpeedProfile:
    """The whole profiling phase: collect samples, fit every form."""
    samples = collect_samples(client, calls, levels, target_samples)
    info: dict[str, object] = {"levels": list(levels), **(meta or {})}
    return fit_profile(samples, kinds, info)


def profile_instance(
    instance: InstanceSpec, workload: str = "code-w3", seed: int = 0, target_samples: int = 1000
) -> SpeedProfile:
    """Profile a simulated instance with a mixed workload (the bench's and the CLI's entry point)."""
    levels = DEFAULT_LEVELS
    needed = sum(max(target_samples // len(levels), 2 * level) for level in levels)
    calls = profile_calls(workload, needed, seed)
    meta: dict[str, object] = {
        "client": "simulator",
        "gpu": instance.gpu,
        "model": instance.model,
        "workload": workload,
    }
    return profile_speed(SimulatorClient(instance, seed), calls, levels, target_samples, meta=meta)
