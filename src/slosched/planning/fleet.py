"""``slosched sweep --search``: the cheapest fleet (GPU type x tensor parallelism x instance count) that
carries a rate at a target attainment, for one scenario's workload, model and policy.

Like Vidur's configuration search, fleets are homogeneous: one instance type (GPU, TP) repeated. The
scenario's first instance group is the template (model, engine limits, software stack); its GPU and TP
vary, and KV memory is derived for each GPU. The SLO stays the scenario's: scaled deadlines refer to the
fastest instance of the scenario's own cluster (``SimOptions.slo_reference``), so a fleet of slow GPUs is
not judged against deadlines its slowness loosened.

The search reuses the fleet-sizing bisection (``planning/sizing.py``) and the roofline prunes it:

- **Fit.** A type whose KV cache beside the weights holds fewer tokens than ``max_model_len`` is
  skipped (vLLM refuses to start there).
- **Floor.** Every token a job computes (its calls' uncached prompt tokens, the shared prefix assumed
  cached, and its output tokens) costs at least the dense projections' compute per token on the GPU; so
  one instance carries at most ``roofline_rps`` jobs/s and fewer than ``ceil(rate / roofline_rps)``
  instances cannot carry the rate. The bisection starts at that count, not at 1.
- **Bound.** Types are tried cheapest floor cost first, ``workers`` at a time; a type whose floor cost
  already exceeds the cheapest fleet measured to carry the rate is pruned without a run, and a type's
  count search stops at the largest count costing no more than that fleet (``dearer`` past it).

The cheapest fleets found (``measure``, default 3) then get their SLO capacity (``sweep``'s steady-state
search) for the capacity and capacity-per-dollar columns: a capacity search costs several bisections' worth
of runs. The answer is the cheapest fleet (ties: the larger capacity).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.evaluation.capacity import Spread
from slosched.evaluation.runners import run_tasks
from slosched.perf.hardware import gpu_names, model_facts
from slosched.perf.roofline import CALIBRATION, RooflineModel
from slosched.planning.prices import Prices, per_dollar
from slosched.planning.sizing import MAX_COUNT, SizingTask, min_passing, sizing_task
from slosched.planning.sweep import SweepSettings, Workload, sweep
from slosched.planning.workload import ScenarioJobs, candidates_of, instances_with_counts
from slosched.scenario.config import ClusterConfig, Scenario

TP_CHOICES = (1, 2, 4, 8)
GROUP = "fleet"
# A per-token floor far past any step size: the dense projections' compute per token, nothing amortised.
_FLOOR_TOKENS = 1 << 20


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


@dataclass(slots=True)
class FleetRow:
    """One type's outcome: ``status`` is ``carries``, ``dearer`` (not carried by any count costing no more
    than a fleet already found), ``not carried`` (by ``MAX_COUNT``), ``pruned`` (its roofline floor alone
    costs more than a fleet found), ``no fit`` or ``no price``."""

    type: FleetType
    floor: int
    status: str = "pending"
    count: int | None = None
    tried: dict[int, float] = field(default_factory=dict)  # count -> median attainment at the rate
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


def tokens_per_job(jobs: Sequence[JobSpec]) -> float:
    """Mean tokens a job makes its instance compute at the least: each call's prompt past its shared prefix
    (at least one token) and its output."""
    if not jobs:
        return 1.0
    total = 0
    for job in jobs:
        for stage in job.stages:
            for call in stage.calls:
                total += max(1, call.input_tokens - call.prefix_tokens) + call.output_tokens
    return max(1.0, total / len(jobs))


def fleet_types(
    template: InstanceSpec, gpus: Sequence[str], tps: Sequence[int] | None, prices: Prices, job_tokens: float
) -> list[FleetType]:
    """Every (GPU, TP) the model shards onto. Without ``tps``: per GPU, the smallest TP that fits and twice
    it (more rarely pays for its GPUs; ``--tp`` asks for others)."""
    heads = model_facts(template.model).heads
    out: list[FleetType] = []
    for gpu in gpus:
        kinds = []
        for tp in tps or TP_CHOICES:
            if heads % tp:
                continue
            roofline = RooflineModel.build(gpu, template.model, tp, template.stack)
            blocks = roofline.num_kv_blocks(template.gpu_memory_utilization, template.block_size)
            per_token_s = roofline.linear_time_s(_FLOOR_TOKENS) / _FLOOR_TOKENS
            fits = blocks * template.block_size >= template.max_model_len
            kinds.append(FleetType(gpu, tp, prices.per_gpu_hour(gpu), 1.0 / (job_tokens * per_token_s), fits))
        if tps is None:
            first = next((k.tp for k in kinds if k.fits), None)
            kinds = [k for k in kinds if first is None or k.tp in (first, 2 * first)][:2]
        out.extend(kinds)
    return out


def fleet_scenario(scenario: Scenario, kind: FleetType, count: int) -> Scenario:
    """The scenario on ``count`` instances of ``kind`` (the first group's settings, KV derived per GPU)."""
    template = scenario.cluster.instances[0]
    update = {"name": GROUP, "gpu": kind.gpu, "tp": kind.tp, "count": count, "num_kv_blocks": None, "profile": None}
    group = template.model_copy(update=update)
    return scenario.model_copy(update={"cluster": ClusterConfig(instances=[group])})


def calibrated_gpus() -> list[str]:
    """The default candidates: GPUs with fitted efficiencies of their own. The others (H200, B200, L4, MI300X)
    borrow another GPU's (``efficiency_like``), an assumption a purchase should not rest on unasked:
    ``--gpus`` names them explicitly."""
    return [name for name in gpu_names() if name in CALIBRATION.gpus]


def search_fleet(
    scenario: Scenario,
    rate: float,
    target: float,
    policy: str,
    settings: SweepSettings,
    prices: Prices,
    gpus: Sequence[str] | None = None,
    tps: Sequence[int] | None = None,
    measure: int = 3,
) -> FleetSearch:
    """The cheapest homogeneous fleet that carries ``rate`` jobs/s at ``target`` (module docstring); the SLO
    capacity of the ``measure`` cheapest fleets found."""
    if not rate > 0:
        raise ConfigError("--rate", f"must be > 0 jobs/s, got {rate}")
    if measure < 0:
        raise ConfigError("--measure", f"must be >= 0, got {measure}")
    reference = instances_with_counts(scenario, {})
    template = reference[0]
    jobs = ScenarioJobs(scenario)(settings.num_jobs, settings.seeds[0])
    kinds = fleet_types(template, gpus or calibrated_gpus(), tps, prices, tokens_per_job(jobs))
    rows = [FleetRow(kind, kind.floor(rate)) for kind in kinds]
    for row in rows:
        if not row.type.fits:
            row.status = "no fit"
        elif row.type.price_per_gpu_hour is None:
            row.status = "no price"
    _bisect_counts(scenario, [r for r in rows if r.status == "pending"], rate, target, policy, settings, reference)
    # Capacity searches cost far more than the bisection (runs at the capacity, regrown): the cheapest few.
    carried = sorted((row for row in rows if row.status == "carries"), key=lambda row: row.cost_per_hour or 0.0)
    _measure_capacity(scenario, carried[:measure], policy, target, settings, prices, reference)
    return FleetSearch(rate, target, policy, template.model, rows)


def _bisect_counts(
    scenario: Scenario,
    rows: list[FleetRow],
    rate: float,
    target: float,
    policy: str,
    settings: SweepSettings,
    reference: Sequence[InstanceSpec],
) -> None:
    """Each row's smallest count carrying ``rate``, cheapest floor first, pruning by the best cost found."""
    (candidate,) = candidates_of(scenario, [policy])
    queue = sorted(rows, key=lambda row: row.floor_cost)
    best = math.inf
    while queue:
        for row in queue:
            if row.floor_cost > best:
                row.status = "pruned"
        queue = [row for row in queue if row.status == "pending"]
        wave, queue = queue[: settings.workers], queue[settings.workers :]
        caps = [_affordable(row.type, best) for row in wave]
        tasks = [
            SizingTask(
                fleet_scenario(scenario, row.type, row.floor),
                GROUP,
                candidate,
                rate,
                target,
                settings,
                start=row.floor,
                slo_reference=tuple(reference),
                max_count=cap,
            )
            for row, cap in zip(wave, caps, strict=True)
        ]
        found = run_tasks(
            sizing_task, tasks, f"fleet search: {len(tasks)} types", settings.workers, settings.ray_address
        )
        for row, tried, cap in zip(wave, found, caps, strict=True):
            row.tried, row.count = tried, min_passing(tried, target)
            row.status = "carries" if row.count is not None else "dearer" if cap < MAX_COUNT else "not carried"
            cost = row.cost_per_hour
            if cost is not None:
                best = min(best, cost)


def _affordable(kind: FleetType, best: float) -> int:
    """The most instances of ``kind`` costing no more than ``best`` USD/hour (``MAX_COUNT`` if none found)."""
    if not math.isfinite(best) or kind.price_per_gpu_hour is None or kind.price_per_gpu_hour <= 0:
        return MAX_COUNT
    return min(MAX_COUNT, max(1, math.floor(best / (kind.tp * kind.price_per_gpu_hour) + 1e-9)))


def _measure_capacity(
    scenario: Scenario,
    rows: list[FleetRow],
    policy: str,
    target: float,
    settings: SweepSettings,
    prices: Prices,
    reference: Sequence[InstanceSpec],
) -> None:
    """Each fleet found: its SLO capacity at the target, by ``sweep``'s steady-state search."""
    if not rows:
        return
    workloads = [
        Workload(row.type.label, fleet_scenario(scenario, row.type, row.count or 1), tuple(reference)) for row in rows
    ]
    found = sweep(workloads, [], [policy], settings, prices)
    for row, result in zip(rows, found, strict=True):
        row.capacity = result.capacity.get(target)
