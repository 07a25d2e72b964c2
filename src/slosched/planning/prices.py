"""GPU prices for the cost columns of ``sweep``: the hardware file's list prices (``price_per_hour``), then
a scenario's ``prices:``, then ``--price GPU=USD`` on the command line, later ones winning."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.perf.hardware import canonical_gpu, gpu_facts


@dataclass(slots=True, frozen=True)
class Prices:
    """USD per GPU-hour by canonical GPU name, where it differs from the hardware file's."""

    overrides: tuple[tuple[str, float], ...] = ()

    @classmethod
    def of(cls, scenario_prices: Mapping[str, float] = {}, flags: Iterable[str] = ()) -> Prices:
        """The scenario's ``prices:`` then the ``--price GPU=USD`` flags (read-only default: never mutated)."""
        pairs = [(canonical_gpu(name), float(value)) for name, value in scenario_prices.items()]
        for text in flags:
            name, sep, value = text.partition("=")
            try:
                usd = float(value)
            except ValueError:
                usd = math.nan
            if not sep or not math.isfinite(usd) or usd < 0:
                raise ConfigError("--price", f"expected GPU=USD_PER_HOUR (e.g. H100=2.5), got {text[:64]!r}")
            pairs.append((canonical_gpu(name.strip()), usd))
        return cls(tuple(dict(pairs).items()))

    def per_gpu_hour(self, gpu: str) -> float | None:
        """One GPU's price per hour, None where neither the overrides nor the hardware file give one."""
        name = canonical_gpu(gpu)
        overridden = dict(self.overrides)
        if name in overridden:
            return overridden[name]
        price = gpu_facts(name).price_per_hour
        return float(price) if price is not None and price > 0 else None

    def fleet_per_hour(self, instances: Sequence[InstanceSpec]) -> float | None:
        """A cluster's price per hour (every instance's GPUs: ``tp`` each), None if any GPU has no price."""
        total = 0.0
        for spec in instances:
            price = self.per_gpu_hour(spec.gpu)
            if price is None:
                return None
            total += spec.tp * price
        return total


def per_dollar(capacity: float, cost_per_hour: float | None) -> float | None:
    """Jobs/s of capacity per USD/hour of fleet: the figure to rank fleets of different sizes by."""
    if cost_per_hour is None or not cost_per_hour > 0 or not math.isfinite(capacity):
        return None
    return capacity / cost_per_hour
