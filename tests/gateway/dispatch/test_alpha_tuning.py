"""The alpha tuner plugged into the gateway: windows of finished workflows retune workload-balanced."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from slosched.core.errors import ConfigError
from slosched.gateway.dispatch.dispatcher import Dispatcher
from slosched.gateway.ops.config import parse_config
from tests.gateway.helpers import harness

_POLICIES = {"router": "workload-balanced", "engine": "urgency", "job": "stage-budget"}
_HARDWARE = {"gpu": "A100-80G", "model": "Llama-3-8B"}


def test_finished_workflows_retune_alpha_off_the_event_loop() -> None:
    async def scenario() -> None:
        overrides = {"policies": _POLICIES, "backend": _HARDWARE, "alpha_tuning": {"enabled": True, "window_s": 0.3}}
        async with harness(**overrides) as h, httpx.AsyncClient(base_url=h.url) as client:
            tuner = h.gateway.dispatcher.alpha_tuner
            assert tuner is not None and h.gateway.dispatcher.router.alpha == 0.0  # type: ignore[attr-defined]
            for _ in range(3):
                job = (await client.post("/v1/jobs", json={"kind": "workflow", "slo_s": 20, "template": "t"})).json()
                calls = [{"prompt": [5] * 40, "max_tokens": 6}, {"prompt": [6] * 30, "max_tokens": 4}]
                await client.post(f"/v1/jobs/{job['id']}/stages", json={"name": "a", "calls": calls})
                await client.post(f"/v1/jobs/{job['id']}/stages", json={"name": "b", "calls": calls[:1], "final": True})
            for _ in range(100):
                if tuner.steps:
                    break
                await asyncio.sleep(0.1)
            step = tuner.steps[0]
            assert step.retuned is not None and step.retuned.num_candidates >= 6  # coarse grid replayed
            assert h.gateway.dispatcher.router.alpha == step.alpha  # type: ignore[attr-defined]
            replayed = tuner.recorder.windows()[0].jobs[0]
            assert [len(stage.calls) for stage in replayed.stages] == [2, 1]
            assert replayed.stages[0].calls[0].output_tokens == 6  # observed, as generated

    asyncio.run(scenario())


def test_alpha_tuning_needs_workload_balanced_and_known_hardware() -> None:
    base = {"backends": [{"name": "a", "url": "http://x", **_HARDWARE}], "alpha_tuning": {"enabled": True}}
    with pytest.raises(ConfigError, match="workload-balanced"):
        Dispatcher(parse_config({**base, "policies": {"router": "least-tokens"}}))
    cpu = {**base, "backends": [{"name": "a", "url": "http://x"}], "policies": _POLICIES}
    with pytest.raises(ConfigError, match="known hardware"):
        Dispatcher(parse_config(cpu))
