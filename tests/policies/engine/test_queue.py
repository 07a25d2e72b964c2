"""PolicyQueue: key cache, ordering, the admission pass and its stop rule, sync, wake-ups, feasibility."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.core.views import EngineView, SeqView, StepMode, StepPlan
from slosched.perf.linear import LinearStepPredictor
from slosched.policies.engine.admission.always import AlwaysAdmit
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.ordering.fcfs import FcfsOrdering
from slosched.policies.engine.queue import DEFAULT_WAKE_S, UNLIMITED_TOKENS, PolicyQueue, fits_model_len
from slosched.policies.fairness.spec import FairShareSpec

SPEC = InstanceSpec(name="i", gpu="H100", model="Llama-3-8B")


@dataclass(slots=True, eq=False)
class Seq:
    request: Request
    num_prompt_tokens: int
    enqueue_s: float = 0.0
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    first_token_s: float | None = None
    num_preemptions: int = 0
    sort_key: Any = None


@dataclass(slots=True)
class Engine:
    now_s: float = 0.0
    spec: InstanceSpec = SPEC
    num_running: int = 0
    running_seqs: list[Seq] = field(default_factory=list)
    waiting: list[Seq] = field(default_factory=list)
    num_free_kv_blocks: int = 100
    num_kv_blocks: int = 100
    step_predictor: LinearStepPredictor = field(default_factory=LinearStepPredictor)

    def cached_prefix_tokens(self, request: Request) -> int:
        return 0


def make_seq(name: str, prompt: int = 10, arrival: float = 0.0, priority: float = 0.0) -> Seq:
    request = Request(
        id=name,
        job_id=name,
        stage="s",
        template="t",
        prompt_tokens=prompt,
        max_output_tokens=8,
        arrival_s=arrival,
        job_arrival_s=arrival,
        priority=priority,
    )
    return Seq(request, prompt, arrival)


class CountingOrdering:
    """Key = request priority; counts key calls."""

    time_invariant = True

    def __init__(self, static: bool) -> None:
        self.static_keys = static
        self.calls: list[str] = []

    def key(self, seq: SeqView, engine: EngineView) -> Any:
        self.calls.append(seq.request.id)
        return seq.request.priority


class Defer:
    """Defers the named requests."""

    def __init__(self, deferred: set[str], time_invariant: bool = True) -> None:
        self.deferred = deferred
        self.time_invariant = time_invariant

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        return seq.request.id not in self.deferred


class Batching:
    time_invariant = True

    def plan(self, engine: EngineView) -> StepPlan:
        return StepPlan(StepMode.MIXED, 100, 10, True)


class Hinting(Batching):
    time_invariant = False

    def __init__(self, at: float | None) -> None:
        self.at = at

    def next_change_s(self, engine: EngineView) -> float | None:
        return self.at


def make_queue(ordering: Any = None, admission: Any = None, batching: Any = None, **kwargs: Any) -> PolicyQueue[Seq]:
    policy = EnginePolicy("t", ordering or FcfsOrdering(), admission or AlwaysAdmit(), batching or Batching())
    return PolicyQueue(policy, **kwargs)


def ids(seqs: list[Seq]) -> list[str]:
    return [seq.request.id for seq in seqs]


def test_static_keys_are_computed_once_and_kept_sorted_on_push() -> None:
    ordering = CountingOrdering(static=True)
    queue, engine = make_queue(ordering), Engine()
    waiting = queue.waiting
    for name, priority in [("a", 2), ("b", 1), ("c", 2), ("d", 0)]:
        queue.push(make_seq(name, priority=priority), engine)
    assert ids(queue.waiting) == ["d", "b", "a", "c"]  # ties after equal keys (arrival order)
    queue.order(engine)
    queue.order(engine)
    assert ordering.calls == ["a", "b", "c", "d"]  # never recomputed while waiting
    assert queue.waiting is waiting


def test_dynamic_keys_are_recomputed_every_order_and_ties_keep_the_previous_order() -> None:
    ordering = CountingOrdering(static=False)
    queue, engine = make_queue(ordering), Engine()
    seqs = [make_seq(name, priority=p) for name, p in [("a", 1), ("b", 0), ("c", 1)]]
    for seq in seqs:
        queue.push(seq, engine)
    assert ids(queue.order(engine)) == ["b", "a", "c"]
    seqs[2].request.priority = 0.0  # c now ties with b: b keeps its place ahead
    assert ids(queue.order(engine)) == ["b", "c", "a"]
    assert len(ordering.calls) == 6


def test_admission_pass_stop_rule_slots_room_and_capacity() -> None:
    queue, engine = make_queue(admission=Defer({"b"})), Engine()
    for index, name in enumerate("abcde"):
        queue.push(make_seq(name, arrival=float(index)), engine)
    queue.order(engine)
    assert ids(queue.admission_pass(engine, 2, UNLIMITED_TOKENS)) == ["a", "c"]  # b deferred: skipped
    assert ids(queue.admission_pass(engine, 9, 25, lambda seq, room: 10)) == ["a", "c", "d"]  # room 25 -> -5
    stop_at_d = lambda seq, room: None if seq.request.id == "d" else 1  # noqa: E731
    assert ids(queue.admission_pass(engine, 9, 100, stop_at_d)) == ["a", "c"]  # strict order: e never tried
    assert ids(queue.admission_pass(engine, 0, 100)) == []
    assert len(queue) == 5  # a pass never removes: the runtime does, after it
    queue.remove([queue.waiting[0], queue.waiting[2]])
    assert ids(queue.waiting) == ["b", "d", "e"]


class DeferAndClose(Defer):
    """Defers the named requests; after deferring ``closer`` it says no later request of the pass can join."""

    def __init__(self, deferred: set[str], closer: str) -> None:
        super().__init__(deferred)
        self.closer = closer
        self.asked: list[str] = []

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        self.asked.append(seq.request.id)
        return super().admit(seq, engine)

    def pass_closed(self, engine: EngineView) -> bool:
        return self.asked[-1] == self.closer


def test_admission_pass_ends_where_the_admission_closes_it() -> None:
    admission = DeferAndClose({"b", "c"}, closer="c")
    queue, engine = make_queue(admission=admission), Engine()
    for index, name in enumerate("abcde"):
        queue.push(make_seq(name, arrival=float(index)), engine)
    assert ids(queue.admission_pass(engine, 9, UNLIMITED_TOKENS)) == ["a"]  # b deferred, pass open; c closes it
    assert admission.asked == ["a", "b", "c"]  # d and e never asked
    # In the fair order the head may come after other calls and start the part's pass anew: no early end.
    admission.asked.clear()
    queue.share_fairly(FairShareSpec((("default", 1.0),)))
    assert ids(queue.admission_pass(engine, 9, UNLIMITED_TOKENS)) == ["a", "d", "e"]
    assert admission.asked == ["a", "b", "c", "d", "e"]


def test_sync_keys_new_arrivals_only_and_rekeys_a_request_that_comes_back() -> None:
    ordering = CountingOrdering(static=True)
    queue, engine = make_queue(ordering), Engine()
    a, b, c = make_seq("a", priority=1), make_seq("b", priority=0), make_seq("c", priority=2)
    queue.sync([a, b], engine)
    assert ids(queue.order(engine)) == ["b", "a"]
    queue.sync([a, c], engine)  # b left (admitted)
    assert ordering.calls == ["a", "b", "c"]
    b.request.priority = 3.0  # preempted with more to prefill: a fresh wait, a fresh key
    queue.sync([b, a, c], engine)
    assert ids(queue.order(engine)) == ["a", "c", "b"]
    assert ordering.calls == ["a", "b", "c", "b"]


def test_engine_fcfs_keeps_the_runtime_order() -> None:
    engine = Engine()
    late, early = make_seq("late", arrival=5.0), make_seq("early", arrival=1.0)  # late was preempted: first
    owned = make_queue(engine_fcfs=True)
    owned.sync([late, early], engine)
    assert ids(owned.order(engine)) == ["late", "early"]
    plain = make_queue()
    plain.sync([late, early], engine)
    assert ids(plain.order(engine)) == ["early", "late"]


def test_next_wake() -> None:
    engine = Engine(now_s=3.0)
    assert make_queue().next_wake_s(engine) is None  # time-invariant: only queue changes matter
    assert make_queue(admission=Defer(set(), time_invariant=False)).next_wake_s(engine) == 3.0 + DEFAULT_WAKE_S
    assert make_queue(batching=Hinting(3.004)).next_wake_s(engine) == 3.004
    assert make_queue(batching=Hinting(None)).next_wake_s(engine) is None
    both = make_queue(admission=Defer(set(), time_invariant=False), batching=Hinting(7.0))
    assert both.next_wake_s(engine) == 3.0 + DEFAULT_WAKE_S


def test_gated() -> None:
    assert not make_queue().gated
    assert make_queue(admission=Defer(set())).gated


@pytest.mark.parametrize(
    ("prompt", "max_output", "fits"),
    [
        (2047, 1, True),
        (2048, 1, False),
        (2047, None, True),
        (2048, None, False),
        (1000, 1048, True),
        (1000, 1049, False),
    ],
)
def test_fits_model_len_is_vllms_rule(prompt: int, max_output: int | None, fits: bool) -> None:
    assert fits_model_len(prompt, max_output, 2048) is fits
