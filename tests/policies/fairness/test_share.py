"""FairShare: weighted shares between backlogged tenants, bands, the starvation bound (property tests)."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.request import Request
from slosched.policies.fairness.places import FairPlaces, fair_room
from slosched.policies.fairness.share import FairShare
from slosched.policies.fairness.spec import FairShareSpec


@dataclass(slots=True, eq=False)
class _Seq:
    request: Request
    num_prompt_tokens: int
    enqueue_s: float
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    first_token_s: float | None = None
    num_preemptions: int = 0


def _seq(tenant: str, tokens: int, now: float, index: int) -> _Seq:
    request = Request(f"{tenant}-{index}", "j", "s", "t", tokens, 1, now, now, tenant=tenant)
    return _Seq(request, tokens, now)


def _serve_one(fair: FairShare, waiting: list[_Seq], now: float) -> _Seq:
    seq = next(fair.picks(waiting, now))
    fair.charge(seq)
    waiting.remove(seq)
    return seq


@settings(max_examples=60, deadline=None)
@given(
    weights=st.tuples(st.integers(1, 5), st.integers(1, 5)),
    costs=st.lists(st.tuples(st.integers(0, 1), st.integers(1, 50)), min_size=40, max_size=200),
)
def test_backlogged_tenants_get_their_weight_share_within_one_call(weights: tuple[int, int], costs: list) -> None:
    """Both tenants always backlogged (any arrival mix of costs): their service over weight never differs by
    more than the largest call's cost over the smaller weight, so shares converge to the weight shares."""
    spec = FairShareSpec((("a", weights[0]), ("b", weights[1])), max_wait_s=1e9)
    fair = FairShare(spec)
    queues = {"a": [], "b": []}
    for index, (which, tokens) in enumerate(costs):
        tenant = "ab"[which]
        queues[tenant].append(_seq(tenant, tokens, 0.0, index))
    for tenant in "ab":  # keep both backlogged: pad with calls of the largest cost
        queues[tenant] += [_seq(tenant, 50, 0.0, 1000 + i) for i in range(len(costs))]
    waiting = [*queues["a"], *queues["b"]]
    served = {"a": 0.0, "b": 0.0}
    bound = 50 / min(weights)
    for _ in range(len(costs)):
        seq = _serve_one(fair, waiting, 0.0)
        served[seq.request.tenant] += seq.num_prompt_tokens
        assert abs(served["a"] / weights[0] - served["b"] / weights[1]) <= bound + 1e-9


@settings(max_examples=60, deadline=None)
@given(arrivals=st.sets(st.integers(0, 300), min_size=1, max_size=60), max_wait=st.integers(1, 20))
def test_a_lower_band_never_waits_past_the_bound(arrivals: set[int], max_wait: int) -> None:
    """One slot per tick; the high band always has calls waiting; the low band's calls arrive at any distinct
    ticks: each is served within max_wait_s plus one tick."""
    spec = FairShareSpec(bands=(("low", 1.0), ("high", 0.0)), max_wait_s=float(max_wait))
    fair = FairShare(spec)
    waiting: list[_Seq] = []
    waits: list[float] = []
    for tick in range(400 + max_wait):
        now = float(tick)
        waiting.append(_seq("high", 10, now, tick))
        if tick in arrivals:
            waiting.append(_seq("low", 10, now, tick))
        seq = _serve_one(fair, waiting, now)
        if seq.request.tenant == "low":
            waits.append(now - seq.enqueue_s)
    assert len(waits) == len(arrivals)
    assert max(waits) <= max_wait + 1


def test_a_higher_band_goes_first_and_an_idle_tenant_banks_no_credit() -> None:
    fair = FairShare(FairShareSpec(bands=(("low", 1.0),)))
    waiting = [_seq("low", 10, 0.0, 0), _seq("high", 10, 0.0, 1)]
    assert next(fair.picks(waiting, 0.0)).request.tenant == "high"
    fair = FairShare(FairShareSpec())
    busy = [_seq("a", 10, 0.0, i) for i in range(50)]
    for _ in range(40):
        _serve_one(fair, busy, 0.0)
    late = [*busy, *[_seq("b", 10, 0.0, 100 + i) for i in range(10)]]
    order = [_serve_one(fair, late, 0.0).request.tenant for _ in range(10)]
    assert order.count("a") >= 4  # b joins at a's counter: alternation, not 10 b's in a row


def test_places_displace_the_tenant_furthest_over_its_share() -> None:
    spec = FairShareSpec((("batch", 1.0), ("interactive", 4.0)))
    places = FairPlaces(spec)
    for _ in range(16):
        places.joined("batch")
    assert places.victim("interactive", 16) == "batch"
    assert places.victim("batch", 16) is None  # the flooder itself is refused
    assert fair_room(spec, "batch", 100, {"batch": 10}) == 90  # alone: the whole capacity
    assert fair_room(spec, "batch", 100, {"batch": 10, "interactive": 1}) == 10


def test_a_lower_bands_share_flows_up_a_higher_band_is_not_capped_by_it() -> None:
    """Ten slots, weights 4 : 1. In one band each is capped at its weighted share (8 and 2); with "low" in a
    lower band, "high" may take every slot it needs while "low" still keeps at most its share (2)."""
    weights = (("high", 4.0), ("low", 1.0))
    running = [_seq("low", 10, 0.0, 99)]

    def taken(fair: FairShare) -> dict[str, int]:
        waiting = [_seq("high", 10, 0.0, i) for i in range(10)] + [_seq("low", 10, 0.0, 10 + i) for i in range(10)]
        picks = list(fair.picks(waiting, 0.0, running, 10))
        return {tenant: sum(seq.request.tenant == tenant for seq in picks) for tenant in ("high", "low")}

    assert taken(FairShare(FairShareSpec(weights))) == {"high": 8, "low": 1}
    assert taken(FairShare(FairShareSpec(weights, bands=(("low", 1.0),)))) == {"high": 10, "low": 1}


@dataclass(slots=True, eq=False)
class _WideSeq(_Seq):
    """A gateway call: its prompts times ``n`` decode side by side (``LiveSeq.sequences``)."""

    sequences: int = 1


def _wide(tenant: str, sequences: int, index: int) -> _WideSeq:
    request = Request(f"{tenant}-{index}", "j", "s", "t", 10, 1, 0.0, 0.0, tenant=tenant)
    return _WideSeq(request, 10, 0.0, sequences=sequences)


def test_a_share_counts_sequences_and_a_tenant_holding_none_starts_one_wide_call() -> None:
    """Ten slots, two tenants of equal weight (five each). A tenant's 4-sequence calls take its five slots one
    call at a time (4, then 4 more would be 8); one running 4-sequence call of "b" leaves it one slot; a tenant
    that holds nothing may start a call wider than its share (else it would never run)."""
    fair = FairShare(FairShareSpec((("a", 1.0), ("b", 1.0))))
    running = [_wide("b", 4, 99)]
    waiting = [_wide("a", 4, i) for i in range(3)] + [_wide("b", 1, 10 + i) for i in range(3)]
    picks = list(fair.picks(waiting, 0.0, running, 10))
    assert sorted(seq.request.id for seq in picks) == ["a-0", "b-10"]
    wider = [_wide("a", 8, 0), _wide("a", 1, 1)]
    assert [seq.request.id for seq in fair.picks(wider, 0.0, running, 10)] == ["a-0"]


def test_a_calls_cost_counts_each_sequences_output() -> None:
    one, four = _wide("a", 1, 0), _wide("a", 4, 1)
    one.request.predicted_output_tokens = four.request.predicted_output_tokens = 100.0
    fair = FairShare(FairShareSpec((("a", 1.0),)))
    fair.charge(one)
    after_one = fair.counters["a"]
    fair.charge(four)
    assert (after_one, fair.counters["a"] - after_one) == (110.0, 410.0)  # 10 prompt tokens + 1 or 4 x 100
