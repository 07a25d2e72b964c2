"""``limits``: the gateway's per-request limit state (``gateway/ops/limits.py``), over 100 tenants in a fixed
mixed order. ``limits_lru``: finding or making a tenant's entry (``TenantLimits._state``: an OrderedDict
LRU) vs the same on ``cachetools.LRUCache``. ``limits_bucket``: admitting one call of 300 tokens against
its tenant's token rate (``TenantLimits.admit_call``: LRU, clock, token bucket) vs pyrate-limiter's
token-bucket limiter keyed by tenant (``try_acquire(tenant, weight, blocking=False)``)."""

from __future__ import annotations

import time
from importlib.metadata import version

from slosched.bench.libs.setup import Pair
from slosched.gateway.ops.identity import Principal
from slosched.gateway.ops.limits import MAX_TENANTS, TenantLimits, _TenantState

_TENANTS = [f"tenant-{index}" for index in range(100)]
_ORDER = [_TENANTS[(index * 37) % len(_TENANTS)] for index in range(2000)]
_TOKENS = 300
_RATE = 10**9  # never refuses: the admitted path is the hot one


def _lru_pair() -> Pair:
    from cachetools import LRUCache

    limits = TenantLimits(time.monotonic)
    cache: LRUCache[str, _TenantState] = LRUCache(maxsize=MAX_TENANTS)

    def ours() -> None:
        state = limits._state
        for tenant in _ORDER:
            state(tenant)

    def theirs() -> None:
        for tenant in _ORDER:
            if cache.get(tenant) is None:
                cache[tenant] = _TenantState()  # LRUCache evicts the least recently used itself

    return Pair("limits_lru", f"cachetools {version('cachetools')}", ours, theirs, len(_ORDER), "tenant lookup")


def _bucket_pair() -> Pair:
    from pyrate_limiter.limiter_factory import create_token_bucket_limiter

    limits = TenantLimits(time.monotonic)
    principals = {tenant: Principal(tenant, token_rate_limit_tps=float(_RATE)) for tenant in _TENANTS}
    calls = [principals[tenant] for tenant in _ORDER]
    limiter = create_token_bucket_limiter(_RATE, burst=_RATE)

    def ours() -> None:
        admit = limits.admit_call
        for principal in calls:
            admit(principal, _TOKENS)

    def theirs() -> None:
        acquire = limiter.try_acquire
        for principal in calls:
            if not acquire(principal.limits_key, _TOKENS, blocking=False):
                raise AssertionError("pyrate-limiter refused under a rate it should never reach")

    return Pair("limits_bucket", f"pyrate-limiter {version('pyrate-limiter')}", ours, theirs, len(calls), "call")


def pairs() -> list[Pair]:
    return [_lru_pair(), _bucket_pair()]
