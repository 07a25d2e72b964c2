"""Admission ``triage``'s concurrency cap: no call joins once ``max_concurrency`` run (counting this pass's
admissions), feasible or not; none leaves the instance's own limit; the preset checks the key."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.policies.engine.admission.triage import TriageAdmission, TriageParams
from slosched.policies.engine.presets.deadline_triage import DeadlineTriageParams
from tests.policies.stacks.test_slosched import FakeEngine, FakeSeq, call


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
