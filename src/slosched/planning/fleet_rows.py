"""What ``sweep --search`` compares: instance types (a GPU at a tensor parallelism, its price, its roofline
bound), one row per type with its count search's outcome, and the search's answer."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from slosched.evaluation.capacity import Spread
from slosched.planning.prices import per_dollar
from slosched.scenario.config import ClusterConfig, Scenario

GROUP = "fleet"


@dataclass(slots=True, frozen=True)
class FleetType:
    """One instance type: a GPU at a tensor parallelism, its price and its roofline throughput bound."""

    gpu: str
    tp: int
    price_per_gpu_hour: float | None
    roofline_rps: float  # jobs/s one instance cannot exceed
    fits: bool

    @property
    def label(self) -> str:
        return f"{self.gpu} tp{self.tp}"

    def floor(self, rate: float) -> int:
        """Fewer instances than this cannot carry ``rate`` (their summed roofline bound falls short)."""
        return max(1, math.ceil(rate / self.roofline_rps - 1e-9)) if self.roofline_rps > 0 else 1

    def cost(self, count: int) -> float | None:
        return None if self.price_per_gpu_hour is None else count * self.tp * self.price_per_gpu_hour


def fleet_scenario(scenario: Scenario, kind: FleetType, count: int) -> Scenario:
    """The scenario on ``count`` instances of ``kind`` (the first group's settings, KV derived per GPU)."""
    template = scenario.cluster.instances[0]
    update = {"name": GROUP, "gpu": kind.gpu, "tp": kind.tp, "count": count, "num_kv_blocks": None, "profile": None}
    group = template.model_copy(update=update)
    return scenario.model_copy(update={"cluster": ClusterConfig(instances=[group])})


@dataclass(slots=True)
class FleetRow:
    """One type's outcome: ``status`` is ``carries``, ``dearer`` (not carried by any count costing no more
    than a fleet already found), ``not carried`` (by ``MAX_COUNT``), ``pruned`` (its roofline floor alone
    costs more than a fleet found), ``no fit`` or ``no price``."""

    type: FleetType
    floor: int
    status: str = "pending"
    count: int | None = None
    # count -> the lower median over seeds of the judged attainment at the rate (``planning/probe.py``)
    tried: dict[int, float] = field(default_factory=dict)
    cut_short: set[int] = field(default_factory=set)  # counts whose figure is an upper bound (a cut run)
    capacity: Spread | None = None  # SLO capacity of the fleet found, at the target

    @property
    def cost_per_hour(self) -> float | None:
        return None if self.count is None else self.type.cost(self.count)

    @property
    def floor_cost(self) -> float:
        cost = self.type.cost(self.floor)
        return math.inf if cost is None else cost

    @property
    def per_dollar(self) -> float | None:
        return None if self.capacity is None else per_dollar(self.capacity.median, self.cost_per_hour)

    def as_json(self) -> dict[str, Any]:
        return {
            "gpu": self.type.gpu,
            "tp": self.type.tp,
            "status": self.status,
            "instances": self.count,
            "gpus": None if self.count is None else self.count * self.type.tp,
            "price_per_gpu_hour": self.type.price_per_gpu_hour,
            "cost_per_hour": self.cost_per_hour,
            "capacity_rps": None if self.capacity is None else self.capacity.as_json(),
            "capacity_per_dollar": self.per_dollar,
            "roofline_rps_per_instance": self.type.roofline_rps,
            "roofline_min_instances": self.floor,
            "attainment_by_count": {str(n): a for n, a in sorted(self.tried.items())},
            "attainment_cut_short": sorted(self.cut_short),
        }


@dataclass(slots=True)
class FleetSearch:
    rate: float
    target: float
    policy: str
    model: str
    rows: list[FleetRow]

    def ranked(self) -> list[FleetRow]:
        """Fleets that carry the rate, cheapest first (ties: larger capacity), then the others."""

        def key(row: FleetRow) -> tuple[float, float, float]:
            cost = row.cost_per_hour
            capacity = row.capacity.median if row.capacity is not None else 0.0
            return (0.0 if row.status == "carries" else 1.0, math.inf if cost is None else cost, -capacity)

        return sorted(self.rows, key=key)

    @property
    def answer(self) -> FleetRow | None:
        best = self.ranked()[0] if self.rows else None
        return best if best is not None and best.status == "carries" else None

    def as_json(self) -> dict[str, Any]:
        answer = self.answer
        return {
            "rate": self.rate,
            "target": self.target,
            "policy": self.policy,
            "model": self.model,
            "answer": None if answer is None else answer.as_json(),
            "candidates": [row.as_json() for row in self.ranked()],
        }
