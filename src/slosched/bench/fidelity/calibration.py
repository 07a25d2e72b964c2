"""The simulated engine of ``bench fidelity``: step costs from the real engine's own measured steps.

The server runs vLLM's stock scheduler with slosched's plugin in ``bypass`` mode, which only measures: every
completed step goes to a step timing file (``fidelity.step_log`` turns it into steps, each lasting the
engine's whole period). The profiling sweep measures the front end (per-request and per-token costs, the
constant latency of a request) from the client, as ``slosched profile`` does, and its waves run steps of
every prefill length and decode width alone. Real traffic also runs steps no sweep wave does: long prefill
chunks beside dozens of decodes, new requests taken in between steps. Measured against the client-side
sweep, the code trace's engine really stepped every 43 ms where the sweep's fit predicted 10 ms (heavy
load, ``vllm:inter_token_latency_seconds``), while chat matched (6.9 vs 6.8 ms). So each round also
replays a calibration mix, every trace at ``CALIBRATION_LOAD`` of the estimated capacity on its own seed
(other jobs than any compared case), and the step costs are fitted to every step the engine ran in the
rounds' sweeps and calibration replays. The compared replays never feed the fit.

The plugin also times a speed probe between steps (``perf.speed_probe``): the calibration steps are
brought to the calibration's median core speed before the fit, and each compared replay is simulated at
the speed its own probes saw (``fidelity.speed``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from slosched.core.job import JobSpec
from slosched.fidelity.speed import Probe, SpeedModel, TimedStep, at_reference_speed, fit_speed_model
from slosched.fidelity.step_log import read_lines, speed_probes, timed_steps
from slosched.fidelity.traces import TRACES, capacity_jobs_per_s, make_trace
from slosched.perf.profile_fit import MeasuredProfile, fit_mean_profile
from slosched.tuning.engine_profile import SweepDesign, SweepResult, fit_sweeps
from slosched.tuning.openai_client import OpenAIClient

CALIBRATION_LOAD = 0.6  # between the compared medium and heavy loads
CALIBRATION_SEED = 1_000  # far from the compared cases' seeds


@dataclass(slots=True)
class Segment:
    """What the engine wrote in one stretch: its steps and speed probes, each with when it ended."""

    steps: list[TimedStep] = field(default_factory=list)
    probes: list[Probe] = field(default_factory=list)

    def extend(self, other: Segment) -> None:
        self.steps += other.steps
        self.probes += other.probes


@dataclass(slots=True)
class StepTimings:
    """The plugin's step timing file, read in segments: ``segment()`` returns what was written since the
    last call (or ``skip()`` drops it)."""

    path: Path
    offset: int = 0

    def segment(self) -> Segment:
        if not self.path.exists():
            return Segment()
        records, self.offset = read_lines(self.path, self.offset)
        return Segment(timed_steps(records), speed_probes(records))

    def skip(self) -> None:
        self.segment()


@dataclass(slots=True, frozen=True)
class CalibratedEngine:
    """The engine's step costs at the calibration's median core speed, and how they move with the speed."""

    profile: MeasuredProfile
    speed: SpeedModel


def calibration_traces(profile: MeasuredProfile, duration_s: float, round_index: int) -> list[list[JobSpec]]:
    """One trace per shape at ``CALIBRATION_LOAD`` of its estimated capacity, about ``duration_s`` of
    arrivals, on seeds of their own (another set each round)."""
    model = profile.step_model()
    traces = []
    for index, name in enumerate(TRACES):
        seed = CALIBRATION_SEED + 10 * round_index + index
        rate = CALIBRATION_LOAD * capacity_jobs_per_s(make_trace(name, 200, 1.0, seed), model)
        traces.append(make_trace(name, max(4, math.ceil(rate * duration_s)), rate, seed))
    return traces


def engine_profile(
    sweeps: Sequence[SweepResult], measured: Segment, client: OpenAIClient, design: SweepDesign
) -> CalibratedEngine:
    """Step costs fitted to the engine's ``measured`` steps (``fit_mean_profile``: their predictions add up
    to the time the steps took), first as measured, then at the reference speed of the speed model fitted
    against the first fit (``fidelity.speed``); the front end (request and token costs, the request's
    constant latency, the KV capacity) from the client-side fit of ``sweeps``."""
    front = fit_sweeps(sweeps, client, design)
    as_measured = fit_mean_profile([observation for _, observation in measured.steps])
    speed = fit_speed_model(measured.steps, measured.probes, as_measured)
    fitted = fit_mean_profile(
        at_reference_speed(measured.steps, measured.probes, speed),
        num_gpu_blocks=front.num_gpu_blocks,
        block_size=front.block_size,
    )
    source = {**front.source, "steps": "engine step timings (plugin, bypass)", "engine_steps": len(measured.steps)}
    profile = replace(
        fitted,
        source=source,
        request_overhead_s=front.request_overhead_s,
        request_latency_s=front.request_latency_s,
        token_overhead_s=front.token_overhead_s,
    )
    return CalibratedEngine(profile, speed)
