"""Per-tenant limits: request rate, token rate (token buckets) and calls in flight.

The limits themselves are the ``Principal``'s (read at each request, so a config reload that swaps the
gateway's ``Identities`` applies at once); this module keeps only the state: one entry per tenant, at most
``max_tenants`` of them (least recently used evicted), since with a trusted tenant header the names come from
clients. Every refusal is a 429 with ``Retry-After`` and is counted in ``slosched_admission_rejections``.

Hand-written, not a library (issue 23), measured on the per-request path by ``slosched bench libs`` (the
library's cost over this module's; two full runs, each the median of 9 interleaved rounds in one
process, 2-core machine):

- the tenant LRU (an ``OrderedDict``, C-level ``get``/``move_to_end``): ``cachetools.LRUCache`` (8.0)
  x1.8-2.9 per lookup (its ``__getitem__``/``__setitem__`` are Python-level);
- the token bucket: pyrate-limiter's token-bucket limiter (4.5, keyed by tenant) x9.6-10.5 per admitted call.
  Nor does one fit: ``limits`` has no token bucket and reads ``time.time``; ``aiolimiter`` waits instead of
  refusing, reads the loop's clock and refuses a cost above its capacity; pyrate-limiter takes integer
  rates fixed per limiter (here a config reload changes a tenant's rate at the next request) and reads its
  own clock, where this module takes the injected one (the tests' fake clock) and lets one call above the
  burst in on debt.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from slosched.gateway.calls.call import HttpError
from slosched.gateway.ops.identity import Principal
from slosched.gateway.ops.prometheus import GatewayMetrics

MAX_TENANTS = 10_000
_CONCURRENCY_RETRY_S = 1.0


@dataclass(slots=True)
class TokenBucket:
    """``rate`` units/s sustained, bursts up to ``max(rate, 1)``. A cost above the burst is granted when the
    bucket is full and leaves it in debt, so over any span the units granted stay within
    burst + rate x span + one cost."""

    tokens: float
    updated_s: float

    def take(self, rate: float, cost: float, now_s: float) -> float:
        """0 when ``cost`` is granted (and taken), else the seconds until it would be."""
        burst = max(rate, 1.0)
        self.tokens = min(burst, self.tokens + (now_s - self.updated_s) * rate)
        self.updated_s = now_s
        need = min(cost, burst)
        if self.tokens >= need:
            self.tokens -= cost
            return 0.0
        return (need - self.tokens) / rate


@dataclass(slots=True)
class _TenantState:
    requests: TokenBucket | None = None
    tokens: TokenBucket | None = None
    in_flight: int = 0


class Lease:
    """One call's slot in its tenant's concurrency limit; ``release`` frees it once, later calls no-ops."""

    __slots__ = ("_state",)

    def __init__(self, state: _TenantState) -> None:
        self._state: _TenantState | None = state

    def release(self) -> None:
        state, self._state = self._state, None
        if state is not None:
            state.in_flight -= 1


class TenantLimits:
    """The limit state of every tenant seen. A tenant evicted from the LRU while it has calls in flight
    starts afresh (its leases still release into the evicted entry): with ``max_tenants`` far above the
    number of tenants active at once, that only happens to a flood of made-up names."""

    def __init__(
        self, clock: Callable[[], float], metrics: GatewayMetrics | None = None, max_tenants: int = MAX_TENANTS
    ) -> None:
        self._clock = clock
        self._metrics = metrics
        self._max_tenants = max_tenants
        self._states: OrderedDict[str, _TenantState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._states)

    def in_flight(self, tenant: str) -> int:
        state = self._states.get(tenant)
        return state.in_flight if state is not None else 0

    def _state(self, tenant: str) -> _TenantState:
        states = self._states
        state = states.get(tenant)
        if state is None:
            state = states[tenant] = _TenantState()
            if len(states) > self._max_tenants:
                states.popitem(last=False)
        else:
            states.move_to_end(tenant)
        return state

    def _refuse(self, reason: str, code: str, message: str, retry_after_s: float) -> HttpError:
        if self._metrics is not None:
            self._metrics.labelled(self._metrics.rejections, reason).inc()
        return HttpError(429, code, message, retry_after_s)

    def admit_request(self, principal: Principal) -> None:
        """One request (a call or a job-API request) against the tenant's request rate; 429 when over it."""
        rate = principal.rate_limit_rps
        if rate is None:
            return
        state = self._state(principal.limits_key)
        now = self._clock()
        if state.requests is None:
            state.requests = TokenBucket(max(rate, 1.0), now)
        wait_s = state.requests.take(rate, 1.0, now)
        if wait_s > 0:
            message = f"tenant {principal.tenant!r} is over its rate limit ({rate:g} requests/s)"
            raise self._refuse("rate_limited", "rate_limited", message, wait_s)

    def admit_call(self, principal: Principal, num_tokens: int) -> Lease | None:
        """A call of ``num_tokens`` (``Call.token_cost``: its prompts and max_tokens per sequence) against the
        token rate and the concurrency limit; the lease (None when concurrency is unlimited) must be released
        when the call ends, whatever its outcome."""
        tps, max_concurrency = principal.token_rate_limit_tps, principal.max_concurrency
        if tps is None and max_concurrency is None:
            return None
        state = self._state(principal.limits_key)
        if max_concurrency is not None and state.in_flight >= max_concurrency:
            message = f"tenant {principal.tenant!r} has {max_concurrency} calls in flight, its limit"
            raise self._refuse("concurrency_limited", "concurrency_limited", message, _CONCURRENCY_RETRY_S)
        if tps is not None:
            now = self._clock()
            if state.tokens is None:
                state.tokens = TokenBucket(max(tps, 1.0), now)
            wait_s = state.tokens.take(tps, float(num_tokens), now)
            if wait_s > 0:
                message = f"tenant {principal.tenant!r} is over its token rate limit ({tps:g} tokens/s)"
                raise self._refuse("token_rate_limited", "rate_limited", message, wait_s)
        if max_concurrency is None:
            return None
        state.in_flight += 1
        return Lease(state)
