"""``FairShareSpec``: the configuration of fair sharing (tenant weights, bands, starvation bound).

No spec at all means no fair sharing: every runtime then behaves exactly as before (first come, first served
over queue places, the engine ordering alone over slots).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from slosched.core.errors import ConfigError

DEFAULT_MAX_WAIT_S = 30.0


def _finite(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(where, f"expected a finite number, got {value!r}")
    return float(value)


def _positive(value: Any, where: str) -> float:
    if _finite(value, where) <= 0:
        raise ConfigError(where, f"must be > 0, got {value}")
    return float(value)


@dataclass(slots=True, frozen=True)
class FairShareSpec:
    """``weights``: ``(tenant, weight)``; a tenant not listed weighs ``default_weight``. A backlogged tenant gets
    ``weight / sum of the backlogged tenants' weights`` of the service (tokens) and of the queue places.
    ``bands``: ``(tenant, band)``, lower first (the tenant's class; not listed: 0): a band is served before
    every higher one, except that a call waiting ``max_wait_s`` or longer is served before any call that has
    not (oldest first), so no band starves past the bound."""

    weights: tuple[tuple[str, float], ...] = ()
    bands: tuple[tuple[str, float], ...] = ()
    default_weight: float = 1.0
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    _weight: dict[str, float] = field(init=False, repr=False, compare=False)
    _band: dict[str, float] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        weights = {str(name): _positive(w, f"fair_share.tenants.{name}.weight") for name, w in self.weights}
        bands = {str(name): _finite(band, f"fair_share.tenants.{name}.band") for name, band in self.bands}
        _positive(self.default_weight, "fair_share.default_weight")
        _positive(self.max_wait_s, "fair_share.max_wait_s")
        object.__setattr__(self, "_weight", weights)
        object.__setattr__(self, "_band", bands)

    def weight_of(self, tenant: str) -> float:
        return self._weight.get(tenant, self.default_weight)

    def band_of(self, tenant: str) -> float:
        return self._band.get(tenant, 0.0)

    @classmethod
    def from_mapping(cls, data: Any, where: str = "fair_share") -> FairShareSpec:
        """``{tenants: {NAME: {weight, band}}, default_weight, max_wait_s}`` (a scenario's ``fair_share``)."""
        if not isinstance(data, Mapping):
            raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
        unknown = set(data) - {"tenants", "default_weight", "max_wait_s"}
        if unknown:
            raise ConfigError(where, f"unknown {sorted(unknown)}; allowed: default_weight, max_wait_s, tenants")
        tenants = data.get("tenants") or {}
        if not isinstance(tenants, Mapping):
            raise ConfigError(f"{where}.tenants", "expected a mapping of tenant -> {weight, band}")
        weights, bands = [], []
        for name, entry in tenants.items():
            if not isinstance(entry, Mapping) or set(entry) - {"weight", "band"}:
                raise ConfigError(f"{where}.tenants.{name}", "expected {weight: number > 0, band: number}")
            if "weight" in entry:
                weights.append((str(name), _positive(entry["weight"], f"{where}.tenants.{name}.weight")))
            if "band" in entry:
                bands.append((str(name), _finite(entry["band"], f"{where}.tenants.{name}.band")))
        return cls(
            tuple(weights),
            tuple(bands),
            _positive(data.get("default_weight", 1.0), f"{where}.default_weight"),
            _positive(data.get("max_wait_s", DEFAULT_MAX_WAIT_S), f"{where}.max_wait_s"),
        )
