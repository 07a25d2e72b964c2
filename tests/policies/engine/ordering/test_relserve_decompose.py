"""Batch decomposition against hand-worked cases, and the sampled prefix-cache miss ratio."""

from __future__ import annotations

import math

import pytest

from slosched.core.request import PrefixId, Request
from slosched.policies.engine.ordering.relserve_decompose import (
    BatchLimits,
    LineCoefficients,
    WaitingWork,
    estimate_miss_ratio,
    remaining_duration_s,
)

LINES = LineCoefficients(ap=0.001, bp=0.01, ad=0.002, bd=0.02)


def limits(max_running: int = 10, kv: int = 1000, budget: int = 1000) -> BatchLimits:
    return BatchLimits(max_batched_tokens=budget, max_running=max_running, num_kv_blocks=kv, block_size=16)


def test_one_wave_two_prefill_batches_then_decode() -> None:
    # 4 x 300 tokens, budget 1000 -> batches of 3 and 1 (2 * bp); then 2 decode steps of 4 requests.
    work = WaitingWork(count=4, uncached_tokens=300, output_tokens=3, kv_blocks=20)
    expected = (0.001 * 1200 + 2 * 0.01) + 2 * (0.002 * 4 + 0.02)
    assert remaining_duration_s(work, [], limits(), LINES) == pytest.approx(expected)


def test_running_requests_only_decode() -> None:
    nothing = WaitingWork(0, 0.0, 1, 1)
    assert remaining_duration_s(nothing, [(5, 2, 10)], limits(), LINES) == pytest.approx(5 * (0.004 + 0.02))


def test_groups_finish_at_different_steps() -> None:
    # 2 requests with 3 steps left, 1 with 1: one step of 3, then two steps of 2.
    nothing = WaitingWork(0, 0.0, 1, 1)
    expected = (0.006 + 0.02) + 2 * (0.004 + 0.02)
    assert remaining_duration_s(nothing, [(3, 2, 5), (1, 1, 5)], limits(), LINES) == pytest.approx(expected)


@pytest.mark.parametrize("bound", ["slots", "kv"])
def test_waves_when_slots_or_kv_run_out(bound: str) -> None:
    # Only 2 of 3 requests fit: prefill 2, decode 1 step, prefill the third, decode 1 step.
    caps = limits(max_running=2) if bound == "slots" else limits(kv=50)
    work = WaitingWork(count=3, uncached_tokens=100, output_tokens=2, kv_blocks=20)
    expected = (0.2 + 0.01) + (0.004 + 0.02) + (0.1 + 0.01) + (0.002 + 0.02)
    assert remaining_duration_s(work, [], caps, LINES) == pytest.approx(expected)


def test_running_requests_hold_slots_until_they_finish() -> None:
    # One slot is taken by a request with 2 steps left: the waiting request waits for it.
    work = WaitingWork(count=1, uncached_tokens=100, output_tokens=2, kv_blocks=1)
    expected = 2 * (0.002 + 0.02) + (0.1 + 0.01) + (0.002 + 0.02)
    assert remaining_duration_s(work, [(2, 1, 1)], limits(max_running=1), LINES) == pytest.approx(expected)


def test_oversized_request_still_runs_alone() -> None:
    work = WaitingWork(count=2, uncached_tokens=2000, output_tokens=1, kv_blocks=200)
    total = remaining_duration_s(work, [], limits(kv=100), LINES)
    assert total == pytest.approx(2 * (2.0 + 0.01))


def _request(index: int, prompt: int) -> Request:
    return Request(
        id=f"r{index}",
        job_id="j",
        stage="rows",
        template="t",
        prompt_tokens=prompt,
        max_output_tokens=8,
        arrival_s=0.0,
        job_arrival_s=0.0,
        prefix=PrefixId(1, 6, index + 2, prompt // 16 - 6),
    )


def test_sampled_miss_ratio_close_to_exact_count() -> None:
    # A constructed cache: the 96-token template (6 blocks) of every row is cached, the rows are not.
    requests = [_request(i, 150 + (i * 37) % 200) for i in range(60)]

    def cached(request: Request) -> int:
        return 96

    exact = sum(r.prompt_tokens - 96 for r in requests)
    miss = estimate_miss_ratio(requests, cached, block_size=16, num_samples=4)
    estimate = miss * sum(r.prompt_tokens for r in requests)
    assert estimate == pytest.approx(exact, rel=0.1)
    everything = estimate_miss_ratio(requests, cached, block_size=16, num_samples=100)
    assert everything * sum(r.prompt_tokens for r in requests) == pytest.approx(exact)


def test_miss_ratio_never_counts_the_last_prompt_token_as_cached() -> None:
    request = _request(0, 32)
    assert estimate_miss_ratio([request], lambda _: 32, 16, 4) == pytest.approx(16 / 32)
    assert estimate_miss_ratio([], lambda _: 0, 16, 4) == 1.0
    assert math.isfinite(estimate_miss_ratio([request], lambda _: 0, 16, 4))
