"""``slosched sweep``: SLO capacity of every policy on every instance mix of every workload.

SLO capacity is the scoreboard's (DESIGN section 9, ``evaluation/steady.py``): the highest arrival rate at
which at least the target share of jobs (90%, and 95% reported too) meets its SLO, over all measured jobs and
over those arriving in the second half of the window (up to its sampling error: ``evaluation/judgement.py``),
by bisection on the rate to a relative precision, per
seed, with runs long enough for a backlog to show (regrown after a search when the capacity found needs
more jobs); reported as the median over seeds with the min-max spread. Every (workload, mix, policy, seed)
search is one task; tasks run in local worker processes or on a Ray cluster. Where a workload cannot give
the runs it needs (a short trace), the sweep says so in ``warnings``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slosched.core.errors import Interrupted
from slosched.core.instance import InstanceSpec
from slosched.evaluation.capacity import Spread
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.steady import SteadyCapacity, SteadySearch, steady_capacity
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.planning.prices import Prices, per_dollar
from slosched.planning.workload import candidates_of, instances_with_counts, with_slo_reference, workbench_of
from slosched.scenario.config import Scenario

TARGETS = (0.90, 0.95)


@dataclass(slots=True, frozen=True)
class Mix:
    """An instance mix: counts of the scenario's instance groups (groups not named keep their count)."""

    label: str
    counts: tuple[tuple[str, int], ...] = ()

    @classmethod
    def parse(cls, text: str) -> Mix:
        """``LABEL=GROUP:COUNT,GROUP:COUNT`` or ``GROUP:COUNT,...`` (labelled by itself)."""
        from slosched.core.errors import ConfigError

        label, _, body = text.rpartition("=")
        pairs: list[tuple[str, int]] = []
        for part in filter(None, (piece.strip() for piece in body.split(","))):
            name, sep, count = part.partition(":")
            if not sep or not count.strip().isdigit():
                raise ConfigError("--mix", f"expected GROUP:COUNT, got {part[:64]!r} (e.g. 'a100:2,a6000:4')")
            pairs.append((name.strip(), int(count)))
        if not pairs:
            raise ConfigError("--mix", f"expected [LABEL=]GROUP:COUNT[,GROUP:COUNT...], got {text[:64]!r}")
        return cls(label=label or body, counts=tuple(pairs))


@dataclass(slots=True, frozen=True)
class Workload:
    """One scenario of the sweep (its workload, SLO and cluster), by label."""

    label: str
    scenario: Scenario
    # Instances whose fastest one the SLO scale refers to (empty: each mix's own; see ``SimOptions``).
    slo_reference: tuple[InstanceSpec, ...] = ()


@dataclass(slots=True, frozen=True)
class SweepSettings:
    seeds: tuple[int, ...] = (0, 1, 2)
    num_jobs: int = 300  # the floor of measured jobs per run (the warm-up prefix follows from the count)
    precision: float = 0.02
    targets: tuple[float, ...] = TARGETS
    workers: int = 2
    ray_address: str | None = None
    # Measured jobs per run are at least this many per running slot of the cluster: a run with fewer jobs
    # than the cluster serves at once is a burst the engines absorb, and its "capacity" is not sustainable.
    jobs_per_slot: float = 8.0
    # The work rule's tolerance (``evaluation/sizing.py``): on in the full sweep, as in every bench's full form.
    work_tolerance: float | None = None

    def jobs_for(self, instances: Sequence[InstanceSpec]) -> int:
        """The floor of measured jobs per run on this cluster (the steady-state rule may ask for more); the
        warm-up prefix follows from it (``warmup_jobs``), as it does for ``compare``."""
        slots = sum(spec.max_running for spec in instances)
        return max(self.num_jobs, int(self.jobs_per_slot * slots))


@dataclass(slots=True, frozen=True)
class CapacityTask:
    workbench: Workbench
    candidate: Candidate
    seed: int
    guess: float
    precision: float
    targets: tuple[float, ...]


def capacity_task(task: CapacityTask) -> SteadyCapacity:
    """The steady-state capacity at each target for one seed (module level: pickled to workers and Ray
    tasks). Targets from the loosest: a stricter target's search reuses the measured points."""
    search = SteadySearch(guess=task.guess, targets=tuple(sorted(task.targets)), precision=task.precision)
    return steady_capacity(task.workbench, task.candidate, task.seed, search)


@dataclass(slots=True)
class SweepRow:
    workload: str
    mix: str
    policy: str
    instances: tuple[str, ...]  # GPU of each instance
    capacity: dict[float, Spread] = field(default_factory=dict)
    searches: tuple[SteadyCapacity, ...] = ()  # per seed: job count, attainment at capacity
    cost_per_hour: float | None = None  # USD for the mix's GPUs (None: a GPU without a price)

    def per_dollar(self, target: float = 0.90) -> float | None:
        """Median capacity at ``target`` per USD/hour of the mix."""
        return per_dollar(self.capacity[target].median, self.cost_per_hour) if target in self.capacity else None

    def as_json(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "mix": self.mix,
            "policy": self.policy,
            "gpus": gpu_counts(self.instances),
            "capacity_rps": {f"{target:.2f}": spread.as_json() for target, spread in self.capacity.items()},
            "num_jobs": [search.num_jobs for search in self.searches],
            "attainment_at_capacity": {
                "all": [search.attainment[0] for search in self.searches],
                "second_half": [search.attainment[1] for search in self.searches],
                "judged": [search.judged for search in self.searches],
            },
            "steady_sized": all(search.sized for search in self.searches),
            "cost_per_hour": self.cost_per_hour,
            "capacity_per_dollar": {f"{target:.2f}": self.per_dollar(target) for target in self.capacity},
        }

    def warnings(self) -> list[str]:
        """What made this row's runs shorter than the steady-state rule needs, one line each."""
        where = f"{self.workload}/{self.mix} {self.policy}"
        out = []
        for seed, search in enumerate(self.searches):
            if search.available_jobs < search.num_jobs:
                out.append(
                    f"{where}: the workload holds {search.available_jobs} jobs, runs need {search.num_jobs} "
                    f"(seed #{seed}); its capacity is not a steady-state figure"
                )
            elif search.needed_jobs > search.num_jobs:
                out.append(
                    f"{where}: runs of {search.num_jobs} jobs are shorter than the {search.needed_jobs} the "
                    f"capacity found needs (seed #{seed}); the figure may be a burst cleared"
                )
        return out


def gpu_counts(gpus: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for gpu in gpus:
        counts[gpu] = counts.get(gpu, 0) + 1
    return counts


def first_guess(scenario: Scenario) -> float:
    """The user's own rate when the scenario has one (capacity is usually near it), else 1 job/s."""
    rate = scenario.workload.arrival.get("rate")
    return float(rate) if isinstance(rate, int | float) and rate > 0 else 1.0


def sweep_warnings(rows: Sequence[SweepRow]) -> list[str]:
    """Every row's warnings, each line once."""
    return list(dict.fromkeys(line for row in rows for line in row.warnings()))


def sweep(
    workloads: Sequence[Workload],
    mixes: Sequence[Mix],
    policies: Sequence[str] | None,
    settings: SweepSettings,
    prices: Prices | None = None,
) -> list[SweepRow]:
    """One row per (workload, mix, policy); ``policies`` None takes each scenario's own list; each row's
    hourly cost at ``prices`` (default: the hardware file's)."""
    prices = prices or Prices()
    rows: list[SweepRow] = []
    tasks: list[CapacityTask] = []
    for workload in workloads:
        scenario = workload.scenario
        for mix in mixes or (Mix("as-given"),):
            instances = instances_with_counts(scenario, dict(mix.counts))
            label = f"{workload.label}/{mix.label}"
            bench = workbench_of(
                scenario, instances, settings.jobs_for(instances), label, None, settings.work_tolerance
            )
            bench = with_slo_reference(bench, workload.slo_reference)
            for candidate in candidates_of(scenario, policies or scenario.policies):
                gpus = tuple(s.gpu for s in instances)
                rows.append(
                    SweepRow(
                        workload.label, mix.label, candidate.label, gpus, cost_per_hour=prices.fleet_per_hour(instances)
                    )
                )
                tasks.extend(
                    CapacityTask(bench, candidate, seed, first_guess(scenario), settings.precision, settings.targets)
                    for seed in settings.seeds
                )
    description = f"sweep: {len(tasks)} capacity searches"
    try:
        found = run_tasks(capacity_task, tasks, description, settings.workers, settings.ray_address)
    except Interrupted as stop:  # Ctrl-C: the rows whose every seed finished
        raise Interrupted(_filled(rows, stop.partial, settings)) from None
    return _filled(rows, found, settings)


def _filled(rows: list[SweepRow], found: Sequence[Any], settings: SweepSettings) -> list[SweepRow]:
    """``rows`` with their capacities from ``found`` (per row, one search per seed); a row with a search
    that did not finish (None: interrupted) is left out."""
    per_row = len(settings.seeds)
    complete = []
    for index, row in enumerate(rows):
        runs = found[index * per_row : (index + 1) * per_row]
        if any(run is None for run in runs):
            continue
        row.capacity = {t: Spread.of([run.capacity[t] for run in runs]) for t in sorted(settings.targets)}
        row.searches = tuple(runs)
        complete.append(row)
    return complete


def capacity_by_policy(rows: Sequence[SweepRow], target: float = 0.90) -> dict[str, float]:
    """Median capacity per policy on the first (workload, mix): the headline of ``--json``."""
    if not rows:
        return {}
    first = (rows[0].workload, rows[0].mix)
    return {row.policy: row.capacity[target].median for row in rows if (row.workload, row.mix) == first}


def best_by_cell(rows: Sequence[SweepRow], target: float = 0.90) -> Mapping[tuple[str, str], SweepRow]:
    """The policy with the highest median capacity per (workload, mix)."""
    best: dict[tuple[str, str], SweepRow] = {}
    for row in rows:
        key = (row.workload, row.mix)
        if key not in best or row.capacity[target].median > best[key].capacity[target].median:
            best[key] = row
    return best
