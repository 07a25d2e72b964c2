"""``gateway.ops.limits``: per-tenant token buckets and concurrency on an injected clock, bounded state."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.gateway.calls.call import HttpError
from slosched.gateway.ops.identity import Principal
from slosched.gateway.ops.limits import TenantLimits, TokenBucket
from slosched.gateway.ops.prometheus import GatewayMetrics, counter_value


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _wait(limits: TenantLimits, principal: Principal) -> float:
    """0.0 when the request was admitted, else its Retry-After in seconds."""
    try:
        limits.admit_request(principal)
    except HttpError as error:
        assert (error.status, error.code) == (429, "rate_limited")
        assert error.retry_after_s is not None
        return error.retry_after_s
    return 0.0


def test_unlimited_tenants_never_wait_and_hold_no_state() -> None:
    limits = TenantLimits(FakeClock())
    free = Principal("free")
    assert all(_wait(limits, free) == 0.0 for _ in range(1000))
    assert limits.admit_call(free, 10**6) is None
    assert len(limits) == 0


def test_a_bucket_allows_its_burst_then_reports_the_wait() -> None:
    clock = FakeClock()
    limits, t = TenantLimits(clock), Principal("t", rate_limit_rps=4.0)
    assert [_wait(limits, t) for _ in range(4)] == [0.0] * 4  # burst = rate
    assert _wait(limits, t) == pytest.approx(0.25)  # one token takes 1/4 s
    clock.now = 0.1
    assert _wait(limits, t) == pytest.approx(0.15)
    clock.now = 0.25
    assert _wait(limits, t) == 0.0
    clock.now = 100.0  # refills up to the burst, never beyond it
    assert [_wait(limits, t) for _ in range(5)] == [0.0] * 4 + [pytest.approx(0.25)]


def test_slow_rates_still_allow_one_request_and_tenants_have_their_own_buckets() -> None:
    clock = FakeClock()
    limits = TenantLimits(clock)
    a, b = Principal("a", rate_limit_rps=0.5), Principal("b", rate_limit_rps=0.5)
    assert _wait(limits, a) == 0.0
    assert _wait(limits, a) == pytest.approx(2.0)
    assert _wait(limits, b) == 0.0
    clock.now = 2.0
    assert _wait(limits, a) == 0.0


def test_a_new_rate_applies_to_the_existing_bucket() -> None:
    clock = FakeClock()
    limits = TenantLimits(clock)
    assert [_wait(limits, Principal("t", rate_limit_rps=100.0)) for _ in range(100)] == [0.0] * 100
    slower = Principal("t", rate_limit_rps=1.0)  # a config reload lowered it: no fresh burst of 100
    assert _wait(limits, slower) == pytest.approx(1.0)


@given(
    rate=st.floats(min_value=0.1, max_value=50.0),
    gaps=st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=1, max_size=60),
)
def test_granted_requests_never_exceed_the_burst_plus_rate_times_elapsed(rate: float, gaps: list[float]) -> None:
    clock = FakeClock()
    limits, t = TenantLimits(clock), Principal("t", rate_limit_rps=rate)
    granted = 0
    for gap in gaps:
        clock.now += gap
        wait = _wait(limits, t)
        assert wait >= 0.0
        granted += wait == 0.0
        assert granted <= max(rate, 1.0) + rate * clock.now + 1e-9


@given(
    rate=st.floats(min_value=1.0, max_value=500.0),
    calls=st.lists(st.tuples(st.floats(min_value=0.0, max_value=1.0), st.integers(1, 2000)), min_size=1, max_size=60),
)
def test_granted_tokens_stay_within_burst_plus_rate_times_elapsed_plus_one_call(
    rate: float, calls: list[tuple[float, int]]
) -> None:
    bucket, now, granted = TokenBucket(max(rate, 1.0), 0.0), 0.0, 0
    for gap, cost in calls:
        now += gap
        wait = bucket.take(rate, cost, now)
        if wait == 0.0:
            granted += cost
        else:
            assert wait > 0.0
            assert bucket.take(rate, cost, now + wait + 1e-9) == 0.0  # Retry-After is honest
            granted += cost
            now += wait + 1e-9
        assert granted <= max(rate, 1.0) + rate * now + max(c for _, c in calls) + 1e-6


def test_token_rate_counts_prompt_plus_max_tokens() -> None:
    clock = FakeClock()
    metrics = GatewayMetrics(lambda: [])
    limits, t = TenantLimits(clock, metrics), Principal("t", token_rate_limit_tps=1000.0)
    assert limits.admit_call(t, 600) is None  # no concurrency limit: nothing to release
    with pytest.raises(HttpError) as refused:
        limits.admit_call(t, 600)
    assert (refused.value.status, refused.value.code) == (429, "rate_limited")
    assert refused.value.retry_after_s == pytest.approx(0.2)
    assert counter_value(metrics, "slosched:admission_rejections_total", [("reason", "token_rate_limited")]) == 1


def test_concurrency_leases_release_exactly_once() -> None:
    metrics = GatewayMetrics(lambda: [])
    limits, t = TenantLimits(FakeClock(), metrics), Principal("t", max_concurrency=2)
    first, second = limits.admit_call(t, 1), limits.admit_call(t, 1)
    assert first is not None and second is not None and limits.in_flight("t") == 2
    with pytest.raises(HttpError) as refused:
        limits.admit_call(t, 1)
    assert (refused.value.code, refused.value.retry_after_s) == ("concurrency_limited", 1.0)
    first.release()
    first.release()  # a second release must not free another call's slot
    assert limits.in_flight("t") == 1
    assert limits.admit_call(t, 1) is not None
    assert counter_value(metrics, "slosched:admission_rejections_total", [("reason", "concurrency_limited")]) == 1


def test_tenant_state_is_bounded_least_recently_used_first() -> None:
    limits = TenantLimits(FakeClock(), max_tenants=3)
    for name in ("a", "b", "c"):
        limits.admit_request(Principal(name, rate_limit_rps=1.0))
    assert _wait(limits, Principal("a", rate_limit_rps=1.0)) > 0.0  # refused, but "a" is now the most recent
    limits.admit_request(Principal("d", rate_limit_rps=1.0))  # evicts "b"
    assert len(limits) == 3
    assert _wait(limits, Principal("b", rate_limit_rps=1.0)) == 0.0  # a fresh bucket
    assert _wait(limits, Principal("d", rate_limit_rps=1.0)) > 0.0  # still limited
