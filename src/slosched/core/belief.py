"""Protocols for step-time models (truth and belief) and output-length predictors.

They live in ``core`` beside the views that expose them, so ``core`` depends on nothing else of ours;
``perf/`` holds the implementations.

Vocabulary of one engine step: ``num_prefill_tokens`` prompt tokens computed this step (all prefill chunks),
``prefill_context_tokens`` the tokens those chunks attend to that were computed before them (cached prefix
or earlier chunks), ``num_decode_seqs`` sequences generating one token each, ``decode_context_tokens`` the
sum of their context lengths (tokens in KV) at the start of the step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from slosched.core.request import Request


@dataclass(slots=True, frozen=True)
class StepObservation:
    """``num_steps`` identical-shape engine steps and their measured durations (seconds).

    Decode context grows by ``num_decode_seqs`` tokens per step; a run of identical decode steps is
    reported as one observation so fitting stays cheap when the simulator fast-forwards.
    """

    num_prefill_tokens: int
    prefill_context_tokens: int
    num_decode_seqs: int
    decode_context_tokens: int
    durations_s: Sequence[float]


class StepTimeModel(Protocol):
    """Ground truth for simulated instances: seconds per engine step, without noise."""

    def step_time_s(
        self,
        num_prefill_tokens: int,
        prefill_context_tokens: int,
        num_decode_seqs: int,
        decode_context_tokens: int,
    ) -> float: ...

    def decode_step_terms(self, num_decode_seqs: int) -> tuple[float, float]:
        """``(base_s, per_token_s)``: a decode-only step of ``b`` sequences with context ``c`` lasts exactly
        ``base_s + (c + b) * per_token_s`` (decode steps are affine in the KV they read)."""
        ...

    def decode_run_s(self, num_decode_seqs: int, decode_context_tokens: int, num_steps: int) -> np.ndarray:
        """Durations of ``num_steps`` consecutive decode-only steps (context grows by
        ``num_decode_seqs`` per step). The simulator uses this for every decode-only step, one step or many,
        so stepping and fast-forwarding see bit-identical durations."""
        ...


class StepPredictor(Protocol):
    """Belief about an instance's step time, learned from observed steps only.

    Optional: ``observe_steps(steps)``, ``observe(StepObservation(*step))`` for each tuple of
    ``StepObservation``'s fields in order; the simulator hands a predictor that has it all the steps of a
    refit tick in one call (``LinearStepPredictor`` has it).
    """

    def predict_s(
        self,
        num_prefill_tokens: int,
        prefill_context_tokens: int,
        num_decode_seqs: int,
        decode_context_tokens: int,
    ) -> float: ...

    def observe(self, observation: StepObservation) -> None: ...


class OutputLengthPredictor(Protocol):
    """Belief about a request's output length, learned from completed requests only."""

    def predict(self, request: Request) -> float: ...

    def observe(self, request: Request, output_tokens: int) -> None: ...
