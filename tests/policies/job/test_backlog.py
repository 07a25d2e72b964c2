"""Job-level admission (``policies/job/backlog.py`` and ``critical-path``'s ``backlog``): a job is judged by
the work queued ahead of it, relegated work aside, and a policy that does not read the backlog is asked as
before (the runtimes build no views for it)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.belief import StepPredictor
from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import JobView
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.cluster.routers.prism import PrismModel
from slosched.policies.job.backlog import feasible_waiting_tokens, stage_latency_s
from slosched.policies.job.base import stage_decider
from slosched.policies.job.critical_path import CriticalPathBudget, CriticalPathParams
from slosched.policies.job.deadline import DeadlineBudget
from tests.conftest import make_instance


@dataclass
class FakeView:
    """The parts of an ``InstanceView`` the backlog reads (no exported engine state: PRISM estimates)."""

    waiting_requests: list[Request] = field(default_factory=list)
    num_running: int = 0
    spec: InstanceSpec = field(default_factory=lambda: make_instance("i"))
    step_predictor: StepPredictor = field(default_factory=LinearStepPredictor)
    exported: None = None
    num_kv_blocks: int = 4096
    num_free_kv_blocks: int = 4096
    cached: dict[str, int] = field(default_factory=dict)  # prompt tokens its prefix cache holds, by request id

    def cached_prefix_tokens(self, request: Request) -> int:
        return self.cached.get(request.id, 0)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting_requests)

    @property
    def waiting_prefill_tokens(self) -> int:
        return sum(request.prompt_tokens for request in self.waiting_requests)

    @property
    def outstanding_decode_tokens(self) -> float:
        return sum(max(request.predicted_output_tokens, 1.0) for request in self.waiting_requests)


def call(index: int, prompt: int = 1000, best_effort: bool = False, deadline_s: float = math.inf) -> Request:
    request = Request(f"r{index}", f"j{index}", "s", "t", prompt, 64, 0.0, 0.0, deadline_s)
    request.predicted_output_tokens = 50.0
    request.best_effort = best_effort
    return request


def test_relegated_work_is_not_counted() -> None:
    view = FakeView([call(0, 4000), call(1, 3000, best_effort=True)])
    assert feasible_waiting_tokens(view) == 4000  # type: ignore[arg-type]


@given(queued=st.lists(st.integers(min_value=1, max_value=8000), max_size=12))
def test_more_feasible_work_queued_never_makes_a_call_sooner(queued: list[int]) -> None:
    model = PrismModel()
    new = [call(99)]
    empty = stage_latency_s(new, [FakeView()], model)  # type: ignore[list-item]
    busy = stage_latency_s(new, [FakeView([call(i, p) for i, p in enumerate(queued)])], model)  # type: ignore[list-item]
    assert busy >= empty > 0
    # The least over instances: an idle one beside the busy one gives the idle one's latency.
    both = [FakeView([call(i, p) for i, p in enumerate(queued)]), FakeView()]
    assert stage_latency_s(new, both, model) == empty  # type: ignore[arg-type]


def test_the_backlog_relegates_what_alone_would_have_kept() -> None:
    instances = [make_instance("i")]
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True)
    new = [call(0), call(300)]  # two calls at once, as a relQuery's rows: a single call is judged alone
    alone_s = policy.remaining_min_s(job(10.0), new)
    deadline = 3.0 * alone_s  # alone it makes it with room
    assert not policy.decide(job(deadline), new, 0.0).best_effort
    idle = [FakeView(spec=instances[0])]
    assert not policy.decide_with_backlog(job(deadline), new, 0.0, idle).best_effort  # type: ignore[arg-type]
    jammed = [FakeView([call(i, 8000) for i in range(1, 200)], spec=instances[0])]
    assert policy.decide_with_backlog(job(deadline), new, 0.0, jammed).best_effort  # type: ignore[arg-type]
    # A job of one call in the same queue is judged alone: the engine's triage demotes it if it must.
    assert not policy.decide_with_backlog(job(deadline), new[:1], 0.0, jammed).best_effort  # type: ignore[arg-type]
    # The same queue, all of it relegated, delays nobody feasible: kept.
    relegated = [FakeView([call(i, 8000, best_effort=True) for i in range(1, 200)], spec=instances[0])]
    assert not policy.decide_with_backlog(job(deadline), new, 0.0, relegated).best_effort  # type: ignore[arg-type]


def job(deadline_s: float) -> JobView:
    return JobView.at_release("j", "single", "t", 0.0, deadline_s, "s", ())


def test_runtimes_ask_the_backlog_only_of_a_policy_that_reads_it() -> None:
    asked: list[int] = []

    def views() -> Sequence[FakeView]:
        asked.append(1)
        return [FakeView()]

    alone = CriticalPathBudget([LinearStepPredictor()], backlog=False)
    reading = CriticalPathBudget([LinearStepPredictor()], backlog=True)
    for policy in (alone, DeadlineBudget()):
        stage_decider(policy)(job(5.0), [call(0)], 0.0, views)  # type: ignore[arg-type]
    assert asked == []  # no views built for a policy that judges alone
    stage_decider(reading)(job(5.0), [call(0)], 0.0, views)  # type: ignore[arg-type]
    assert asked == [1]


def two_rows(index: int) -> list[Request]:
    return [call(index), call(index + 300)]


def later_stage(deadline_s: float, job_id: str = "j") -> JobView:
    return JobView.at_release(job_id, "workflow", "t", 0.0, deadline_s, "s2", ("s1",))


def test_an_admitted_job_meets_the_backlog_once_at_arrival() -> None:
    """``backlog_stages: arrival`` (the default): a job admitted at arrival is judged alone at its later
    stages, however jammed the queue it meets then; ``every`` re-judges each stage through the queue."""
    spec = make_instance("i")
    idle = [FakeView(spec=spec)]
    jammed = [FakeView([call(i, 8000) for i in range(1, 200)], spec=spec)]
    for stages, relegated_later in (("arrival", False), ("every", True)):
        policy = CriticalPathBudget([LinearStepPredictor()], backlog=True, backlog_stages=stages)
        deadline = 3.0 * policy.remaining_min_s(job(10.0), two_rows(0))
        assert not policy.decide_with_backlog(job(deadline), two_rows(0), 0.0, idle).best_effort  # type: ignore[arg-type]
        decision = policy.decide_with_backlog(later_stage(deadline), [call(1)], 0.0, jammed)  # type: ignore[arg-type]
        assert decision.best_effort is relegated_later
        # Hopeless even alone: demoted at any stage, whatever the setting.
        late = policy.decide_with_backlog(later_stage(deadline), [call(2)], 2.0 * deadline, idle)  # type: ignore[arg-type]
        assert late.best_effort


def test_a_job_relegated_at_arrival_stays_relegated() -> None:
    spec = make_instance("i")
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True)
    deadline = 3.0 * policy.remaining_min_s(job(10.0), two_rows(0))
    jammed = [FakeView([call(i, 8000) for i in range(1, 200)], spec=spec)]
    assert policy.decide_with_backlog(job(deadline), two_rows(0), 0.0, jammed).best_effort  # type: ignore[arg-type]
    # The queue has drained by its next stage, which alone would make it: the job stays relegated.
    idle = [FakeView(spec=spec)]
    assert policy.decide_with_backlog(later_stage(deadline), [call(1)], 0.0, idle).best_effort  # type: ignore[arg-type]
    # Another job at the same moment is admitted: the memory is per job.
    assert not policy.decide_with_backlog(job(deadline), two_rows(2), 0.0, idle).best_effort  # type: ignore[arg-type]


def test_an_unknown_backlog_stages_names_the_allowed_ones() -> None:
    with pytest.raises(ConfigError, match=r"backlog_stages.*allowed: \['arrival', 'every'\]"):
        CriticalPathParams(backlog_stages="first")
