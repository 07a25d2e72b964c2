"""Admission ``triage``'s concurrency cap: no call joins once ``max_concurrency`` run (counting this pass's
admissions), feasible or not; none leaves the instance's own limit; the preset checks the key. Its TPOT guard:
the decode step stays within the share of the batch's tightest TPOT SLO, except a call alone. Its ``pass_closed``:
a pass that stops where it says so admits exactly what a pass asking every call admits, and stops early when only
calls of relegated jobs are left behind the strict tier, or only best-effort calls once their share is full."""

from __future__ import annotations

from dataclasses import dataclass, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.policies.engine.admission.triage import TriageAdmission, TriageParams
from slosched.policies.engine.presets.deadline_triage import DeadlineTriageParams
from tests.policies.engine.deadline_fakes import FakeEngine, FakeSeq, call


@given(cap=st.integers(1, 8), running=st.integers(0, 8), waiting=st.integers(0, 10))
def test_the_cap_bounds_running_plus_admitted(cap: int, running: int, waiting: int) -> None:
    admission = TriageAdmission(best_effort_share=1.0, max_concurrency=cap)
    seqs = [FakeSeq(call(f"w{i}", deadline_s=100.0)) for i in range(waiting)]
    engine = FakeEngine(now_s=1.0, waiting=seqs, running=[FakeSeq(call(f"r{i}")) for i in range(running)])
    admitted = sum(admission.admit(seq, engine) for seq in seqs)
    assert admitted == max(0, min(waiting, cap - running))


def test_no_cap_leaves_the_instances_limit_to_the_engine() -> None:
    admission = TriageAdmission(best_effort_share=0.25)
    seqs = [FakeSeq(call(f"w{i}", deadline_s=100.0)) for i in range(12)]
    engine = FakeEngine(now_s=1.0, waiting=seqs)
    assert all(admission.admit(seq, engine) for seq in seqs)  # feasible calls join eagerly


def test_bad_caps_fail_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"triage\.max_concurrency"):
        TriageParams(max_concurrency=0)
    with pytest.raises(ConfigError, match=r"deadline-triage\.max_concurrency.*triage"):
        DeadlineTriageParams(triage=False, max_concurrency=4)


# ---- the TPOT guard (``tpot_guard.py``) ------------------------------------------------------------------------


@dataclass
class StepCost:
    """A belief model whose decode step costs ``fixed_s + per_seq_s`` per decoding call (context is free)."""

    fixed_s: float = 0.001
    per_seq_s: float = 0.001

    def predict_s(self, prefill: int, prefill_context: int, decoding: int, context: int) -> float:
        return self.fixed_s + self.per_seq_s * decoding

    def belief_state(self) -> tuple[float, float]:  # never refits: the best-effort count may read it at any time
        return (self.fixed_s, self.per_seq_s)


class Stateless:
    """A belief without ``belief_state``."""

    def predict_s(self, prefill: int, prefill_context: int, decoding: int, context: int) -> float:
        return 0.001 + 0.001 * decoding


@dataclass
class Seq(FakeSeq):
    num_computed_tokens: int = 100
    num_prompt_tokens: int = 100


def _guarded(share: float, running: int, waiting: int, tpot: float | None, cost: StepCost) -> tuple[int, FakeEngine]:
    admission = TriageAdmission(best_effort_share=1.0, tpot_guard=share)
    seqs = [Seq(call(f"w{i}", deadline_s=100.0, tpot=tpot)) for i in range(waiting)]
    engine = FakeEngine(now_s=1.0, waiting=seqs, running=[Seq(call(f"r{i}", tpot=tpot)) for i in range(running)])
    engine.step_predictor = cost  # type: ignore[assignment]
    return sum(admission.admit(seq, engine) for seq in seqs), engine


@given(
    share=st.sampled_from([0.5, 0.8, 1.0]),
    running=st.integers(0, 12),
    waiting=st.integers(0, 12),
    tpot_ms=st.integers(2, 20),
)
def test_the_guard_keeps_the_decode_step_within_the_share_of_the_tightest_tpot(
    share: float, running: int, waiting: int, tpot_ms: int
) -> None:
    cost = StepCost()
    admitted, _ = _guarded(share, running, waiting, tpot_ms / 1000, cost)
    batch = running + admitted
    fits = cost.predict_s(0, 0, batch, 0) <= share * tpot_ms / 1000 + 1e-12
    assert admitted == 0 or fits or (running == 0 and admitted == 1)  # an idle engine always takes a call
    more = cost.predict_s(0, 0, batch + 1, 0) <= share * tpot_ms / 1000
    assert admitted == waiting or not more  # and it stops only where one more would not fit


def test_the_guard_holds_calls_for_the_residents_tpot_and_lets_unbounded_batches_grow() -> None:
    admitted, _ = _guarded(0.8, running=3, waiting=10, tpot=0.010, cost=StepCost())
    assert admitted == 4  # steps of 4..7 calls (5-8 ms) fit 8 ms; an 8th call would make 9 ms
    assert _guarded(0.8, running=3, waiting=10, tpot=None, cost=StepCost())[0] == 10  # no TPOT SLO: no bound
    assert _guarded(0.8, running=0, waiting=3, tpot=0.001, cost=StepCost())[0] == 1  # idle: one, however slow


def _deadline_guarded(running: list[Seq], deadline_guard: bool = True, waiting: int = 10) -> int:
    """Calls admitted behind ``running`` (none with a TPOT SLO) at t=1 with share 0.8, steps of 1 + 1/call ms."""
    admission = TriageAdmission(best_effort_share=1.0, tpot_guard=0.8, deadline_guard=deadline_guard)
    seqs = [Seq(call(f"w{i}", deadline_s=100.0)) for i in range(waiting)]
    engine = FakeEngine(now_s=1.0, waiting=seqs, running=running)
    engine.step_predictor = StepCost()  # type: ignore[assignment]
    return sum(admission.admit(seq, engine) for seq in seqs)


def _stage(name: str, due_s: float, done: int = 0, relegated: bool = False) -> Seq:
    """A running workflow stage whose budget ends at ``due_s``, before its job's deadline (100 s)."""
    request = replace(call(name, deadline_s=100.0, budget_s=due_s, predicted=50.0), best_effort=relegated)
    return Seq(request, num_output_tokens=done)


def test_the_deadline_guard_holds_the_step_to_running_stages_slack_per_remaining_token() -> None:
    # Three stages due at 1.5 s with 50 tokens to go need steps of 10 ms; 0.8 of it admits steps of up to 7 calls.
    due = [_stage(f"r{i}", 1.5) for i in range(3)]
    assert _deadline_guarded(due) == 4
    assert _deadline_guarded(due, deadline_guard=False) == 10  # the TPOT guard alone: no TPOT SLO, no bound
    halfway = [_stage(f"r{i}", 1.5, done=25) for i in range(3)]
    assert _deadline_guarded(halfway, waiting=15) == 12  # 25 tokens in 0.5 s: 20 ms steps, 0.8 of it up to 15 calls
    # A stage that needs a step shorter than the batch's own decode step over the share is past saving; stages of
    # relegated jobs never count; a call on its job's own deadline has no later stage to pay for its lateness
    # (and holding calls back for such calls cost relQueries and mixed under overload): none holds anything.
    assert _deadline_guarded([_stage(f"r{i}", 1.01) for i in range(3)]) == 10
    assert _deadline_guarded([_stage(f"r{i}", 1.5, relegated=True) for i in range(3)]) == 10
    assert _deadline_guarded([Seq(call(f"r{i}", deadline_s=1.5, predicted=50.0)) for i in range(3)]) == 10


@given(
    dues=st.lists(st.floats(min_value=1.001, max_value=5.0), max_size=8),
    done=st.integers(0, 49),
    waiting=st.integers(0, 12),
)
def test_the_deadline_guard_only_ever_holds_calls_back(dues: list[float], done: int, waiting: int) -> None:
    running = [_stage(f"r{i}", due, done) for i, due in enumerate(dues)]
    guarded, unguarded = _deadline_guarded(running, True, waiting), _deadline_guarded(running, False, waiting)
    assert guarded <= unguarded
    assert guarded >= min(waiting, 1 if not running else 0)  # an idle engine always takes a call


def test_the_deadline_guard_needs_the_tpot_guards_share() -> None:
    with pytest.raises(ConfigError, match=r"triage\.deadline_guard.*tpot_guard"):
        TriageParams(deadline_guard=True)
    assert DeadlineTriageParams().deadline_guard  # on in the stack's engine


def test_a_bad_guard_fails_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"triage\.tpot_guard"):
        TriageParams(tpot_guard=0.0)
    with pytest.raises(ConfigError, match=r"deadline-triage\.tpot_guard.*> 0"):
        DeadlineTriageParams(tpot_guard=-1.0)
    assert DeadlineTriageParams().tpot_guard == 0.8  # the stack's engine guards TPOT by default


# ---- pass_closed (``queue.ClosesPass``) -----------------------------------------------------------------------


def _walk(admission: TriageAdmission, engine: FakeEngine, stop: bool) -> tuple[list[str], int]:
    """One pass over the queue (as ``PolicyQueue.admission_pass`` walks it): the admitted calls and how many
    calls were asked; with ``stop`` it ends at the admission's first ``pass_closed``."""
    admitted, asked = [], 0
    for seq in engine.waiting:
        asked += 1
        if admission.admit(seq, engine):
            admitted.append(seq.request.id)
        elif stop and admission.pass_closed(engine):  # type: ignore[arg-type]
            break
    return admitted, asked


def _triage(share: float, cap: int | None, guard: float | None) -> TriageAdmission:
    return TriageAdmission(best_effort_share=share, max_concurrency=cap, tpot_guard=guard)


@given(
    waiting=st.lists(st.tuples(st.booleans(), st.booleans(), st.sampled_from([None, 0.004, 0.02])), max_size=16),
    running=st.lists(st.tuples(st.booleans(), st.sampled_from([None, 0.004, 0.02])), max_size=8),
    share=st.sampled_from([0.0, 0.25, 1.0]),
    cap=st.sampled_from([None, 2, 6]),
    guard=st.sampled_from([None, 0.8]),
)
def test_a_pass_that_stops_where_triage_closes_it_admits_the_same_calls(
    waiting: list[tuple[bool, bool, float | None]],
    running: list[tuple[bool, float | None]],
    share: float,
    cap: int | None,
    guard: float | None,
) -> None:
    # Each waiting call: relegated or not, past its deadline (best effort) or not, its TPOT SLO.
    seqs = [
        Seq(replace(call(f"w{i}", deadline_s=0.5 if late else 100.0, tpot=tpot), best_effort=relegated))
        for i, (relegated, late, tpot) in enumerate(waiting)
    ]
    residents = [
        Seq(replace(call(f"r{i}", tpot=tpot), best_effort=relegated)) for i, (relegated, tpot) in enumerate(running)
    ]
    engine = FakeEngine(now_s=1.0, waiting=seqs, running=residents)
    engine.step_predictor = StepCost()  # type: ignore[assignment]
    every = _walk(_triage(share, cap, guard), engine, stop=False)
    stopped = _walk(_triage(share, cap, guard), engine, stop=True)
    assert stopped[0] == every[0]
    assert stopped[1] <= every[1]


def test_a_pass_stops_once_only_calls_of_relegated_jobs_are_left_behind_the_strict_tier() -> None:
    feasible = Seq(call("f", deadline_s=100.0))
    relegated = [Seq(replace(call(f"x{i}", deadline_s=100.0), best_effort=True)) for i in range(30)]
    engine = FakeEngine(now_s=1.0, waiting=[feasible, *relegated], running=[Seq(call("r", deadline_s=100.0))])
    assert _walk(_triage(1.0, None, None), engine, stop=True) == (["f"], 2)  # f joins; x0 is held: the rest too
    assert _walk(_triage(1.0, None, None), engine, stop=False) == (["f"], 31)
    behind = FakeEngine(now_s=1.0, waiting=[relegated[0], feasible, *relegated[1:]], running=engine.running)
    assert _walk(_triage(1.0, None, None), behind, stop=True) == (["f"], 3)  # not before f was asked


def test_a_pass_stops_once_the_share_is_full_and_only_best_effort_calls_are_left() -> None:
    feasible = [Seq(call(f"f{i}", deadline_s=100.0)) for i in range(2)]
    late = [Seq(call(f"late{i}", deadline_s=0.5)) for i in range(40)]  # past saving at 1.0: best effort
    running = [Seq(call(f"r{i}", deadline_s=100.0)) for i in range(2)]  # the share (2 of 8 slots) is full
    engine = FakeEngine(now_s=1.0, waiting=[*feasible, *late], running=running)
    engine.step_predictor = StepCost()  # type: ignore[assignment]
    assert _walk(_triage(0.25, None, None), engine, stop=True) == (["f0", "f1"], 3)  # late0 held: the rest too
    assert _walk(_triage(0.25, None, None), engine, stop=False) == (["f0", "f1"], 42)
    behind = FakeEngine(now_s=1.0, waiting=[*late[:5], feasible[0], *late[5:]], running=running)
    behind.step_predictor = engine.step_predictor
    assert _walk(_triage(0.25, None, None), behind, stop=True) == (["f0"], 7)  # at the first deferral after f0
    # A belief that cannot say whether it is about to refit is never read early: the pass asks every call.
    engine.step_predictor = Stateless()  # type: ignore[assignment]
    assert _walk(_triage(0.25, None, None), engine, stop=True) == (["f0", "f1"], 42)
