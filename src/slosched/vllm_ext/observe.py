"""Measured engine steps: their shape, their duration, and the plugin's own cost.

A step's shape (prefill tokens and context, decode sequences and context) is read from the scheduler
output when ``schedule()`` returns; its duration ends when ``update_from_output()`` receives that output.
Synchronous engines run the model in between, so the duration is the model step. With async scheduling
several outputs are in flight; a step then lasts from the later of its scheduling and the previous
step's completion (the pipeline's per-step period). Observations feed the online ``LinearStepPredictor``
at once (cheap), and the policy's own step observers in batches every ``observe_interval_s`` (their fits
may be expensive; the simulator feeds them at the same kind of refit tick).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from slosched.core.views import StepObservation
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.engine.base import StepObserver


@dataclass(slots=True)
class StepStats:
    """Running totals (seconds) for the state export and the overhead benchmark."""

    num_steps: int = 0
    num_timed_steps: int = 0
    plugin_s: float = 0.0  # our code inside schedule() and update_from_output()
    base_schedule_s: float = 0.0  # vLLM's own schedule()
    step_s: float = 0.0  # measured model steps
    modes: dict[str, int] = field(default_factory=dict)
    relaxed: dict[str, int] = field(default_factory=dict)
    num_held_running: int = 0
    num_held_waiting: int = 0

    def count(self, table: dict[str, int], key: str) -> None:
        table[key] = table.get(key, 0) + 1

    def to_dict(self) -> dict[str, object]:
        timed = max(self.num_timed_steps, 1)
        steps = max(self.num_steps, 1)
        return {
            "num_steps": self.num_steps,
            "plugin_us_per_step": 1e6 * self.plugin_s / steps,
            "vllm_schedule_us_per_step": 1e6 * self.base_schedule_s / steps,
            "mean_step_s": self.step_s / timed,
            "modes": dict(self.modes),
            "relaxed": dict(self.relaxed),
            "held_running": self.num_held_running,
            "held_waiting": self.num_held_waiting,
            "totals": {  # raw sums, so a reader can difference two exports over one run
                "plugin_s": self.plugin_s,
                "base_schedule_s": self.base_schedule_s,
                "step_s": self.step_s,
                "num_timed_steps": self.num_timed_steps,
            },
        }


@dataclass(slots=True, frozen=True)
class StepShape:
    num_prefill_tokens: int
    prefill_context_tokens: int
    num_decode_seqs: int
    decode_context_tokens: int


def step_shape(scheduled: dict[str, int], computed_after: Callable[[str], int | None]) -> StepShape:
    """Shape of a step from ``{request id: tokens scheduled}`` and each request's computed tokens after
    scheduling (vLLM advances them inside ``schedule()``); a one-token entry is a decode."""
    prefill = prefill_ctx = decodes = decode_ctx = 0
    for request_id, tokens in scheduled.items():
        after = computed_after(request_id)
        before = max((after or tokens) - tokens, 0)
        if tokens == 1 and before > 0:
            decodes += 1
            decode_ctx += before
        else:
            prefill += tokens
            prefill_ctx += before
    return StepShape(prefill, prefill_ctx, decodes, decode_ctx)


def step_timing_line(observation: StepObservation, done_s: float, pending: int) -> str:
    """One completed step as a JSON line (the plugin's ``step_timing_file``): its shape, when its model
    step ended and how long it ran (``perf_counter`` seconds of the engine process), and how many requests
    were left running or waiting after it (more than 0: the engine went straight on to the next step)."""
    record = {
        "pending": pending,
        "done_s": round(done_s, 6),
        "model_s": round(observation.durations_s[0], 6),
        "prefill_tokens": observation.num_prefill_tokens,
        "prefill_context": observation.prefill_context_tokens,
        "decode_seqs": observation.num_decode_seqs,
        "decode_context": observation.decode_context_tokens,
    }
    return json.dumps(record) + "\n"


class StepClock:
    """Pairs scheduled outputs with their completion and turns them into ``StepObservation``s."""

    __slots__ = ("_batch", "_in_flight", "_last_done_s", "_last_flush_s", "interval_s", "observers", "predictor")

    def __init__(self, predictor: LinearStepPredictor, observers: Iterable[StepObserver], interval_s: float) -> None:
        self.predictor = predictor
        self.observers = list(observers)
        self.interval_s = interval_s
        self._in_flight: dict[int, tuple[StepShape, float]] = {}
        self._batch: list[StepObservation] = []
        self._last_done_s = 0.0
        self._last_flush_s = 0.0

    def scheduled(self, output_key: int, shape: StepShape, now: float) -> None:
        if shape.num_prefill_tokens or shape.num_decode_seqs:
            self._in_flight[output_key] = (shape, now)

    def completed(self, output_key: int, now: float) -> StepObservation | None:
        entry = self._in_flight.pop(output_key, None)
        if entry is None:
            return None
        shape, scheduled_at = entry
        duration = now - max(scheduled_at, self._last_done_s)
        self._last_done_s = now
        observation = StepObservation(
            shape.num_prefill_tokens,
            shape.prefill_context_tokens,
            shape.num_decode_seqs,
            shape.decode_context_tokens,
            (max(duration, 0.0),),
        )
        self.predictor.observe(observation)
        if self.observers:
            self._batch.append(observation)
        return observation

    def flush(self, now: float, force: bool = False) -> int:
        """Hand batched observations to the policy's observers (every ``interval_s``); returns how many."""
        if not self._batch or (not force and now - self._last_flush_s < self.interval_s):
            return 0
        batch, self._batch = self._batch, []
        self._last_flush_s = now
        for observer in self.observers:
            for observation in batch:
                observer.observe_step(observation)
        return len(batch)
