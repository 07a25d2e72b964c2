"""Per-tenant rate limits (token buckets) and API-key checks."""

from __future__ import annotations

import hmac
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(slots=True)
class _Bucket:
    rate: float
    tokens: float
    updated_s: float


class TenantLimiter:
    """Token bucket per tenant: ``rate`` requests/s sustained, bursts up to ``max(rate, 1)``.

    Tenants without an entry use ``default_rate`` (None: unlimited). ``retry_after_s`` returns 0 when the
    request may go now (and takes a token), else the seconds until a token is available.
    """

    def __init__(self, rates: Mapping[str, float], default_rate: float | None, clock: Callable[[], float]) -> None:
        self._rates = dict(rates)
        self._default = default_rate
        self._clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def retry_after_s(self, tenant: str) -> float:
        rate = self._rates.get(tenant, self._default)
        if rate is None:
            return 0.0
        now = self._clock()
        bucket = self._buckets.get(tenant)
        burst = max(rate, 1.0)
        if bucket is None:
            bucket = self._buckets[tenant] = _Bucket(rate, burst, now)
        bucket.tokens = min(burst, bucket.tokens + (now - bucket.updated_s) * rate)
        bucket.updated_s = now
        if bucket.tokens >= 1.0:
            bucket.tokens -= 1.0
            return 0.0
        return (1.0 - bucket.tokens) / rate


def authorized(keys: Sequence[str], authorization: str | None, api_key: str | None) -> bool:
    """True when no keys are configured, or ``Authorization: Bearer K`` / ``x-api-key: K`` matches one
    (compared in constant time)."""
    if not keys:
        return True
    presented = api_key
    if authorization and authorization.lower().startswith("bearer "):
        presented = authorization[7:].strip()
    if not presented:
        return False
    return any(hmac.compare_digest(presented.encode(), key.encode()) for key in keys)
