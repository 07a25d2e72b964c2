"""The profiling sweep end to end against the in-process stub OpenAI server (small, ~1 s)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from slosched.core.errors import ConfigError
from slosched.perf.profile_fit import MeasuredProfile, fit_profile
from slosched.serve.stub import StubBackend, StubBehaviour, serve_app
from slosched.tuning.engine_profile import SweepDesign, run_sweep
from slosched.tuning.openai_client import OpenAIClient

DELAY_S = 0.02


def test_sweep_against_the_stub_measures_its_token_delay(tmp_path: Path) -> None:
    stub = StubBackend(behaviour=StubBehaviour(token_delay_s=DELAY_S))
    design = SweepDesign(prompt_lengths=(8, 32, 96), concurrencies=(1, 2), output_lengths=(5,))
    seen: list[tuple[int, int, int]] = []

    async def sweep():  # type: ignore[no-untyped-def]
        async with serve_app(stub.app()) as url:
            return await run_sweep(OpenAIClient(url, "tiny"), design, lambda *point: seen.append(point))

    observations, capacity = asyncio.run(sweep())
    assert seen == design.points()
    assert capacity == (None, None)  # the stub's /metrics has no cache_config_info
    # Every wave sent k streamed requests forcing exactly 5 tokens with ignore_eos.
    assert len(stub.received) == sum(k for _, k, _ in design.points())
    assert all(body["ignore_eos"] and body["max_tokens"] == 5 and body["stream"] for _, body in stub.received)
    prefill = [obs for obs in observations if obs.num_prefill_tokens > 0]
    decode = [obs for obs in observations if obs.num_decode_seqs > 0]
    assert sorted(obs.num_prefill_tokens for obs in prefill) == sorted(length * k for length, k, _ in design.points())
    assert len(decode) == len(design.points()) and all(len(obs.durations_s) == 1 for obs in decode)  # mean step
    # The stub sleeps DELAY_S before each token: every measured step is about that long.
    for obs in observations:
        for duration in obs.durations_s:
            assert DELAY_S * 0.8 < duration < DELAY_S * 5
    profile = fit_profile(observations)
    model = MeasuredProfile.load(profile.save(tmp_path / "stub.json")).step_model()
    assert model.step_time_s(0, 0, 1, 50) == pytest.approx(DELAY_S, rel=0.5)
    assert model.step_time_s(64, 0, 0, 0) == pytest.approx(DELAY_S, rel=0.5)


def test_design_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="output_lengths"):
        SweepDesign(output_lengths=(1,))
    with pytest.raises(ConfigError, match="concurrencies"):
        SweepDesign(concurrencies=())
