"""Feeds an instance's observed steps to its belief step-time predictor at fixed simulated instants.

Observations are buffered and handed over only at refit ticks, merged into maximal runs of identical
decode steps. The predictor therefore sees exactly the same observations whether the simulator stepped
one iteration at a time or fast-forwarded, which keeps both modes bit-identical.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import chain
from typing import Any

from slosched.core.belief import StepPredictor
from slosched.core.views import StepObservation
from slosched.policies.engine.base import StepObserver


class _Pending:
    """Steps of one shape waiting for the next refit tick (a plain class: see ``sim.step.StepWork``)."""

    __slots__ = (
        "decode_context_tokens",
        "durations",
        "num_decode_seqs",
        "num_prefill_tokens",
        "num_steps",
        "prefill_context_tokens",
    )

    def __init__(
        self,
        num_prefill_tokens: int,
        prefill_context_tokens: int,
        num_decode_seqs: int,
        decode_context_tokens: int,
        durations: list[Sequence[float]],
        num_steps: int,
    ) -> None:
        self.num_prefill_tokens = num_prefill_tokens
        self.prefill_context_tokens = prefill_context_tokens
        self.num_decode_seqs = num_decode_seqs
        self.decode_context_tokens = decode_context_tokens
        self.durations = durations
        self.num_steps = num_steps


class BeliefFeed:
    """Also hands the same observations to the engine policy's own step observers (e.g. a fitted model)."""

    __slots__ = ("_observe_steps", "_pending", "observers", "predictor")

    def __init__(self, predictor: StepPredictor, observers: Sequence[StepObserver] = ()) -> None:
        self.predictor = predictor
        self.observers = list(observers)
        self._pending: list[_Pending] = []
        # A predictor that takes a tick's steps as plain tuples in one call (``LinearStepPredictor.observe_steps``:
        # the fields of ``StepObservation`` in order) is spared a frozen ``StepObservation`` and a call per step.
        self._observe_steps: Callable[[list[tuple[int, int, int, int, Sequence[float]]]], Any] | None = getattr(
            predictor, "observe_steps", None
        )

    def record(
        self,
        num_prefill: int,
        prefill_context: int,
        num_decode: int,
        decode_context: int,
        durations: Sequence[float],
    ) -> None:
        """Record ``len(durations)`` consecutive steps (more than one only for decode runs)."""
        count = len(durations)
        if count == 0:
            return
        pending = self._pending
        if pending and num_prefill == 0:
            last = pending[-1]
            contiguous = last.decode_context_tokens + last.num_decode_seqs * last.num_steps
            if last.num_prefill_tokens == 0 and last.num_decode_seqs == num_decode and contiguous == decode_context:
                last.durations.append(durations)
                last.num_steps += count
                return
        pending.append(_Pending(num_prefill, prefill_context, num_decode, decode_context, [durations], count))

    def flush(self) -> None:
        pending = self._pending
        if not pending:
            return
        observe_steps = self._observe_steps
        if observe_steps is not None and not self.observers:
            shapes = [
                (
                    item.num_prefill_tokens,
                    item.prefill_context_tokens,
                    item.num_decode_seqs,
                    item.decode_context_tokens,
                    _durations(item),
                )
                for item in pending
            ]
            observe_steps(shapes)
        else:
            self._observe_each(pending)
        pending.clear()

    def _observe_each(self, pending: list[_Pending]) -> None:
        observe = self.predictor.observe
        observers = self.observers
        for item in pending:
            # Positional (the field order of ``StepObservation``): one per observed step shape, keywords cost more.
            observation = StepObservation(
                item.num_prefill_tokens,
                item.prefill_context_tokens,
                item.num_decode_seqs,
                item.decode_context_tokens,
                _durations(item),
            )
            observe(observation)
            for observer in observers:
                observer.observe_step(observation)


def _durations(item: _Pending) -> Sequence[float]:
    parts = item.durations
    return parts[0] if len(parts) == 1 else list(chain.from_iterable(parts))
