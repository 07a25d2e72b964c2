"""Admission ``static-concurrency``: a pass that ends where it says (``pass_closed``) admits what a pass asking
every call admits, and ends at the first call past the cap."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slosched.policies.engine.admission.static_concurrency import StaticConcurrencyAdmission
from tests.policies.engine.admission.test_triage import _walk
from tests.policies.engine.deadline_fakes import FakeEngine, FakeSeq, call


@given(cap=st.integers(1, 8), running=st.integers(0, 10), waiting=st.integers(0, 30))
def test_a_pass_ended_at_the_cap_admits_what_a_whole_pass_admits(cap: int, running: int, waiting: int) -> None:
    seqs = [FakeSeq(call(f"w{i}")) for i in range(waiting)]
    engine = FakeEngine(now_s=1.0, waiting=seqs, running=[FakeSeq(call(f"r{i}")) for i in range(running)])
    whole = _walk(StaticConcurrencyAdmission(cap), engine, stop=False)  # type: ignore[arg-type]
    ended = _walk(StaticConcurrencyAdmission(cap), engine, stop=True)  # type: ignore[arg-type]
    assert ended[0] == whole[0] == [seq.request.id for seq in seqs[: max(0, min(waiting, cap - running))]]
    # It stops at the first call held back: right after the last admission.
    assert ended[1] == min(waiting, len(whole[0]) + 1)
