"""SABER in the plugin without a configured speed model: calibrated from the plugin's own step model."""

from __future__ import annotations

import math
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation
from slosched.perf.linear import LinearStepCoefficients
from slosched.perf.speed_models import UslSpeedModel
from slosched.policies.engine.admission.saber_speed import SaberAdmission
from slosched.policies.engine.ordering.saber_tiers import SaberOrdering
from slosched.vllm_ext.config import build_policy, config_from_mapping
from slosched.vllm_ext.control import write_control
from slosched.vllm_ext.engine import SloschedEngine
from slosched.vllm_ext.saber_speed import DEFAULT_CONTEXT_TOKENS, speed_from_step_model
from tests.vllm_ext.fakes import FakeRequest, FakeScheduler

C0, PER_SEQ, PER_TOKEN, CONTEXT = 0.002, 0.0004, 1e-6, 100  # the "engine": t = C0 + (PER_SEQ + PER_TOKEN*ctx)*L


@pytest.mark.parametrize("coefficients", [(0.011, 6.6e-5, 4.8e-4, 9.3e-8), (0.0, 0.0, 0.003, 0.0), (0.02, 0, 0, 0)])
def test_the_step_model_maps_exactly_onto_a_usl_speed_model(coefficients: tuple[float, ...]) -> None:
    c0, _, per_seq, per_token = coefficients
    model = speed_from_step_model(LinearStepCoefficients.from_array(coefficients), 300)
    assert model.kappa == 0 and 0 <= model.sigma <= 1
    for running in (1, 2, 7, 64):
        step_s = c0 + (per_seq + per_token * 300) * running
        assert math.isclose(model.speed(running), 1 / step_s, rel_tol=1e-12)


def _engine(sched: FakeScheduler, **config: object) -> SloschedEngine:
    return SloschedEngine(sched, config=config_from_mapping(config))


def _observe_decode_steps(engine: SloschedEngine) -> None:
    for index in range(200):
        running = 1 + index % 16
        step_s = C0 + (PER_SEQ + PER_TOKEN * CONTEXT) * running
        engine.predictor.observe(StepObservation(0, 0, running, running * CONTEXT, (step_s,)))


def _step(engine: SloschedEngine, sched: FakeScheduler) -> None:
    context = engine.before_schedule(sched)
    engine.undo(sched, context)
    output = SimpleNamespace(num_scheduled_tokens={}, scheduled_new_reqs=[], total_num_scheduled_tokens=0)
    engine.after_schedule(sched, context, output, 0.0, 0.0)
    engine.after_update(sched, output, time.perf_counter())


def test_saber_without_a_speed_model_calibrates_from_observed_steps() -> None:
    with pytest.raises(ConfigError, match=r"saber\.profile / saber\.speed"):  # the policy alone needs one
        build_policy(config_from_mapping({"preset": "saber"}).policy, _engine(FakeScheduler()).spec, 0)
    sched = FakeScheduler()
    for index in range(4):
        sched.add(FakeRequest(f"r{index}", prompt=60, computed=CONTEXT, output=40), running=True)
    engine = _engine(sched, preset="saber", observe_interval_s=0.01)
    ordering, admission = engine.policy.ordering, engine.policy.admission
    assert isinstance(ordering, SaberOrdering) and isinstance(admission, SaberAdmission)
    assert engine.calibration is not None and engine.calibration.parts == ("ordering", "admission")
    prior = speed_from_step_model(engine.predictor.coefficients, DEFAULT_CONTEXT_TOKENS)
    assert admission.model == prior and ordering.model == prior  # before any step: the step model's prior
    _observe_decode_steps(engine)
    time.sleep(0.02)
    _step(engine, sched)
    alone = C0 + PER_SEQ + PER_TOKEN * CONTEXT
    model = engine.calibration.model
    assert math.isclose(model.lam, 1 / alone, rel_tol=0.02) and math.isclose(
        model.sigma, (alone - C0) / alone, rel_tol=0.05
    )
    for part in (ordering, admission):  # updated in place: the same objects, queue state and RNG kept
        assert part.model == model and part.max_speed == model.speed(1.0)
    exported = engine.snapshot(sched, time.time())["plugin"]["saber_speed"]
    assert exported["lam"] == model.lam and exported["context_tokens"] == CONTEXT and exported["num_refreshes"] == 1


def test_a_configured_speed_model_is_used_as_is() -> None:
    speed = {"kind": "usl", "lam": 330.0, "sigma": 0.006, "kappa": 0.0}
    engine = _engine(FakeScheduler(), preset="saber", params={"speed": speed})
    assert engine.calibration is None and engine.policy.admission.model == UslSpeedModel(330.0, 0.006, 0.0)  # type: ignore[attr-defined]
    engine = _engine(FakeScheduler(), ordering="fcfs", admission="saber")  # composable: only SABER parts
    assert engine.calibration is not None and engine.calibration.parts == ("admission",)
    engine = _engine(FakeScheduler(), ordering="saber", ordering_params={"speed": speed}, admission="saber")
    assert engine.calibration is not None and engine.calibration.parts == ("admission",)
    assert engine.policy.ordering.model == UslSpeedModel(330.0, 0.006, 0.0)  # type: ignore[attr-defined]


def test_switching_to_saber_live_needs_no_speed_model(tmp_path: Path) -> None:
    control = tmp_path / "control.json"
    sched = FakeScheduler()
    engine = _engine(sched, control_file=str(control), control_poll_s=0.001)
    assert engine.calibration is None
    write_control(control, {"preset": "saber", "params": {"window": 3}, "version": 1})
    time.sleep(0.01)
    _step(engine, sched)
    assert engine.policy.name == "saber" and not engine.control_error and engine.calibration is not None
    write_control(control, {"preset": "saber", "params": {"model": "usl"}, "version": 2})  # no profile: rejected
    time.sleep(0.01)
    _step(engine, sched)
    assert "saber.model" in engine.control_error and engine.policy.name == "saber"
