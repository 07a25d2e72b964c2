"""slosched's engine policies as vLLM v1 schedulers: ``--scheduler-cls slosched.vllm_ext.scheduler.NAME``.

Classes (each reads ``$SLOSCHED_ENGINE_CONFIG`` / ``$SLOSCHED_ENGINE_POLICY`` over its own default policy,
see ``config.py``): ``SloschedScheduler`` (composable; FCFS + chunked by default), ``UrgencyScheduler``
(preset ``urgency``), ``RelServeScheduler`` (``relserve``), ``LensScheduler`` (``lens``), ``SaberScheduler``
(``saber``; without a speed model in ``params`` it calibrates one from its own steps, ``saber_speed.py``),
``StaticPriorityScheduler`` (``static-priority``).

Every class wraps ``schedule()``: the policy decides, the decision is applied to the scheduler's queues and
limits for one call of the base ``schedule()``, and undone right after (``engine.py``, ``plan.py``).

Async scheduling (vLLM's default on GPUs): constructing any of these classes with
``scheduler_config.async_scheduling`` on returns the matching subclass of vLLM's ``AsyncScheduler``
(``async_variant``), so naming the plain class on the command line keeps the overlap. vLLM on CPU runs
synchronously. Importing this module checks the vLLM version (``version.py``).
"""

from __future__ import annotations

import time
from typing import Any, ClassVar

import vllm  # type: ignore[import-not-found,unused-ignore]

from slosched.vllm_ext.version import check_vllm_version

check_vllm_version(vllm.__version__)

from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
from vllm.v1.core.sched.request_queue import FCFSRequestQueue  # type: ignore[import-not-found,unused-ignore]  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # type: ignore[import-not-found,unused-ignore]  # noqa: E402

from slosched.vllm_ext.engine import SloschedEngine  # noqa: E402

_ASYNC_VARIANTS: dict[type, type] = {}


def async_variant(cls: type) -> type:
    """``cls`` combined with vLLM's ``AsyncScheduler`` (a subclass of ``cls``; cached per class)."""
    variant = _ASYNC_VARIANTS.get(cls)
    if variant is None:
        variant = type(f"Async{cls.__name__}", (cls, AsyncScheduler), {"__module__": cls.__module__})
        _ASYNC_VARIANTS[cls] = variant
    return variant


def scheduler_class_for(cls: type, async_scheduling: bool) -> type:
    """The class vLLM should instantiate: ``cls`` itself, or its async variant when vLLM schedules
    asynchronously (a plain ``Scheduler`` subclass would not track the in-flight output placeholders)."""
    if async_scheduling and not issubclass(cls, AsyncScheduler):
        return async_variant(cls)
    return cls


class SloschedScheduler(Scheduler):
    """The composable plugin scheduler; subclasses only change ``default_config``."""

    default_config: ClassVar[dict[str, Any]] = {}

    def __new__(cls, *args: Any, **kwargs: Any) -> SloschedScheduler:
        vllm_config = kwargs.get("vllm_config", args[0] if args else None)
        async_on = bool(getattr(getattr(vllm_config, "scheduler_config", None), "async_scheduling", False))
        instance: SloschedScheduler = super().__new__(scheduler_class_for(cls, async_on))
        return instance

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The plugin orders the waiting queue itself every step; an FCFS deque lets it set any order
        # (vLLM's priority heap would re-sort by (priority, arrival)). Preemption victims still follow
        # --scheduling-policy, which reads self.policy, not the queue type.
        waiting: Any = getattr(self, "waiting")  # noqa: B009  (vLLM is untyped for mypy here)
        if not isinstance(waiting, FCFSRequestQueue):
            self.waiting = FCFSRequestQueue(list(waiting))
        self.slosched = SloschedEngine(self, self.default_config)

    def schedule(self, throttle_prefills: bool = False) -> Any:
        engine = self.slosched
        start = time.perf_counter()
        context = engine.before_schedule(self)
        base_start = time.perf_counter()
        try:
            output = super().schedule(throttle_prefills)
        finally:
            base_end = time.perf_counter()
            engine.undo(self, context)
        plugin_s = (base_start - start) + (time.perf_counter() - base_end)
        engine.after_schedule(self, context, output, plugin_s, base_end - base_start)
        return output

    def update_from_output(self, scheduler_output: Any, model_runner_output: Any) -> Any:
        started = time.perf_counter()
        outputs = super().update_from_output(scheduler_output, model_runner_output)
        self.slosched.after_update(self, scheduler_output, started)
        return outputs

    def shutdown(self) -> None:
        self.slosched.close()
        super().shutdown()


class UrgencyScheduler(SloschedScheduler):
    """Hexgen-Text2SQL's urgency queue (preset ``urgency``)."""

    default_config: ClassVar[dict[str, Any]] = {"preset": "urgency"}


class RelServeScheduler(SloschedScheduler):
    """RelServe's dynamic priorities and adaptive batch arranger (preset ``relserve``)."""

    default_config: ClassVar[dict[str, Any]] = {"preset": "relserve"}


class LensScheduler(SloschedScheduler):
    """NexusSched's LENS batch sizing (preset ``lens``)."""

    default_config: ClassVar[dict[str, Any]] = {"preset": "lens"}


class SaberScheduler(SloschedScheduler):
    """SABER's SLA-aware admission (preset ``saber``). With ``params.profile`` or ``params.speed`` that speed
    model is used; with neither, one is calibrated from the plugin's own step-time model (``saber_speed.py``)."""

    default_config: ClassVar[dict[str, Any]] = {"preset": "saber"}


class StaticPriorityScheduler(SloschedScheduler):
    """Shortest estimated work first, fixed at arrival (preset ``static-priority``)."""

    default_config: ClassVar[dict[str, Any]] = {"preset": "static-priority"}
