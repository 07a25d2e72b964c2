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


# A fleet: (instance type, count) parts; one part is a homogeneous fleet.
Parts = tuple[tuple[FleetType, int], ...]


def fleet_scenario(scenario: Scenario, parts: Parts) -> Scenario:
    """The scenario on ``parts`` (each an instance group with the first group's settings, its GPU and TP,
    KV derived per GPU)."""
    template = scenario.cluster.instances[0]
    groups = []
    for kind, count in parts:
        name = GROUP if len(parts) == 1 else f"{GROUP}-{kind.gpu}-tp{kind.tp}"
        update = {"name": name, "gpu": kind.gpu, "tp": kind.tp, "count": count, "num_kv_blocks": None, "profile": None}
        groups.append(template.model_copy(update=update))
    return scenario.model_copy(update={"cluster": ClusterConfig(instances=groups)})


def parts_cost(parts: Parts) -> float | None:
    costs = [kind.cost(count) for kind, count in parts]
    return None if any(cost is None for cost in costs) else sum(cost or 0.0 for cost in costs)


def describe(parts: Parts) -> str:
    """``2 x A100-40G (tp 1)`` or ``1 x A100-40G (tp 1) + 1 x A40 (tp 1)``."""
    return " + ".join(f"{count} x {kind.gpu} (tp {kind.tp})" for kind, count in parts)


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
    def parts(self) -> Parts:
        """The fleet found (none while no count carries)."""
        return () if self.count is None else ((self.type, self.count),)

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
            "parts": _parts_json(self.parts),
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
class MixRow:
    """A fleet of two instance types (``planning/fleet_mixes.py``): ``carries`` or ``not carried`` at its
    counts; ``figure`` is the lower median over the seeds run of the judged attainment at the rate."""

    parts: Parts
    status: str = "pending"
    figure: float | None = None
    cut_short: bool = False  # the figure is an upper bound (a run cut short)
    capacity: Spread | None = None

    @property
    def cost_per_hour(self) -> float | None:
        return parts_cost(self.parts)

    @property
    def per_dollar(self) -> float | None:
        return None if self.capacity is None else per_dollar(self.capacity.median, self.cost_per_hour)

    def as_json(self) -> dict[str, Any]:
        return {
            "parts": _parts_json(self.parts),
            "status": self.status,
            "instances": sum(count for _, count in self.parts),
            "gpus": sum(count * kind.tp for kind, count in self.parts),
            "cost_per_hour": self.cost_per_hour,
            "capacity_rps": None if self.capacity is None else self.capacity.as_json(),
            "capacity_per_dollar": self.per_dollar,
            "attainment": self.figure,
            "attainment_cut_short": self.cut_short,
        }


def _parts_json(parts: Parts) -> list[dict[str, Any]]:
    return [{"gpu": kind.gpu, "tp": kind.tp, "instances": count} for kind, count in parts]


@dataclass(slots=True)
class FleetSearch:
    rate: float
    target: float
    policy: str
    model: str
    rows: list[FleetRow]
    mixes: list[MixRow] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def ranked(self) -> list[FleetRow | MixRow]:
        """Fleets that carry the rate, cheapest first (ties: larger capacity; then one type before a mix),
        then the others."""

        def key(row: FleetRow | MixRow) -> tuple[float, float, float, int]:
            cost = row.cost_per_hour
            capacity = row.capacity.median if row.capacity is not None else 0.0
            order = 0 if isinstance(row, FleetRow) else 1
            return (0.0 if row.status == "carries" else 1.0, math.inf if cost is None else cost, -capacity, order)

        return sorted([*self.rows, *self.mixes], key=key)

    @property
    def answer(self) -> FleetRow | MixRow | None:
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
            "candidates": [row.as_json() for row in self.ranked() if isinstance(row, FleetRow)],
            "mixes": [row.as_json() for row in self.ranked() if isinstance(row, MixRow)],
        }
