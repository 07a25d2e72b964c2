"""``bench.fidelity.calibration``: step costs from the engine's own steps, the front end from the sweeps,
and calibration traces that are never a compared case."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slosched.bench.fidelity.calibration import Segment, StepTimings, calibration_traces, engine_profile
from slosched.bench.fidelity.runs import DESIGN, plan_cases
from slosched.core.views import StepObservation
from slosched.fidelity.traces import TRACES
from slosched.perf.profile_fit import MeasuredProfile, fit_mean_profile
from slosched.tuning.engine_profile import SweepResult
from slosched.tuning.openai_client import OpenAIClient

PROFILE = Path(__file__).parents[1] / "fidelity" / "data" / "profile.json"


def _engine_steps(scale: float) -> list[StepObservation]:
    """Steps of an engine costing ``scale`` x (4 ms + 40 us per prefill token + 0.1 ms per sequence + 0.1 us
    per cached token)."""
    steps = []
    shapes = [(prefill, 0, 0) for prefill in (64, 256, 512, 1024, 1536)]
    shapes += [(0, 2, 300), (0, 8, 4000), (0, 32, 9000), (1024, 4, 2000), (64, 16, 6000)]
    for prefill, decodes, context in shapes:
        cost = 0.004 + 4e-5 * prefill + 1e-9 * prefill * (prefill + 1) / 2 + 1e-4 * decodes + 1e-7 * context
        steps.append(StepObservation(prefill, 0, decodes, context, (scale * cost,)))
    return steps


def test_step_costs_come_from_the_engine_and_the_front_end_from_the_sweeps() -> None:
    sweep_steps = _engine_steps(0.5)  # a client-side sweep that saw steps twice as fast
    sweep = SweepResult(sweep_steps, (700, 128), request_overhead_s=0.006, token_overhead_s=0.0001)
    engine = _engine_steps(1.0)
    measured = Segment([(float(index), step) for index, step in enumerate(engine)], [])
    calibrated = engine_profile([sweep, sweep], measured, OpenAIClient("http://engine", "tiny"), DESIGN)
    profile = calibrated.profile
    assert calibrated.speed.slope == 0.0  # no probes: no speed correction
    step = (1024, 0, 4, 2000)
    assert profile.step_model().step_time_s(*step) == pytest.approx(
        fit_mean_profile(engine).step_model().step_time_s(*step)
    )
    assert (profile.request_overhead_s, profile.token_overhead_s) == pytest.approx((0.006, 0.0001))
    assert (profile.num_gpu_blocks, profile.block_size) == (700, 128)
    assert profile.source["engine_steps"] == len(engine) and profile.source["sweeps"] == 2


def test_calibration_traces_are_other_jobs_than_the_compared_cases() -> None:
    profile = MeasuredProfile.load(PROFILE)
    first, again = calibration_traces(profile, 5.0, 0), calibration_traces(profile, 5.0, 0)
    assert [[job.stages for job in jobs] for jobs in first] == [[job.stages for job in jobs] for jobs in again]
    assert len(first) == len(TRACES) and all(jobs for jobs in first)
    second_round = calibration_traces(profile, 5.0, 1)
    assert [job.stages for job in first[0]] != [job.stages for job in second_round[0]]
    # Other seeds: single calls may meet by chance (two chat calls of the same lengths), whole traces do not.
    compared = [job.stages for _, _, jobs in plan_cases(profile, quick=True) for job in jobs]
    calibration = {job.stages for jobs in first + second_round for job in jobs}
    assert sum(stages in calibration for stages in compared) < 0.05 * len(compared)


def test_step_timings_are_read_once_each(tmp_path: Path) -> None:
    timings = StepTimings(tmp_path / "timings.jsonl")
    assert timings.segment() == Segment()  # no file yet: the engine has run no step
    line = {"pending": 0, "done_s": 1.0, "model_s": 0.01, "prefill_tokens": 8, "prefill_context": 0}
    line |= {"decode_seqs": 0, "decode_context": 0}
    timings.path.write_text(json.dumps(line) + "\n" + json.dumps({"probe_s": 0.0004, "done_s": 1.001}) + "\n")
    first = timings.segment()
    assert [done for done, _ in first.steps] == [1.0] and first.probes == [(1.001, 0.0004)]
    assert timings.segment() == Segment()
    with timings.path.open("a") as handle:
        handle.write(json.dumps(line | {"done_s": 2.0}) + "\n")
    timings.skip()
    assert timings.segment() == Segment()
