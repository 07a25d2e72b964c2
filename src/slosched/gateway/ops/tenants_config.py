"""The operator's tenants (``tenants:`` in the gateway config): API keys, class priority, SLO floor, limits.

Keys are secrets: validation errors name the tenant and the key's position, never the key itself.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints, ValidationInfo
from pydantic_core import PydanticCustomError

TenantName = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=r"^[^*]")]
ApiKey = Annotated[str, StringConstraints(min_length=1, max_length=512)]
ANY_TENANT = "*"


class TenantConfig(BaseModel):
    """One tenant. ``priority`` is its class (lower runs first, as in vLLM): a client may ask for a larger
    (later) priority, never a smaller one. ``min_slo_s``: the tightest end-to-end deadline it may ask for;
    ``min_ttft_slo_s`` / ``min_tpot_slo_s`` the tightest TTFT / TPOT targets (orderings that weigh token
    latency would otherwise let a tenant jump the queue by asking for 1 ms).
    Every limit is None for unlimited; ``max_jobs`` None means the gateway-wide ``max_jobs`` only.
    ``act_as``: tenants its keys may name in ``x-tenant`` (``"*"``: any).
    ``weight``: its share of queue places and engine slots against the other active tenants (fair sharing;
    setting any tenant's weight turns it on, unlisted tenants weigh ``fair_share.default_weight``); its
    ``priority`` is then also its band: a lower band is served first, within ``fair_share.max_wait_s``."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    api_keys: list[ApiKey] = Field(default_factory=list)
    priority: float = Field(default=0.0, allow_inf_nan=False)
    min_slo_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    min_ttft_slo_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    min_tpot_slo_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    rate_limit_rps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    token_rate_limit_tps: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    max_concurrency: int | None = Field(default=None, ge=1)
    max_jobs: int | None = Field(default=None, ge=1)
    weight: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    act_as: list[Annotated[str, StringConstraints(min_length=1, max_length=128)]] = Field(default_factory=list)


def _unique_keys(tenants: dict[str, TenantConfig], info: ValidationInfo) -> dict[str, TenantConfig]:
    """A key identifies exactly one tenant: no key twice, across tenants and the legacy ``api_keys``."""
    owners: dict[str, str] = {}
    legacy = info.data.get("api_keys") or []
    for index, key in enumerate(legacy):
        owners.setdefault(key, f"api_keys[{index}]")
    for name, tenant in tenants.items():
        for index, key in enumerate(tenant.api_keys):
            where = f"tenants.{name}.api_keys[{index}]"
            first = owners.setdefault(key, where)
            if first != where:
                raise PydanticCustomError(
                    "duplicate_api_key",
                    "{where}: the same key is already {first}; keys must be unique",
                    {"where": where, "first": first},
                )
    return tenants


Tenants = Annotated[dict[TenantName, TenantConfig], AfterValidator(_unique_keys)]
