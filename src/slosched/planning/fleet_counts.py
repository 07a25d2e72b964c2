"""The count search of ``sweep --search`` and the capacity of the fleets it finds, on one kind of run.

**Counts.** One search over every type at once, always probing the cheapest count still open: per type the
count doubles from its roofline floor until it carries the rate, then bisects between the last failing and
the first passing count (attainment grows with the count, up to noise); a count costing more than the
cheapest fleet found so far is never probed (ties are: the table does not depend on which of two equal
fleets was found first). A type whose next open count already costs more is ``pruned`` (before any probe)
or ``dearer``. Probing the cheapest open count first finds a cheap fleet early, so the dear counts of the
other types are never run. Each count is ``planning/probe.py``'s verdict over seeds.

**Workers.** The search is sequential and deterministic; ``planning/speculate.py`` runs it on the workers
by running, beside the probe it needs, the one it would need next if the probes in flight fail. So the
table is the same for any number of workers.

**Capacity.** Each seed's capacity search of a fleet found asks ``probe`` at each rate (every run sized for
its own rate), from the search's rate, whose probe it already holds; so a fleet that carries ``R`` (more than
half of its seeds pass at ``R``) has a median capacity of at least ``R``: one definition, one answer.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from slosched.core.instance import InstanceSpec
from slosched.evaluation.capacity import Spread, find_capacity
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.planning.fleet_rows import GROUP, FleetRow, FleetType, MixRow, Parts, fleet_scenario
from slosched.planning.probe import Probe, lower_median, probe, seeds_verdict
from slosched.planning.sizing import MAX_COUNT
from slosched.planning.speculate import speculate
from slosched.planning.sweep import SweepSettings
from slosched.planning.workload import instances_with_counts, with_slo_reference, workbench_of
from slosched.scenario.config import Scenario

Unit = tuple[int, int, int]  # (row index, instance count, seed)
# The capacity search's first step up from the rate: a fleet found carries the rate with little to spare
# (its count is the smallest that does), so its capacity is usually within 25% above it.
CAPACITY_GROWTH = 1.25
_EPSILON = 1e-9  # USD/hour: equal costs compare equal despite float sums


@dataclass(slots=True, frozen=True)
class FleetProbe:
    """One run of the search (picklable: sent to worker processes)."""

    scenario: Scenario
    parts: Parts
    candidate: Candidate
    settings: SweepSettings
    reference: tuple[InstanceSpec, ...]
    seed: int
    rate: float
    target: float


def fleet_bench(task: FleetProbe) -> Workbench:
    """The fleet ``task.parts``, judged against the reference cluster's SLO scale."""
    scenario = fleet_scenario(task.scenario, task.parts)
    instances = instances_with_counts(scenario, {})
    bench = workbench_of(
        scenario, instances, task.settings.jobs_for(instances), GROUP, None, task.settings.work_tolerance
    )
    return with_slo_reference(bench, task.reference)


def fleet_probe(task: FleetProbe) -> Probe:
    return probe(fleet_bench(task), task.candidate, task.seed, task.rate, task.target)


@dataclass(slots=True)
class _Count:
    """One type's count search so far: counts up to ``fail_max`` fail, ``pass_min`` carries."""

    fail_max: int
    pass_min: int | None = None
    status: str = "pending"
    tried: dict[int, Probe] = field(default_factory=dict)


@dataclass(slots=True, frozen=True)
class CountSearch:
    kinds: tuple[FleetType, ...]
    floors: tuple[int, ...]
    seeds: tuple[int, ...]
    target: float

    def plan(self, results: Mapping[Unit, Probe]) -> Unit | None:
        return self.replay(results)[1]

    def replay(self, results: Mapping[Unit, Probe]) -> tuple[list[_Count], Unit | None]:
        """The search replayed on ``results``: each type's state, and the run it needs next (None: done)."""
        states = [_Count(floor - 1) for floor in self.floors]
        while (pick := self._pick(states)) is not None:
            index, count = pick
            runs: list[Probe] = []
            verdict = None
            for seed in self.seeds:
                if (index, count, seed) not in results:
                    return states, (index, count, seed)
                runs.append(results[index, count, seed])
                verdict = seeds_verdict(runs, len(self.seeds), self.target)
                if verdict is not None:
                    break
            state = states[index]
            state.tried[count] = lower_median(runs)
            if verdict:
                state.pass_min = count
            else:
                state.fail_max = count
        return states, None

    def _pick(self, states: list[_Count]) -> tuple[int, int] | None:
        """The cheapest open count of any type (ties: the first type); closes the types with none."""
        found = [_cost(kind, state.pass_min) for kind, state in zip(self.kinds, states, strict=True) if state.pass_min]
        best = min(found, default=math.inf)
        choice: tuple[float, int, int] | None = None
        for index, state in enumerate(states):
            count = _next_count(self.kinds[index], state, best) if state.status == "pending" else None
            if count is not None and (choice is None or _cost(self.kinds[index], count) < choice[0] - _EPSILON):
                choice = (_cost(self.kinds[index], count), index, count)
        return None if choice is None else (choice[1], choice[2])


def _cost(kind: FleetType, count: int) -> float:
    cost = kind.cost(count)
    assert cost is not None, "types without a price are not searched"
    return cost


def _next_count(kind: FleetType, state: _Count, best: float) -> int | None:
    """The count ``state``'s type probes next, or None with its final status set."""
    low = state.fail_max + 1  # the smallest count not known to fail
    if state.pass_min is not None and state.pass_min <= low:
        state.status = "carries"
    elif low > MAX_COUNT:
        state.status = "not carried"
    elif _cost(kind, low) > best + _EPSILON:
        state.status = "dearer" if state.tried else "pruned"
    else:
        affordable = math.floor(best / _cost(kind, 1) + _EPSILON) if math.isfinite(best) else MAX_COUNT
        if state.pass_min is not None:
            count = (state.fail_max + state.pass_min) // 2
        else:
            count = 2 * state.fail_max if state.tried else low
        return max(low, min(count, affordable, MAX_COUNT))
    return None


def search_counts(rows: Sequence[FleetRow], probe_of: FleetProbe) -> list[dict[int, float]]:
    """Each row's count search (statuses, counts and figures set on ``rows``); ``probe_of`` is the run
    template (its parts and seed replaced per run). Returns, per row, its carried count's figures at the
    rate by seed (for its capacity search; empty where none carries)."""
    search = CountSearch(
        tuple(row.type for row in rows), tuple(row.floor for row in rows), probe_of.settings.seeds, probe_of.target
    )

    def task_of(unit: Unit) -> FleetProbe:
        index, count, seed = unit
        return replace(probe_of, parts=((rows[index].type, count),), seed=seed)

    settings = probe_of.settings
    failing = Probe(0.0, exact=False)  # the guess for runs in flight: cheap counts mostly fail
    where = settings.ray_address
    results = speculate(search.plan, task_of, fleet_probe, failing, settings.workers, where, "fleet search")
    states, _ = search.replay(results)
    for row, state in zip(rows, states, strict=True):
        row.status = state.status
        row.count = state.pass_min if state.status == "carries" else None
        row.tried = {count: found.value for count, found in sorted(state.tried.items())}
        row.cut_short = {count for count, found in state.tried.items() if not found.exact}
    return [
        {seed: results[index, row.count, seed].value for seed in settings.seeds if (index, row.count, seed) in results}
        if row.count is not None
        else {}
        for index, row in enumerate(rows)
    ]


@dataclass(slots=True, frozen=True)
class SeedCapacity:
    """One seed's capacity search of one fleet, from ``probe.rate`` (``known``: its probe there, if run)."""

    probe: FleetProbe
    known: float | None
    precision: float


def seed_capacity(task: SeedCapacity) -> float:
    """The highest rate whose probe passes on the seed, to ``precision`` (module docstring)."""
    run = task.probe
    bench = fleet_bench(run)
    cache = {} if task.known is None else {run.rate: task.known}

    def attainment(rate: float) -> float:
        return probe(bench, run.candidate, run.seed, rate, run.target).value

    return find_capacity(attainment, run.target, run.rate, task.precision, cache, CAPACITY_GROWTH, widen=True)


def measure_capacity(found: Sequence[tuple[FleetRow | MixRow, dict[int, float]]], probe_of: FleetProbe) -> None:
    """The SLO capacity (median over seeds, with the spread) of each fleet found to carry, with its figures
    at the rate by seed (the runs its count probe made)."""
    if not found:
        return
    settings = probe_of.settings
    tasks = [
        SeedCapacity(replace(probe_of, parts=row.parts, seed=seed), known.get(seed), settings.precision)
        for row, known in found
        for seed in settings.seeds
    ]
    description = f"fleet capacity: {len(tasks)} searches"
    capacities = run_tasks(seed_capacity, tasks, description, settings.workers, settings.ray_address)
    per_row = len(settings.seeds)
    for position, (row, _) in enumerate(found):
        row.capacity = Spread.of(capacities[position * per_row : (position + 1) * per_row])
