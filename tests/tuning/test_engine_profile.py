"""The profiling sweep end to end against the in-process stub OpenAI server (small, ~1 s)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation
from slosched.devtools.stub import StubBackend, StubBehaviour, serve_app
from slosched.perf.profile_fit import MeasuredProfile, fit_profile
from slosched.tuning import frontend_probe
from slosched.tuning.engine_profile import (
    ADMISSION_WIDTHS,
    SweepDesign,
    SweepResult,
    fit_request_overhead_s,
    fit_sweeps,
    run_sweep,
)
from slosched.tuning.frontend_probe import (
    BACKGROUND_STREAMS,
    PROBE_WIDTH,
    token_cost_s,
    tokens_between,
)
from slosched.tuning.openai_client import OpenAIClient

DELAY_S = 0.02


def test_sweep_against_the_stub_measures_its_token_delay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The background streams need only outlast the loaded bursts: 100 tokens (2 s at the stub's pace) rather than
    # the 400 a real engine gets (their 12,800 events through one event loop took most of this test's 98 s).
    background_call = (frontend_probe.BACKGROUND_CALL[0], 100)
    monkeypatch.setattr(frontend_probe, "BACKGROUND_CALL", background_call)
    stub = StubBackend(behaviour=StubBehaviour(token_delay_s=DELAY_S))
    design = SweepDesign(prompt_lengths=(8, 32, 96), concurrencies=(1, 2), output_lengths=(5,))
    seen: list[tuple[int, int, int]] = []

    async def sweep():  # type: ignore[no-untyped-def]
        async with serve_app(stub.app()) as url:
            return await run_sweep(OpenAIClient(url, "tiny"), design, lambda *point: seen.append(point))

    sweep_result = asyncio.run(sweep())
    observations, capacity = sweep_result.observations, sweep_result.capacity
    assert seen == design.points()
    assert capacity == (None, None)  # the stub's /metrics has no cache_config_info
    # First the admission bursts (one-token requests), then every wave: k streamed requests forcing
    # exactly 5 tokens with ignore_eos, each prompt a token-id list of the wave's length.
    bursts = [body for _, body in stub.received if body["max_tokens"] == 1]
    waves = [body for _, body in stub.received if body["max_tokens"] == 5]
    # (and three bursts of PROBE_WIDTH while BACKGROUND_STREAMS long streams decode: the per-token cost)
    assert len(bursts) == 3 * sum(ADMISSION_WIDTHS) + 3 * PROBE_WIDTH
    background = [body for _, body in stub.received if body["max_tokens"] == background_call[1]]
    assert len(background) == BACKGROUND_STREAMS and len(waves) == sum(k for _, k, _ in design.points())
    assert all(body["ignore_eos"] and body["stream"] for body in waves)
    assert sorted(len(body["prompt"]) for body in waves) == sorted(p for p, k, _ in design.points() for _ in range(k))
    # The stub answers instantly: its front end costs (almost) nothing per request.
    assert 0.0 <= sweep_result.request_overhead_s < DELAY_S and sweep_result.token_overhead_s >= 0.0
    prefill = [obs for obs in observations if obs.num_prefill_tokens > 0]
    decode = [obs for obs in observations if obs.num_decode_seqs > 0]
    assert sorted(obs.num_prefill_tokens for obs in prefill) == sorted(p for p, k, _ in design.points() if k == 1)
    assert len(decode) == len(design.points()) and all(len(obs.durations_s) == 1 for obs in decode)  # mean step
    # The stub sleeps DELAY_S before each token: every decode step is about that long; a prefill row is the
    # TTFT less the measured front-end cost (here the in-process client and stub share one event loop).
    for obs in decode:
        assert DELAY_S * 0.8 < obs.durations_s[0] < DELAY_S * 5
    for obs in prefill:
        assert 0 < obs.durations_s[0] < DELAY_S * 5
    profile = fit_profile(observations)
    model = MeasuredProfile.load(profile.save(tmp_path / "stub.json")).step_model()
    assert model.step_time_s(0, 0, 1, 50) == pytest.approx(DELAY_S, rel=0.5)
    assert model.step_time_s(64, 0, 0, 0) == pytest.approx(DELAY_S, rel=0.5)


def test_design_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="output_lengths"):
        SweepDesign(output_lengths=(1,))
    with pytest.raises(ConfigError, match="concurrencies"):
        SweepDesign(concurrencies=())


def test_request_overhead_is_the_slope_of_burst_time_over_width() -> None:
    samples = [(1, 0.011), (8, 0.046), (32, 0.166), (1, 0.010), (8, 0.045), (32, 0.165)]
    assert fit_request_overhead_s(samples) == pytest.approx(0.005, rel=0.01)
    assert fit_request_overhead_s([(1, 0.02), (8, 0.01), (32, 0.005)]) == 0.0  # never negative
    assert fit_request_overhead_s([(8, 0.02)]) == 0.0


def test_token_cost_from_the_stretch_of_a_loaded_burst() -> None:
    # Idle burst 80 ms, 160 ms while 2,000 tokens/s stream: busy half the time, 0.25 ms per token.
    assert token_cost_s(0.08, 0.16, 2000.0) == pytest.approx(0.5 / 2000.0)
    assert token_cost_s(0.08, 0.07, 2000.0) == 0.0  # faster when loaded: no measurable cost
    assert token_cost_s(0.08, 100.0, 10.0) == pytest.approx(0.95 / 10.0)  # capped below saturation
    assert tokens_between([0.1, 0.2, 0.3, 0.4], [1, 3, 4, 6], 0.15, 0.35) == 3


def _synthetic_sweep(step_scale: float, overhead_s: float, capacity: tuple[int | None, int | None]) -> SweepResult:
    """Observations of an engine whose steps cost ``step_scale`` x (5 ms + 20 us per prefill token, or
    0.2 ms per sequence and 0.1 us per cached token of a decode step)."""
    prefill = [(tokens, 0.005 + 2e-5 * tokens) for tokens in (16, 128, 512, 1024)]
    decode = [(k, k * per_seq, 0.005 + 2e-4 * k + 1e-7 * k * per_seq) for k, per_seq in ((1, 100), (4, 900), (16, 300))]
    observations = [StepObservation(tokens, 0, 0, 0, (step_scale * cost,)) for tokens, cost in prefill]
    observations += [StepObservation(0, 0, k, context, (step_scale * cost,)) for k, context, cost in decode]
    return SweepResult(observations, capacity, overhead_s, token_overhead_s=overhead_s / 10)


def test_sweeps_taken_at_different_speeds_fit_one_profile_between_them() -> None:
    slow, fast = _synthetic_sweep(1.3, 0.004, (None, None)), _synthetic_sweep(1.0, 0.002, (900, 128))
    client, design = OpenAIClient("http://engine", "tiny"), SweepDesign()
    both = fit_sweeps([slow, fast, fast], client, design)
    alone = fit_sweeps([fast], client, design)
    assert both.num_steps == 3 * alone.num_steps and both.source["sweeps"] == 3
    step = (0, 0, 16, 3200)
    assert alone.step_model().step_time_s(*step) < both.step_model().step_time_s(*step)
    assert both.step_model().step_time_s(*step) < fit_sweeps([slow], client, design).step_model().step_time_s(*step)
    # The front end's costs are the sweeps' median; the KV capacity is the one sweep that read it.
    assert (both.request_overhead_s, both.token_overhead_s) == pytest.approx((0.002, 0.0002))
    assert (both.num_gpu_blocks, both.block_size) == (900, 128)
    with pytest.raises(ConfigError, match="sweeps"):
        fit_sweeps([], client, design)
