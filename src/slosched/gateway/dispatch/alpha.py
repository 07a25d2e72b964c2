"""The alpha tuner (``tuning.alpha``, Hexgen-Text2SQL) plugged into the live gateway.

Finished workflow jobs are recorded per arrival window as ``JobSpec``s holding what was *observed*: their
stages in the order they ran, each call's prompt-token estimate and its generated token count (known only
after it finished, as the design allows for replay). A window is tuned one window after it closed, so
late finishers still land in it. ``AlphaController`` decides whether to retune (first window; later, a
one-sided t-test on latencies); the simulator replays run in a worker thread so the event loop keeps
serving, and the new alpha is set on the ``workload-balanced`` router between two routing decisions.

The replays simulate the backends as the GPU/model their config names, so alpha tuning requires hardware
the simulator knows (checked at start-up).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.gateway.ops.config import AlphaTuningConfig
from slosched.perf.hardware import gpu_facts, model_facts
from slosched.sim.runner import PolicyParams
from slosched.tuning.alpha import ROUTER, AlphaTuner, TuneConfig
from slosched.tuning.window import AlphaController, ControllerStep, WindowRecorder

log = logging.getLogger("slosched.gateway")


def observed_job(
    job_id: str, template: str, arrival_s: float, slo_s: float | None, stages: Sequence[dict[str, Any]]
) -> JobSpec | None:
    """A finished job as the tuner replays it (stages chained in the order they ran); None when no call
    produced output (nothing to replay)."""
    specs: list[StageSpec] = []
    for stage in stages:
        calls = tuple(
            CallSpec(max(int(r["prompt_tokens"]), 1), max(int(r["output_tokens"]), 1))
            for r in stage["results"] or ()
            if r["outcome"] == "completed"
        )
        if calls:
            specs.append(StageSpec(name=f"{len(specs)}:{stage['name']}", calls=calls))
    if not specs:
        return None
    return JobSpec(
        id=job_id, kind=JobKind.WORKFLOW, arrival_s=arrival_s, stages=tuple(specs), slo_s=slo_s, template=template
    )


class LiveAlphaTuner:
    """Owns the recorder and controller; ``tick`` (called periodically) tunes windows that are due."""

    def __init__(
        self,
        router: Any,
        config: AlphaTuningConfig,
        tune_config: TuneConfig,
        clock: Callable[[], float],
    ) -> None:
        self.router = router
        self.config = config
        self.clock = clock
        self.recorder = WindowRecorder(config.window_s)
        self.controller = AlphaController(AlphaTuner(tune_config), config.p_threshold)
        self.steps: list[ControllerStep] = []
        self._next_window = 0
        self._running = False
        router.alpha = self.controller.alpha

    @classmethod
    def build(
        cls,
        router: Any,
        router_name: str,
        instances: Sequence[InstanceSpec],
        engine: str,
        job: str,
        params: PolicyParams,
        config: AlphaTuningConfig,
        clock: Callable[[], float],
    ) -> LiveAlphaTuner:
        if router_name != ROUTER:
            raise ConfigError("alpha_tuning", f"tunes the {ROUTER!r} router's alpha; the router is {router_name!r}")
        for index, spec in enumerate(instances):
            try:
                gpu_facts(spec.gpu)
                model_facts(spec.model)
            except ConfigError as error:
                raise ConfigError(f"backends[{index}]", f"alpha tuning replays need known hardware: {error}") from error
        tune = TuneConfig(instances=tuple(instances), engine=engine, job_policy=job, params=params)
        return cls(router, config, tune, clock)

    def record(self, job: JobSpec, latency_s: float) -> None:
        self.recorder.record(job, latency_s)

    async def tick(self) -> None:
        """Tune every window that closed at least one window ago (one at a time, off the event loop)."""
        if self._running:
            return
        now = self.clock()
        windows = {round(w.start_s / self.config.window_s): w for w in self.recorder.windows()}
        while (self._next_window + 2) * self.config.window_s <= now:
            window = windows.get(self._next_window)
            self._next_window += 1
            if window is None or not window.jobs:
                continue
            self._running = True
            try:
                step = await asyncio.to_thread(self.controller.on_window_closed, window)
            finally:
                self._running = False
            self.steps.append(step)
            if not math.isclose(self.router.alpha, step.alpha):
                log.info("alpha tuner: alpha %.2f -> %.2f", self.router.alpha, step.alpha)
            self.router.alpha = step.alpha
