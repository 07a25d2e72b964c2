"""``serve.limits``: per-tenant token buckets on an injected clock, and API-key checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from slosched.serve.limits import TenantLimiter, authorized


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_unlimited_tenants_never_wait() -> None:
    limiter = TenantLimiter({"paid": 1.0}, None, FakeClock())
    assert all(limiter.retry_after_s("free") == 0.0 for _ in range(1000))


def test_a_bucket_allows_its_burst_then_reports_the_wait() -> None:
    clock = FakeClock()
    limiter = TenantLimiter({"t": 4.0}, None, clock)
    assert [limiter.retry_after_s("t") for _ in range(4)] == [0.0] * 4  # burst = rate
    assert limiter.retry_after_s("t") == pytest.approx(0.25)  # one token takes 1/4 s
    clock.now = 0.1
    assert limiter.retry_after_s("t") == pytest.approx(0.15)
    clock.now = 0.25
    assert limiter.retry_after_s("t") == 0.0
    clock.now = 100.0  # refills up to the burst, never beyond it
    assert [limiter.retry_after_s("t") for _ in range(5)] == [0.0] * 4 + [pytest.approx(0.25)]


def test_slow_rates_still_allow_one_request() -> None:
    clock = FakeClock()
    limiter = TenantLimiter({}, 0.5, clock)  # the default rate applies to every tenant, each its own bucket
    assert limiter.retry_after_s("a") == 0.0
    assert limiter.retry_after_s("a") == pytest.approx(2.0)
    assert limiter.retry_after_s("b") == 0.0
    clock.now = 2.0
    assert limiter.retry_after_s("a") == 0.0


@given(
    rate=st.floats(min_value=0.1, max_value=50.0),
    gaps=st.lists(st.floats(min_value=0.0, max_value=2.0), min_size=1, max_size=60),
)
def test_granted_requests_never_exceed_the_burst_plus_rate_times_elapsed(rate: float, gaps: list[float]) -> None:
    clock = FakeClock()
    limiter = TenantLimiter({"t": rate}, None, clock)
    granted = 0
    for gap in gaps:
        clock.now += gap
        wait = limiter.retry_after_s("t")
        assert wait >= 0.0
        granted += wait == 0.0
        assert granted <= max(rate, 1.0) + rate * clock.now + 1e-9


@pytest.mark.parametrize(
    ("keys", "authorization", "api_key", "expected"),
    [
        ([], None, None, True),
        (["k1", "k2"], "Bearer k2", None, True),
        (["k1"], "bearer  k1 ", None, True),
        (["k1"], None, "k1", True),
        (["k1"], "Bearer nope", "k1", False),  # a bearer token wins over x-api-key
        (["k1"], "Basic k1", "k1", True),  # not a bearer token: x-api-key is used
        (["k1"], "Basic k1", None, False),
        (["k1"], None, None, False),
        (["k1"], "Bearer ", None, False),
        (["k1"], None, "k", False),
    ],
)
def test_authorized(keys: list[str], authorization: str | None, api_key: str | None, expected: bool) -> None:
    assert authorized(keys, authorization, api_key) is expected
