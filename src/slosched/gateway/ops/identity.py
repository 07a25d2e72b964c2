"""Who is calling: the operator's API keys map to a tenant and what it may do (``Principal``).

Identity comes from the operator's configuration, never from the client: a tenant header is honoured only
for keys the operator allows to act for several tenants (``act_as``), or, with ``trust_tenant_header``, for
callers without a tenant of their own (open mode, legacy ``api_keys``). Every route of the gateway resolves a
``Principal`` first; the call's tenant, priority floor and SLO floor are the principal's.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

from slosched.contract import HEADER_API_KEY, HEADER_AUTHORIZATION, HEADER_TENANT
from slosched.gateway.calls.call import HttpError, SloHeaders, bad_request
from slosched.gateway.ops.config import GatewayConfig
from slosched.gateway.ops.tenants_config import ANY_TENANT, TenantConfig

DEFAULT_TENANT = "default"


@dataclass(frozen=True, slots=True)
class Principal:
    """One authenticated caller. ``priority`` is the operator's class for the tenant (lower runs first, as
    in vLLM); ``min_slo_s`` the tightest end-to-end deadline the tenant may ask for (None: any), and
    ``min_ttft_slo_s`` / ``min_tpot_slo_s`` its tightest token-latency targets;
    ``max_jobs`` how many jobs it may hold open at once (None: the gateway-wide ``max_jobs`` only).
    The limits (None: unlimited) are enforced by ``serve.limits.TenantLimits``."""

    tenant: str
    priority: float = 0.0
    min_slo_s: float | None = None
    max_jobs: int | None = None
    rate_limit_rps: float | None = None
    token_rate_limit_tps: float | None = None
    max_concurrency: int | None = None
    min_ttft_slo_s: float | None = None
    min_tpot_slo_s: float | None = None
    # Whose limit state the calls count against (None: ``tenant``'s): a key acting for a tenant the operator
    # did not configure spends its own budget, however many names it makes up.
    limits_of: str | None = None

    @property
    def limits_key(self) -> str:
        return self.tenant if self.limits_of is None else self.limits_of


ANONYMOUS = Principal(tenant=DEFAULT_TENANT)


@dataclass(frozen=True, slots=True)
class _Grant:
    """What one key (or, in open mode, every caller) may be: its tenant, and which others it may name."""

    principal: Principal
    act_as: frozenset[str]
    any_tenant: bool


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode()).digest()


def presented_key(headers: Mapping[str, str]) -> str | None:
    """``Authorization: Bearer K`` wins over ``x-api-key: K``; None when neither carries a key."""
    authorization = headers.get(HEADER_AUTHORIZATION)
    if authorization and authorization[:7].lower() == "bearer ":
        return authorization[7:].strip() or None
    return headers.get(HEADER_API_KEY) or None


class Identities:
    """API key -> ``Principal``, built once from the config (a reload builds a new one and swaps it in).

    Keys are looked up by their SHA-256 digest: the lookup's timing depends on the digest, which a caller
    cannot steer towards a real key, so it leaks nothing about the keys (constant-time comparison in effect,
    at O(1) for any number of keys)."""

    def __init__(
        self,
        tenants: Mapping[str, TenantConfig],
        legacy_keys: list[str],
        trust_tenant_header: bool,
        legacy_rates: Mapping[str, float],
        default_rate: float | None,
    ) -> None:
        self._principals = {name: _principal(name, tenant) for name, tenant in tenants.items()}
        self._legacy_rates = dict(legacy_rates)
        self._default_rate = default_rate
        self._open = _Grant(self.principal(DEFAULT_TENANT), frozenset(), trust_tenant_header)
        self._keys = {_digest(key): self._open for key in legacy_keys}
        for name, tenant in tenants.items():
            grant = _Grant(self._principals[name], frozenset(tenant.act_as), ANY_TENANT in tenant.act_as)
            self._keys.update((_digest(key), grant) for key in tenant.api_keys)

    @classmethod
    def from_config(cls, config: GatewayConfig) -> Identities:
        return cls(
            config.tenants,
            config.api_keys,
            config.trust_tenant_header,
            config.tenant_rate_limits,
            config.default_rate_limit,
        )

    @property
    def open(self) -> bool:
        """No key configured: every caller is let in (as tenant "default" unless the header is trusted)."""
        return not self._keys

    def principal(self, tenant: str) -> Principal:
        """The operator's principal for ``tenant``; a tenant not in ``tenants:`` gets the legacy rate limit
        (``tenant_rate_limits``, else ``default_rate_limit``) and no other limit."""
        known = self._principals.get(tenant)
        if known is not None:
            return known
        return Principal(tenant, rate_limit_rps=self._legacy_rates.get(tenant, self._default_rate))

    def resolve(self, headers: Mapping[str, str]) -> Principal:
        """The caller's principal; 401 for a missing or unknown key, 403 for naming a tenant it may not."""
        grant = self._open
        if self._keys:
            key = presented_key(headers)
            found = self._keys.get(_digest(key)) if key is not None else None
            if found is None:
                raise HttpError(401, "unauthorized", "missing or invalid API key")
            grant = found
        asked = headers.get(HEADER_TENANT)
        if asked is None or asked == grant.principal.tenant:
            return grant.principal
        if not 0 < len(asked) <= 128:
            raise bad_request(f"header {HEADER_TENANT}", "expected 1..128 characters")
        if grant.any_tenant or asked in grant.act_as:
            if asked in self._principals or grant is self._open:  # open mode: the header names the tenant
                return self.principal(asked)
            # A tenant the operator did not configure gets the caller's own class, floors and limits: acting
            # for a made-up name must not shed them.
            return dataclasses.replace(grant.principal, tenant=asked, limits_of=grant.principal.limits_key)
        raise HttpError(403, "forbidden", f"header {HEADER_TENANT}: this caller may not act as {asked[:64]!r}")


def _principal(name: str, tenant: TenantConfig) -> Principal:
    return Principal(
        name,
        tenant.priority,
        tenant.min_slo_s,
        tenant.max_jobs,
        tenant.rate_limit_rps,
        tenant.token_rate_limit_tps,
        tenant.max_concurrency,
        tenant.min_ttft_slo_s,
        tenant.min_tpot_slo_s,
    )


def scoped(slo: SloHeaders, principal: Principal) -> SloHeaders:
    """The client's SLO headers within what the operator allows: the principal's tenant, a priority no
    smaller (sooner) than its class, and deadline, TTFT and TPOT targets no tighter than the tenant's
    floors (``min_slo_s``, ``min_ttft_slo_s``, ``min_tpot_slo_s``): a tighter one is raised to the floor."""
    priority = max(slo.priority, principal.priority)
    deadline_ms = _floored(slo.deadline_ms, principal.min_slo_s)
    ttft_ms = _floored(slo.ttft_ms, principal.min_ttft_slo_s)
    tpot_ms = _floored(slo.tpot_ms, principal.min_tpot_slo_s)
    if (
        slo.tenant == principal.tenant
        and priority == slo.priority
        and deadline_ms == slo.deadline_ms
        and ttft_ms == slo.ttft_ms
        and tpot_ms == slo.tpot_ms
    ):
        return slo  # the common case: nothing to change (building a frozen dataclass costs ~3 us)
    return dataclasses.replace(
        slo, tenant=principal.tenant, priority=priority, deadline_ms=deadline_ms, ttft_ms=ttft_ms, tpot_ms=tpot_ms
    )


def _floored(asked_ms: float | None, floor_s: float | None) -> float | None:
    if floor_s is not None and asked_ms is not None and asked_ms < floor_s * 1000.0:
        return floor_s * 1000.0
    return asked_ms
