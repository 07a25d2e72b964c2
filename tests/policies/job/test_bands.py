"""Tenant bands in job-level admission (``policies/job/bands.py``): a job meets the waiting work of lower
bands whatever its deadline, its own band's by deadline, never a higher band's; without bands the tests
are the ones without this module; the shared builder hands fair sharing's bands to the job layer."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.request import Request
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.routers.prism import PrismModel
from slosched.policies.fairness.spec import FairShareSpec
from slosched.policies.job.backlog import feasible_waiting_tokens, queues_ahead
from slosched.policies.job.bands import bands_of, job_band, served_before
from slosched.policies.job.critical_path import CriticalPathBudget
from slosched.policies.job.demand import CommittedWork, Work, queued_work
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyPair, PolicyParams, PolicySpec
from tests.conftest import make_instance
from tests.policies.job.test_backlog import FakeView, call
from tests.policies.job.test_demand import chess

BANDS = FairShareSpec(bands=(("gold", 0.0), ("bronze", 2.0)))
BAND_OF = BANDS.band_of  # "silver" has no band: 0, as gold


def tenant_call(
    index: int, tenant: str, prompt: int, deadline_s: float = math.inf, best_effort: bool = False
) -> Request:
    request = call(index, prompt, best_effort, deadline_s)
    request.tenant = tenant
    return request


def test_served_before_compares_bands_and_defers_a_tie_to_the_deadline() -> None:
    assert served_before("bronze", 0.0, BAND_OF) is False  # a higher band waits behind a gold job
    assert served_before("gold", 2.0, BAND_OF) is True  # a lower band goes first whatever its deadline
    assert served_before("silver", 0.0, BAND_OF) is None  # same band: by deadline
    assert served_before("bronze", 0.0, None) is None  # no bands: by deadline
    assert job_band([tenant_call(0, "bronze", 10)], BAND_OF) == 2.0
    assert job_band([], BAND_OF) == 0.0 and job_band([tenant_call(0, "bronze", 10)], None) == 0.0


def test_a_job_meets_lower_bands_always_its_own_by_deadline_and_never_higher_ones() -> None:
    waiting = [
        tenant_call(0, "gold", 4000, deadline_s=90.0),  # due later, but a lower band than bronze
        tenant_call(1, "bronze", 3000, deadline_s=5.0),  # due sooner, a higher band than gold
        tenant_call(2, "gold", 2000, deadline_s=5.0),
        tenant_call(3, "gold", 1000, deadline_s=5.0, best_effort=True),  # relegated: behind everyone
    ]
    view = FakeView(waiting)
    views = [view]
    assert queued_work(views, 10.0, BAND_OF, 0.0).prompt_tokens == 2000  # type: ignore[arg-type]
    assert queued_work(views, 10.0, BAND_OF, 2.0).prompt_tokens == 4000 + 3000 + 2000  # type: ignore[arg-type]
    assert queued_work(views, 10.0).prompt_tokens == 3000 + 2000  # type: ignore[arg-type]  # no bands: EDF
    assert feasible_waiting_tokens(view, BAND_OF, 0.0) == 4000 + 2000  # type: ignore[arg-type]
    assert feasible_waiting_tokens(view, BAND_OF, 2.0) == 9000  # type: ignore[arg-type]
    assert feasible_waiting_tokens(view) == 9000  # type: ignore[arg-type]
    ahead = queues_ahead(views, PrismModel(), BAND_OF, 0.0)  # type: ignore[arg-type]
    assert [queue.waiting_tokens for queue in ahead] == [6000]


def test_committed_work_of_a_higher_band_is_not_ahead() -> None:
    ledger = CommittedWork()
    ledger.record("gold-job", 10.0, Work(1000, 100), band=0.0)
    ledger.record("bronze-job", 10.0, Work(7000, 700), band=2.0)
    assert ledger.ahead_of("me", 20.0, 0.0, band=0.0) == Work(1000, 100)
    assert ledger.ahead_of("me", 20.0, 0.0, band=2.0) == Work(8000, 800)
    assert ledger.ahead_of("me", 20.0, 0.0) == Work(1000, 100)  # band 0 by default
    assert ledger.ahead_of("me", 5.0, 0.0, band=2.0) == Work()  # a lower band's booking still needs its deadline


@given(
    prompts=st.lists(st.integers(min_value=1, max_value=20_000), min_size=1, max_size=8),
    tenants=st.lists(st.sampled_from(["gold", "silver", "bronze"]), min_size=8, max_size=8),
    deadlines=st.lists(st.floats(min_value=0.0, max_value=100.0), min_size=8, max_size=8),
)
def test_a_lower_band_never_meets_more_work_than_a_higher_one(
    prompts: list[int], tenants: list[str], deadlines: list[float]
) -> None:
    waiting = [tenant_call(i, tenants[i], prompt, deadlines[i]) for i, prompt in enumerate(prompts)]
    views = [FakeView(waiting)]
    gold = queued_work(views, 50.0, BAND_OF, 0.0)  # type: ignore[arg-type]
    bronze = queued_work(views, 50.0, BAND_OF, 2.0)  # type: ignore[arg-type]
    assert gold.prompt_tokens <= bronze.prompt_tokens and gold.output_tokens <= bronze.output_tokens


def test_the_builder_hands_fair_sharings_bands_to_the_job_layer_where_asked() -> None:
    context = PolicyContext((make_instance("a"),), np.random.default_rng(0), HistoryOutputPredictor())
    asked = {"slosched": {"backlog": True, "tenant_bands": True}}
    job = (
        PolicySpec.from_pair(PolicyPair.parse("slosched"), PolicyParams(stack=asked, fair_share=BANDS))
        .build(context)
        .job
    )
    assert isinstance(job, CriticalPathBudget) and job.band_of is not None and job.band_of("bronze") == 2.0
    weights_only = FairShareSpec(weights=(("gold", 3.0),))
    assert bands_of(weights_only) is None
    for params in (PolicyParams(stack=asked), PolicyParams(stack=asked, fair_share=weights_only)):
        plain = PolicySpec.from_pair(PolicyPair.parse("slosched"), params).build(context).job
        assert isinstance(plain, CriticalPathBudget) and plain.band_of is None
    default = PolicyParams(stack={"slosched": {"backlog": True}}, fair_share=BANDS)  # off unless asked
    unasked = PolicySpec.from_pair(PolicyPair.parse("slosched"), default).build(context).job
    assert isinstance(unasked, CriticalPathBudget) and unasked.band_of is None


def test_a_bronze_job_is_relegated_where_a_gold_one_with_the_same_deadline_is_kept() -> None:
    """Behind a long bronze queue a bronze job cannot make it; a gold job with the same deadline skips that
    queue and can. Without bands both are relegated."""
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True, tenant_bands=True)
    policy.use_bands(BAND_OF)
    views = [FakeView([tenant_call(i, "bronze", 8000, deadline_s=1.0) for i in range(10)])]
    mine = [tenant_call(99, "gold", 300)]
    alone_s = policy.remaining_min_s(chess("j", 1e9), mine)
    deadline = 3.0 * alone_s
    gold = policy.decide_with_backlog(chess("g", deadline), mine, 0.0, views)  # type: ignore[arg-type]
    theirs = [tenant_call(98, "bronze", 300)]
    bronze = policy.decide_with_backlog(chess("b", deadline), theirs, 0.0, views)  # type: ignore[arg-type]
    assert not gold.best_effort and bronze.best_effort
    policy = CriticalPathBudget([LinearStepPredictor()], backlog=True)  # one band
    assert policy.decide_with_backlog(chess("g", deadline), mine, 0.0, views).best_effort  # type: ignore[arg-type]
