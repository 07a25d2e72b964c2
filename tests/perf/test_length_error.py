"""An output-length predictor's error on a workload, measured by predicting each call before learning it."""

from __future__ import annotations

import math

import pytest

from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.request import Request
from slosched.perf.length_error import compare_predictors, prequential_error
from slosched.perf.output_length import HistoryOutputPredictor


def _job(index: int, prompt: int, output: int) -> JobSpec:
    stage = StageSpec("s", (CallSpec(prompt, output, max_output_tokens=1000),))
    return JobSpec(f"j{index}", JobKind.SINGLE, float(index), (stage,), template="t")


def _two_clusters(count: int) -> list[JobSpec]:
    """Short prompts answer briefly, long ones at length: one template, two applications."""
    return [_job(i, 100 if i % 2 else 4000, 20 if i % 2 else 600) for i in range(count)]


class _Truth:
    """Knows every job's output by prompt length (the two-cluster workload's rule)."""

    def predict(self, request: Request) -> float:
        return 20.0 if request.prompt_tokens < 1000 else 600.0

    def observe(self, request: Request, output_tokens: int) -> None:
        pass


def test_a_perfect_predictor_has_no_error_and_ranks_perfectly() -> None:
    error = prequential_error(_two_clusters(40), _Truth())
    assert error.calls == 40 and error.mean_abs_error_tokens == 0.0 and error.relative_error == 0.0
    assert error.rank_correlation == pytest.approx(1.0)


def test_bucket_mode_beats_the_mean_where_prompt_length_tells_the_clusters_apart() -> None:
    jobs = _two_clusters(200)
    figures = compare_predictors(
        jobs, {"mean": HistoryOutputPredictor, "bucket": lambda: HistoryOutputPredictor(mode="bucket")}
    )
    mean, bucket = figures["mean"], figures["bucket"]
    assert mean.calls == bucket.calls == 200
    # The mean sits between the clusters (~290 tokens off on every call); the buckets learn each after 5 calls.
    assert mean.mean_abs_error_tokens > 250 and bucket.mean_abs_error_tokens < 30
    assert bucket.rank_correlation > 0.9 > mean.rank_correlation


def test_predictions_come_before_the_truth_is_shown() -> None:
    """The first call is predicted by the prior: nothing was observed yet."""
    error = prequential_error([_job(0, 100, 1000)], HistoryOutputPredictor(default_tokens=128))
    assert error.mean_abs_error_tokens == pytest.approx(1000 - 128)
    assert math.isnan(error.rank_correlation)  # one call: no order to compare


def test_no_calls_give_nan_figures() -> None:
    error = prequential_error([], HistoryOutputPredictor())
    assert error.calls == 0 and math.isnan(error.relative_error)
    assert set(error.as_json()) == {"calls", "mean_abs_error_tokens", "relative_error", "rank_correlation"}
