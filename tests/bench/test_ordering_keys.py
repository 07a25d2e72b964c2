"""bench ordering-keys: a small run past capacity, its figures, and the failure when records differ."""

from __future__ import annotations

import pytest

import slosched.bench.ordering_keys as bench
from slosched.bench.base import BenchmarkFailed
from slosched.policies.engine.admission.always import AlwaysAdmit
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.ordering.least_slack import LeastSlackOrdering
from slosched.policies.engine.queue import PolicyQueue
from tests.policies.engine.test_queue import Batching


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "QUICK_JOBS", 250)


def test_keys_kept_give_the_same_records_for_less_work() -> None:
    figures = bench.run(True)
    assert figures["workload"] == "code" and figures["jobs"] == 250
    assert set(figures["runs"]) == {"slosched", "slosched (oracle)"}
    for row in figures["runs"].values():
        assert row["identical"] is True and row["requests"] > 0
        assert row["cpu_s_keys_kept"] > 0 and row["cpu_s_rekeyed_every_pass"] > 0


def test_the_twin_rekeys_every_pass() -> None:
    policy = EnginePolicy("t", LeastSlackOrdering(), AlwaysAdmit(), Batching())
    assert PolicyQueue(policy)._expiring is not None
    with bench.rekeying_every_pass():
        assert PolicyQueue(policy)._expiring is None


def test_records_that_differ_fail_the_bench(monkeypatch: pytest.MonkeyPatch) -> None:
    digests = iter(range(10))
    monkeypatch.setattr(bench, "records_digest", lambda result: next(digests))
    with pytest.raises(BenchmarkFailed, match="records changed by keeping the queue's keys: slosched"):
        bench.run(True)
