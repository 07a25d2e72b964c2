"""How well an output-length predictor does on a workload, measured without a simulation.

``prequential_error`` walks a workload's calls in arrival order and asks the predictor for each call's
output before showing it the true one ("predict, then learn"), as a runtime would if every call completed
before the next arrived. A run learns later than that (a call's length is known only once it completes), so
these figures are a little better than what a run sees; they rank predictors on the same calls, and they are
what ``slosched bench stack`` reports per workload (the issue's "error reported per workload").
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy.stats import spearmanr

from slosched.core.belief import OutputLengthPredictor
from slosched.core.job import JobSpec
from slosched.core.request import Request

DEFAULT_MAX_TOKENS = 2048  # a call without a client limit: the cap its prediction is clipped to


@dataclass(slots=True, frozen=True)
class LengthError:
    """A predictor's error over ``calls`` calls: mean absolute error in tokens, that error over the mean true
    output (comparable across workloads), and the Spearman rank correlation of predictions with the truth
    (what a shortest-first order needs: 1 orders perfectly, 0 not at all)."""

    calls: int
    mean_abs_error_tokens: float
    relative_error: float
    rank_correlation: float

    def as_json(self) -> dict[str, Any]:
        return {
            "calls": self.calls,
            "mean_abs_error_tokens": self.mean_abs_error_tokens,
            "relative_error": self.relative_error,
            "rank_correlation": self.rank_correlation,
        }


def prequential_error(jobs: Sequence[JobSpec], predictor: OutputLengthPredictor) -> LengthError:
    """``predictor``'s error over every call of ``jobs`` in arrival order, each predicted before it is
    observed; NaN figures without calls."""
    predicted: list[float] = []
    truth: list[int] = []
    for job in sorted(jobs, key=lambda job: job.arrival_s):
        for stage in job.stages:
            for index, call in enumerate(stage.calls):
                limit = call.max_output_tokens or DEFAULT_MAX_TOKENS
                request = Request(
                    f"{job.id}/{stage.name}/{index}",
                    job.id,
                    stage.name,
                    job.template,
                    call.input_tokens,
                    limit,
                    job.arrival_s,
                    job.arrival_s,
                )
                predicted.append(float(predictor.predict(request)))
                truth.append(call.output_tokens)
                predictor.observe(request, call.output_tokens)
    if not truth:
        return LengthError(0, float("nan"), float("nan"), float("nan"))
    guess, real = np.asarray(predicted), np.asarray(truth, dtype=float)
    error = float(np.mean(np.abs(guess - real)))
    constant = bool(np.all(guess == guess[0]) or np.all(real == real[0]))
    rank = float("nan") if constant else float(spearmanr(guess, real).statistic)
    return LengthError(len(truth), error, error / float(np.mean(real)), rank)


def compare_predictors(
    jobs: Sequence[JobSpec], factories: Mapping[str, Callable[[], OutputLengthPredictor]]
) -> dict[str, LengthError]:
    """Each named predictor's ``prequential_error`` on the same calls (a fresh predictor each)."""
    return {name: prequential_error(jobs, factory()) for name, factory in factories.items()}
