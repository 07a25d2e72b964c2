"""bench queue-passes: a small run past capacity, its figures, and the failure when records differ."""

from __future__ import annotations

import pytest

import slosched.bench.queue_passes as bench
from slosched.bench.base import BenchmarkFailed
from slosched.policies.engine.admission.always import AlwaysAdmit
from slosched.policies.engine.admission.static_concurrency import StaticConcurrencyAdmission
from slosched.policies.engine.admission.triage import TriageAdmission
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.ordering.least_slack import FlipMemo, LeastSlackOrdering, flip_s
from slosched.policies.engine.queue import PolicyQueue
from tests.policies.engine.test_queue import Batching, Engine, Seq
from tests.policies.engine.test_queue_expiring_keys import request


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "QUICK_JOBS", 250)


def test_keys_kept_give_the_same_records_for_less_work() -> None:
    figures = bench.run(True)
    assert figures["workload"] == "code" and figures["jobs"] == 250
    assert set(figures["runs"]) == {"slosched", "slosched (oracle)", bench.CAPPED_BASELINE.label}
    for row in figures["runs"].values():
        assert row["identical"] is True and row["requests"] > 0
        assert row["cpu_s_as_shipped"] > 0 and row["cpu_s_as_before"] > 0


def test_the_twin_rekeys_every_pass_and_computes_every_flip() -> None:
    policy = EnginePolicy("t", LeastSlackOrdering(), AlwaysAdmit(), Batching())
    assert PolicyQueue(policy)._expiring is not None
    memo, engine = FlipMemo(), Engine()
    shared = request(0, 0.0, 1.0, None, 5.0, False)
    seq = Seq(shared, shared.prompt_tokens)
    with bench.as_before():
        assert PolicyQueue(policy)._expiring is None
        assert memo.flip_s(seq, engine) == flip_s(seq, engine) and not memo._flips
        assert TriageAdmission(0.25)._only_best_effort_left(engine) is False
    assert TriageAdmission(0.25)._only_best_effort_left(engine) is True  # nothing waits that can still count
    memo.flip_s(seq, engine)
    assert memo._flips


def test_records_that_differ_fail_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    digests = iter(range(10))
    monkeypatch.setattr(bench, "records_digest", lambda result: next(digests))
    with pytest.raises(BenchmarkFailed, match="records changed by the cheaper queue passes: slosched"):
        bench.run(True)


def test_the_baselines_twin_closes_no_pass() -> None:
    capped = EnginePolicy("t", LeastSlackOrdering(), StaticConcurrencyAdmission(4), Batching())
    assert PolicyQueue(capped)._pass_closed is not None
    with bench.no_pass_closes():
        assert PolicyQueue(capped)._pass_closed is None
