"""``gateway.dispatch.alpha``: finished live jobs as the tuner replays them, the tuner's start-up checks, and ``tick``
tuning each closed window once, one window late, and setting the router's alpha (controller faked: no
replays)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobKind, JobSpec
from slosched.gateway.dispatch.alpha import LiveAlphaTuner, observed_job
from slosched.gateway.ops.config import AlphaTuningConfig
from slosched.sim.runner import PolicyParams
from slosched.tuning.window import ControllerStep, Window
from tests.conftest import make_instance


def _result(prompt: int, output: int, outcome: str = "completed") -> dict[str, Any]:
    return {"prompt_tokens": prompt, "output_tokens": output, "outcome": outcome}


def test_observed_job_chains_the_stages_that_produced_output() -> None:
    stages: list[dict[str, Any]] = [
        {"name": "plan", "results": [_result(120, 8), _result(0, 0)]},
        {"name": "lost", "results": [_result(50, 3, outcome="failed")]},
        {"name": "pending", "results": None},
        {"name": "answer", "results": [_result(300, 40)]},
    ]
    job = observed_job("job-1", "sql", 2.0, 30.0, stages)
    assert job is not None
    assert (job.id, job.kind, job.template, job.arrival_s, job.slo_s) == ("job-1", JobKind.WORKFLOW, "sql", 2.0, 30.0)
    assert [stage.name for stage in job.stages] == ["0:plan", "1:answer"]
    assert [(c.input_tokens, c.output_tokens) for c in job.stages[0].calls] == [(120, 8), (1, 1)]
    assert all(stage.after is None for stage in job.stages)  # a chain, in the order they ran


def test_observed_job_without_output_is_none() -> None:
    assert observed_job("j", "t", 0.0, None, []) is None
    assert observed_job("j", "t", 0.0, None, [{"name": "s", "results": [_result(5, 1, "failed")]}]) is None


def _build(router_name: str = "workload-balanced", instances: tuple[InstanceSpec, ...] | None = None) -> LiveAlphaTuner:
    return LiveAlphaTuner.build(
        SimpleNamespace(alpha=None),
        router_name,
        instances or (make_instance("a"), make_instance("b")),
        "urgency",
        "stage-budget",
        PolicyParams(),
        AlphaTuningConfig(enabled=True, window_s=10.0),
        lambda: 0.0,
    )


def test_build_checks_the_router_and_the_hardware() -> None:
    tuner = _build()
    assert tuner.router.alpha == tuner.controller.alpha == 0.0
    with pytest.raises(ConfigError, match="tunes the 'workload-balanced' router's alpha; the router is 'round-robin'"):
        _build("round-robin")
    with pytest.raises(ConfigError) as error:
        _build(instances=(make_instance("a"), make_instance("b", gpu="TPU-v9")))
    assert error.value.field == "backends[1]" and "known hardware" in str(error.value)


class FakeController:
    """Returns the next alpha of ``alphas`` per closed window and remembers the windows it saw."""

    def __init__(self, alphas: list[float]) -> None:
        self.alphas = alphas
        self.seen: list[Window] = []
        self.alpha = 0.0

    def on_window_closed(self, window: Window) -> ControllerStep:
        self.seen.append(window)
        self.alpha = self.alphas[len(self.seen) - 1]
        return ControllerStep(self.alpha, None, None)


def _job(job_id: str, arrival_s: float) -> JobSpec:
    job = observed_job(job_id, "t", arrival_s, None, [{"name": "s", "results": [_result(10, 2)]}])
    assert job is not None
    return job


def test_tick_tunes_each_closed_window_once_a_window_late() -> None:
    now = [0.0]
    tuner = _build()
    tuner.clock = lambda: now[0]
    controller = FakeController([0.4, 0.7])
    tuner.controller = controller  # type: ignore[assignment]
    tuner.record(_job("a", 1.0), 3.0)  # window 0: [0, 10)
    tuner.record(_job("b", 25.0), 2.0)  # window 2: [20, 30); window 1 stays empty

    now[0] = 19.9
    asyncio.run(tuner.tick())
    assert controller.seen == [] and tuner.router.alpha == 0.0  # window 0 closed, but not a window ago

    now[0] = 20.0
    asyncio.run(tuner.tick())
    assert [w.start_s for w in controller.seen] == [0.0]
    assert tuner.router.alpha == 0.4 and [s.alpha for s in tuner.steps] == [0.4]

    now[0] = 35.0
    asyncio.run(tuner.tick())  # window 1 is empty: skipped; window 2 is not due yet
    assert len(controller.seen) == 1

    now[0] = 40.0
    asyncio.run(tuner.tick())
    asyncio.run(tuner.tick())  # nothing new: no second tuning of the same window
    assert [w.start_s for w in controller.seen] == [0.0, 20.0]
    assert [len(w.jobs) for w in controller.seen] == [1, 1]
    assert tuner.router.alpha == 0.7
