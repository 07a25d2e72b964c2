"""The plugin's per-step logic, over a duck-typed vLLM scheduler (no vLLM import: tests use fakes).

``SloschedEngine`` owns the policy, the views, the step clock, the state writer and the control file.
The vLLM subclass (``scheduler.py``) calls ``before_schedule`` -> base ``schedule()`` -> ``undo`` (in a
``finally``) -> ``after_schedule``, and ``after_update`` after ``update_from_output``. Between
``before_schedule`` and ``undo`` the scheduler's waiting queue holds only the requests the policy lets in
(in its order), its running list lacks the requests sitting the step out, and its token and active-request
limits are this step's; ``undo`` restores all of it exactly (``plan.restore_running``), so no request is
ever lost or reordered by the plugin.

Scheduler attributes used: ``running`` (list), ``waiting`` (an FCFS deque), ``kv_holding_waiting``,
``requests``, ``max_num_scheduled_tokens``, ``max_num_active_reqs``, ``max_model_len``, ``block_size``,
``kv_cache_config.num_blocks``, ``cache_config.enable_prefix_caching``, ``kv_cache_manager``
(``block_pool.get_num_free_blocks()``, ``get_computed_blocks(request)``).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import IO, Any

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.views import StepMode, StepPlan
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.speed_probe import SpeedProbe, probe_line
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.queue import PolicyQueue
from slosched.vllm_ext import plan as planning
from slosched.vllm_ext.config import PluginConfig, build_policy, config_from_env
from slosched.vllm_ext.control import ControlFile, ControlUpdate
from slosched.vllm_ext.observe import StepClock, StepStats, step_shape, step_timing_line
from slosched.vllm_ext.saber_speed import (
    DEFAULT_CONTEXT_TOKENS,
    SaberCalibration,
    calibrated_parts,
    speed_from_step_model,
    with_speed,
)
from slosched.vllm_ext.state_export import StateWriter, core_state, step_model
from slosched.vllm_ext.views import SeqCache, VllmEngineView, VllmSeq

_PRUNE_EVERY = 256  # steps between dropping views of finished requests
_HEAD = 32  # job ids of the head of the waiting queue in the state export
_MAX_IDLE_SLEEP_S = 0.002  # an emptied step sleeps at most this long (vLLM calls schedule() again at once)


@dataclass(slots=True)
class StepContext:
    """What ``before_schedule`` changed, so ``undo`` can put it back."""

    decision: planning.StepDecision
    original_running: list[Any]
    held_kv_holding: list[Any] = field(default_factory=list)
    limits: tuple[int, int] = (0, 0)


def spec_from_scheduler(sched: Any) -> InstanceSpec:
    model = getattr(getattr(getattr(sched, "vllm_config", None), "model_config", None), "served_model_name", "vllm")
    return InstanceSpec(
        name=f"vllm-{os.getpid()}",
        gpu="vllm",
        model=str(model),
        max_running=int(sched.max_num_active_reqs),
        max_batched_tokens=int(sched.max_num_scheduled_tokens),
        max_model_len=int(sched.max_model_len),
        block_size=int(sched.block_size),
        num_kv_blocks=int(sched.kv_cache_config.num_blocks),
        prefix_caching=bool(sched.cache_config.enable_prefix_caching),
    )


def _take_all(queue: Any) -> list[Any]:
    items = list(queue)
    if items:
        queue.remove_requests(items)
    return items


class SloschedEngine:
    def __init__(self, sched: Any, defaults: Mapping[str, Any] | None = None, config: PluginConfig | None = None):
        self.startup = config or config_from_env(defaults)
        self.config = self.startup
        self.spec = spec_from_scheduler(sched)
        self.limits = (self.spec.max_batched_tokens, self.spec.max_running)
        # Refit every 64 steps over the last 256: an NNLS fit costs ~1 ms here, ~15 us amortized per step.
        self.predictor = LinearStepPredictor(window=256, refit_every=64)
        self.policy, self.calibration = self._build(self.config)
        self._calibrated_s = float("-inf")
        self.seqs = SeqCache()
        # vLLM owns the waiting list (an FCFS deque): the queue adopts it each step (``sync``).
        self.queue: PolicyQueue[VllmSeq] = PolicyQueue(self.policy, engine_fcfs=True)
        manager = sched.kv_cache_manager
        self.view = VllmEngineView(self.spec, self.predictor, lambda raw: int(manager.get_computed_blocks(raw)[1]))
        self.clock = StepClock(self.predictor, self.policy.observers, self.config.observe_interval_s)
        self.stats = StepStats()
        control_file, state_file = self.config.control_file, self.config.state_file
        self.control = ControlFile(control_file, self.config.control_poll_s) if control_file else None
        self.control_version: Any = None
        self.control_error = ""
        self.writer = StateWriter(state_file, self.config.export_interval_s) if state_file else None
        self._step_log: IO[str] | None = None
        self._step_timing: IO[str] | None = None
        self._open_step_log()
        self.speed_probe = SpeedProbe()
        self._probed_s = float("-inf")
        self._stalled = False
        self._last_export_s = float("-inf")

    # ---- control ------------------------------------------------------------------------------------
    def _apply_control(self, update: ControlUpdate) -> None:
        self.control_version = update.version
        if update.config is None:
            self.control_error = update.error
            return
        new = update.config
        old = self.config
        if (new.policy, new.seed, new.fair_share) != (old.policy, old.seed, old.fair_share):
            try:
                policy, calibration = self._build(new)
            except ConfigError as error:
                self.control_error = str(error)
                return
            self.policy, self.calibration = policy, calibration
            self.queue = PolicyQueue(policy, engine_fcfs=True)
            self.clock.observers = list(policy.observers)
        if self.writer is not None:
            self.writer.interval_s = new.export_interval_s
        self.control_error = ""
        step_log_changed = (new.step_log_file, new.step_timing_file) != (
            self.config.step_log_file,
            self.config.step_timing_file,
        )
        self.config = new
        if step_log_changed:
            self._open_step_log()

    def _build(self, config: PluginConfig) -> tuple[EnginePolicy, SaberCalibration | None]:
        """Fresh policy objects (with the config's fair sharing); SABER parts given no speed model get one
        calibrated from the step model (``saber_speed.py``), refreshed by ``_calibrate``."""
        choice, seed, fair = config.policy, config.seed, config.fair_share
        parts = calibrated_parts(choice)
        if not parts:
            return build_policy(choice, self.spec, seed, fair), None
        model = speed_from_step_model(self.predictor.coefficients, DEFAULT_CONTEXT_TOKENS)
        return build_policy(with_speed(choice, parts, model), self.spec, seed, fair), SaberCalibration(parts, model)

    def _calibrate(self, now: float) -> None:
        assert self.calibration is not None
        running = self.view.running_seqs
        context = sum(seq.num_computed_tokens for seq in running) / len(running) if running else None
        self.calibration.refresh(self.policy, self.predictor.coefficients, context)
        self._calibrated_s = now

    def _open_step_log(self) -> None:
        self._close_logs()
        if self.config.step_log_file is not None:
            self._step_log = self.config.step_log_file.open("a", buffering=1)
        if self.config.step_timing_file is not None:
            self._step_timing = self.config.step_timing_file.open("a", buffering=1)

    def _close_logs(self) -> None:
        for log in (self._step_log, self._step_timing):
            if log is not None:
                log.close()
        self._step_log = self._step_timing = None

    # ---- per step -----------------------------------------------------------------------------------
    def _refresh(self, sched: Any, now: float) -> None:
        running = self.seqs.running(sched.running, now)
        waiting = self.seqs.waiting(sched.waiting)
        self.view.refresh(now, running, waiting, int(sched.kv_cache_manager.block_pool.get_num_free_blocks()))

    def before_schedule(self, sched: Any) -> StepContext | None:
        """Decide this step and apply it to ``sched``; None: nothing changed (bypass)."""
        now = time.time()
        if self.control is not None:
            update = self.control.poll(now, self.startup)
            if update is not None:
                self._apply_control(update)
        if self.config.bypass:
            return None
        self._refresh(sched, now)
        view, policy = self.view, self.policy
        plan: StepPlan = policy.batching.plan(view)
        if self.config.mode_override is not None:
            plan = StepPlan(self.config.mode_override, plan.token_budget, plan.max_running, plan.chunked_prefill)
        queue = self.queue
        queue.sync(view.waiting, view)
        ordered = queue.order(view)
        view.waiting = ordered  # admission policies see the queue in the order they are asked

        def admit(free_slots: int, token_room: int) -> list[VllmSeq]:
            return planning.admission_pass(queue, view, free_slots, token_room)

        decision = planning.decide_step(
            plan, sched.running, ordered, admit, self.limits, self.config.drain, self._stalled
        )
        limits = (sched.max_num_scheduled_tokens, sched.max_num_active_reqs)
        context = StepContext(decision, list(sched.running), limits=limits)
        sched.waiting.clear()
        sched.waiting.extend(decision.admitted)
        if decision.mode is StepMode.DECODE_ONLY or self.config.drain:
            context.held_kv_holding = _take_all(sched.kv_holding_waiting)
        if decision.held_running:
            held = {id(raw) for raw in decision.held_running}
            sched.running = [raw for raw in sched.running if id(raw) not in held]
        sched.max_num_scheduled_tokens = decision.token_budget
        # vLLM counts only the running list it sees against the cap: the held-back requests still run.
        sched.max_num_active_reqs = max(decision.max_active - len(decision.held_running), 0)
        return context

    def undo(self, sched: Any, context: StepContext | None) -> None:
        """Restore everything ``before_schedule`` changed (runs even when the base call raised)."""
        if context is None:
            return
        sched.max_num_scheduled_tokens, sched.max_num_active_reqs = context.limits
        decision = context.decision
        sched.running = planning.restore_running(context.original_running, decision.held_running, sched.running)
        if decision.held_waiting:
            sched.waiting.extend(decision.held_waiting)
        for raw in context.held_kv_holding:
            sched.kv_holding_waiting.add_request(raw)

    def after_schedule(
        self, sched: Any, context: StepContext | None, output: Any, plugin_s: float, base_s: float
    ) -> None:
        start = time.perf_counter()
        scheduled: dict[str, int] = output.num_scheduled_tokens
        requests = sched.requests

        def computed(request_id: str) -> int | None:
            raw = requests.get(request_id)
            return None if raw is None else int(raw.num_computed_tokens)

        self.clock.scheduled(id(output), step_shape(scheduled, computed), time.perf_counter())
        stats = self.stats
        stats.num_steps += 1
        stats.base_schedule_s += base_s
        mode = "bypass" if context is None else context.decision.mode.value
        stats.count(stats.modes, mode)
        if context is not None:
            decision = context.decision
            if decision.relaxed:
                stats.count(stats.relaxed, decision.relaxed)
            stats.num_held_running += len(decision.held_running)
            stats.num_held_waiting += len(decision.held_waiting)
            self._stalled = bool(decision.held_running) and not scheduled
        if self._step_log is not None:
            self._log_step(sched, output, context, mode)
        if stats.num_steps % _PRUNE_EVERY == 0:
            self.seqs.prune(requests.__contains__)
        self._maybe_export(sched, force=False)
        stats.plugin_s += plugin_s + time.perf_counter() - start
        if not scheduled and context is not None and (context.decision.held_waiting or context.decision.held_running):
            time.sleep(self._idle_sleep_s())  # our decision emptied the step (drain, deferral): do not spin

    def after_update(self, sched: Any, output: Any, started: float) -> None:
        start = time.perf_counter()
        observation = self.clock.completed(id(output), started)
        if observation is not None:
            self.stats.num_timed_steps += 1
            self.stats.step_s += observation.durations_s[0]
            if self._step_timing is not None:
                pending = len(sched.running) + len(sched.waiting)
                self._step_timing.write(step_timing_line(observation, started, pending))
                self._maybe_probe_speed(self._step_timing)
        now = time.time()
        self.clock.flush(now)
        if self.calibration is not None and now - self._calibrated_s >= self.config.observe_interval_s:
            self._calibrate(now)
        self._maybe_export(sched, force=not sched.running and not sched.waiting)
        self.stats.plugin_s += time.perf_counter() - start

    def _maybe_probe_speed(self, timing: IO[str]) -> None:
        """Time the speed probe when ``speed_probe_interval_s`` has passed since the last one (between steps,
        so the step log can take it out of the engine's period)."""
        interval = self.config.speed_probe_interval_s
        now = time.perf_counter()
        if interval > 0 and now - self._probed_s >= interval:
            probe_s = self.speed_probe.time_s()
            self._probed_s = now + probe_s
            timing.write(probe_line(probe_s, self._probed_s))

    def _idle_sleep_s(self) -> float:
        """Until the policy's decision can change (its queue's ``next_wake_s``), at most ``_MAX_IDLE_SLEEP_S``:
        the queue itself can change with any new request, which vLLM adds between steps."""
        wake = self.queue.next_wake_s(self.view)
        if wake is None:
            return _MAX_IDLE_SLEEP_S
        return min(max(wake - time.time(), 0.0), _MAX_IDLE_SLEEP_S)

    # ---- export and logging -------------------------------------------------------------------------
    def _maybe_export(self, sched: Any, force: bool) -> None:
        if self.writer is None:
            return
        now = time.time()
        if not force and now - self._last_export_s < self.config.export_interval_s:
            return
        self._last_export_s = now
        self.writer.publish(self.snapshot(sched, now), immediately=force)

    def snapshot(self, sched: Any, now: float) -> dict[str, Any]:
        self._refresh(sched, now)
        state: dict[str, Any] = core_state(self.view, self.predictor, self.limits[0])
        state.update(self.policy.export_state(self.view))
        problems = self.seqs.problems
        state["step_model"] = step_model(self.predictor)
        state["engine"] = {
            "num_running": len(sched.running),
            "num_waiting": len(sched.waiting) + len(sched.kv_holding_waiting),
            "num_free_kv_blocks": self.view.num_free_kv_blocks,
            "num_kv_blocks": self.spec.num_kv_blocks,
            "block_size": self.spec.block_size,
            "max_num_scheduled_tokens": self.limits[0],
            "max_num_active_reqs": self.limits[1],
            "relquery_rows_waiting": sum(1 for seq in self.view.waiting if seq.relquery_size is not None),
            "waiting_head_jobs": [seq.request.job_id for seq in self.view.waiting[:_HEAD]],
        }
        state["plugin"] = {
            "policy": "bypass" if self.config.bypass else self.policy.name,
            "drain": self.config.drain,
            "mode_override": self.config.mode_override,
            "control_version": self.control_version,
            "control_error": self.control_error,
            "stats": self.stats.to_dict(),
            "metadata_problems": dict(problems.counts),
            "metadata_requests": problems.num_requests,
            "metadata_requests_with_problems": problems.num_requests_with_problems,
            "saber_speed": None if self.calibration is None else self.calibration.to_dict(),
        }
        state["snapshot_unix_s"] = now
        state["pid"] = os.getpid()
        return state

    def _log_step(self, sched: Any, output: Any, context: StepContext | None, mode: str) -> None:
        """One JSON line: the plan applied, what the step saw (``num_running`` before any request was held
        back, ``num_waiting`` after it, kv-holding ones included) and did (tokens per request, admissions,
        requests finished or preempted since the previous step), so a reader can tell from the log alone
        whether a request was running, waiting, done or preempted at each step."""
        assert self._step_log is not None
        decision = None if context is None else context.decision
        running = len(sched.running) if context is None else len(context.original_running)
        record = {
            "t": time.time(),
            "mode": mode,
            "relaxed": "" if decision is None else decision.relaxed,
            "token_budget": self.limits[0] if decision is None else decision.token_budget,
            "max_active": self.limits[1] if decision is None else decision.max_active,
            "held_running": [] if decision is None else [raw.request_id for raw in decision.held_running],
            "held_waiting": 0 if decision is None else len(decision.held_waiting),
            "scheduled": dict(output.num_scheduled_tokens),
            "new": [new.req_id for new in output.scheduled_new_reqs],
            "num_running": running,
            "num_waiting": len(sched.waiting) + len(sched.kv_holding_waiting),
            "finished": sorted(getattr(output, "finished_req_ids", None) or ()),
            "preempted": sorted(getattr(output, "preempted_req_ids", None) or ()),
        }
        self._step_log.write(json.dumps(record) + "\n")

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self._close_logs()
