"""The Dynamic Priority Updater: remaining-duration priorities, the reuse rule, the starvation guard."""

from __future__ import annotations

import pytest

from slosched.core.views import StepObservation
from slosched.policies.engine.ordering.relserve_priority import DynamicPriorityUpdater
from tests.policies.engine.relserve_fakes import FakeEngine, FixedLines, make_rows, running, spec


def dpu(threshold: float | None = None) -> DynamicPriorityUpdater:
    return DynamicPriorityUpdater(FixedLines(0.001, 0.01, 0.002, 0.02), 4, threshold)


def test_priority_is_the_predicted_remaining_duration() -> None:
    # 3 rows x 200 uncached tokens in one prefill batch, then 3 decode steps (predicted 4 outputs).
    engine = FakeEngine(spec(), waiting=make_rows("a", 3))
    priority = dpu().refresh(engine)
    assert priority["a"] == pytest.approx((0.6 + 0.01) + 3 * (0.006 + 0.02))


def test_shorter_job_sorts_first_and_rows_of_a_job_stay_together() -> None:
    big, small = make_rows("big", 8), make_rows("small", 2, arrival_s=1.0)
    engine = FakeEngine(spec(), waiting=[*big, *small], now_s=1.0)
    policy = dpu()
    order = sorted(engine.waiting, key=lambda seq: policy.key(seq, engine))
    assert [seq.request.job_id for seq in order] == ["small"] * 2 + ["big"] * 8
    assert policy.top_waiting_job == "small"


def test_cached_template_lowers_the_estimate() -> None:
    rows = make_rows("a", 4)
    cold = dpu().refresh(FakeEngine(spec(), waiting=rows))["a"]
    warm_engine = FakeEngine(spec(), waiting=rows, cached={seq.request.id: 96 for seq in rows})
    warm = dpu().refresh(warm_engine)["a"]
    assert warm == pytest.approx(cold - 0.001 * 4 * 96)


def test_reuse_rule_keeps_all_waiting_jobs_and_recomputes_running_ones() -> None:
    a, b = make_rows("a", 3), make_rows("b", 5)
    engine = FakeEngine(spec(), waiting=[*a, *b])
    policy = DynamicPriorityUpdater(num_samples=4, starvation_unit_wait_s=None)
    first = dict(policy.refresh(engine))
    assert (policy.num_recomputed, policy.num_reused) == (2, 0)
    # New step observations change the fitted lines, yet jobs that were and still are all waiting keep
    # their value.
    policy.observe_step(StepObservation(4000, 0, 0, 0, [0.9]))
    policy.observe_step(StepObservation(100, 0, 0, 0, [0.05]))
    engine.now_s = 0.5
    assert policy.refresh(engine) == first
    assert (policy.num_recomputed, policy.num_reused) == (2, 2)
    # One row of "a" starts running: "a" is recomputed, "b" still reused.
    engine.waiting = [*a[1:], *b]
    engine.running_seqs = running([a[0]])
    engine.now_s = 1.0
    policy.refresh(engine)
    assert (policy.num_recomputed, policy.num_reused) == (3, 3)
    # Same stamp (time, queue sizes): the refresh is not repeated within one iteration.
    policy.refresh(engine)
    assert policy.meter.num_dpu_updates == 3


def test_running_rows_contribute_only_their_remaining_decode() -> None:
    rows = running(make_rows("a", 2, predicted=6.0), generated=2)
    engine = FakeEngine(spec(), running_seqs=rows)
    assert dpu().refresh(engine)["a"] == pytest.approx(4 * (0.004 + 0.02))


def test_starvation_guard_zeroes_priority_above_the_unit_wait_threshold() -> None:
    old, new = make_rows("old", 2, arrival_s=0.0), make_rows("new", 1, arrival_s=2.4)
    policy = dpu(threshold=1.0)
    engine = FakeEngine(spec(), waiting=[*old, *new], now_s=2.5)
    # old: 2.5 s / 2 rows = 1.25 > 1.0 -> priority 0 although it is the longer job.
    priority = policy.refresh(engine)
    assert priority["old"] == 0.0 and priority["new"] > 0
    assert policy.top_waiting_job == "old"
    engine.now_s, engine.waiting = 1.9, [*old, *new]
    fresh = dpu(threshold=1.0).refresh(engine)  # 1.9 / 2 = 0.95: not yet starving
    assert fresh["old"] > fresh["new"] > 0
