"""The smallest number of instances of one GPU group (and its hourly cost) that carries a rate at a target.

"How many A100s, or how many H100s, for 12 requests/s at 90%?": for each sized group, the cluster is that
group alone with ``n`` instances, and ``n`` is the smallest count that carries the rate at the target by
``planning/probe.py``'s verdict (more than half of the seeds pass, each run sized for the rate and cut short
once its misses decide it; the figure per count is the lower median over the seeds run). The search doubles
``n`` from 1 until the target is met, then bisects between the last failing and the first passing count
(attainment grows with the count, up to noise: the answer is a count that was measured to pass, with the
one below it measured to fail).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slosched.core.errors import ConfigError, Interrupted
from slosched.evaluation.runners import run_tasks
from slosched.evaluation.steady import steady_jobs
from slosched.evaluation.workbench import Candidate
from slosched.planning.prices import Prices
from slosched.planning.probe import Probe, probe_seeds
from slosched.planning.sweep import SweepSettings
from slosched.planning.workload import candidates_of, instances_with_counts, workbench_of
from slosched.scenario.config import Scenario

MAX_COUNT = 256


@dataclass(slots=True, frozen=True)
class SizingTask:
    scenario: Scenario
    group: str
    candidate: Candidate
    rate: float
    target: float
    settings: SweepSettings


@dataclass(slots=True)
class SizingRow:
    policy: str
    group: str
    gpu: str
    gpus_per_instance: int
    min_count: int | None  # None: not carried by MAX_COUNT instances
    price_per_gpu_hour: float | None
    tried: dict[int, float] = field(default_factory=dict)  # count -> lower median attainment at the rate
    cut_short: list[int] = field(default_factory=list)  # counts whose figure is an upper bound (a cut run)

    @property
    def cost_per_hour(self) -> float | None:
        if self.min_count is None or self.price_per_gpu_hour is None:
            return None
        return self.min_count * self.gpus_per_instance * self.price_per_gpu_hour

    def as_json(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "group": self.group,
            "gpu": self.gpu,
            "min_instances": self.min_count,
            "gpus_per_instance": self.gpus_per_instance,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "cost_per_hour": self.cost_per_hour,
            "attainment_by_count": {str(n): a for n, a in self.tried.items()},
            "attainment_cut_short": self.cut_short,
        }


def sizing_task(task: SizingTask) -> dict[int, Probe]:
    """The verdict figure (``planning/probe.py``) at ``task.rate`` of each count the search visits (module
    level for workers)."""
    others = {group.name: 0 for group in task.scenario.cluster.instances if group.name != task.group}
    tried: dict[int, Probe] = {}

    def passes(count: int) -> bool:
        if count not in tried:
            instances = instances_with_counts(task.scenario, {**others, task.group: count})
            bench = workbench_of(
                task.scenario,
                instances,
                task.settings.jobs_for(instances),
                task.group,
                None,
                task.settings.work_tolerance,
            )
            found = probe_seeds(bench, task.candidate, task.settings.seeds, task.rate, task.target)
            tried[count] = found.figure
        return tried[count].passes(task.target)

    low, high = 0, 1  # low: known to fail (no instance carries nothing); high: the candidate count
    while not passes(high):
        if high >= MAX_COUNT:
            return tried
        low, high = high, min(high * 2, MAX_COUNT)
    while high - low > 1:
        middle = (low + high) // 2
        if passes(middle):
            high = middle
        else:
            low = middle
    return tried


def sizing_warnings(scenario: Scenario, rows: Sequence[SizingRow], rate: float, settings: SweepSettings) -> list[str]:
    """Where the workload cannot give the runs the sizing needs at ``rate`` (a short trace), one line each."""
    out = []
    for row in rows:
        count = row.min_count or max(row.tried, default=1)
        others = {group.name: 0 for group in scenario.cluster.instances if group.name != row.group}
        instances = instances_with_counts(scenario, {**others, row.group: count})
        bench = workbench_of(
            scenario, instances, settings.jobs_for(instances), row.group, None, settings.work_tolerance
        )
        needed = steady_jobs(bench, settings.seeds[0], rate)
        available = len(bench.jobs(needed, settings.seeds[0]))
        if available < needed:
            out.append(
                f"{row.policy} on {row.group}: the workload holds {available} jobs, a run at {rate:g} jobs/s needs "
                f"{needed}; the answer is not a steady-state figure"
            )
    return list(dict.fromkeys(out))


def min_passing(tried: dict[int, float], target: float) -> int | None:
    passing = [count for count, value in tried.items() if value >= target]
    return min(passing) if passing else None


def size(
    scenario: Scenario,
    groups: Sequence[str],
    policies: Sequence[str] | None,
    rate: float,
    target: float,
    settings: SweepSettings,
    prices: Prices | None = None,
) -> list[SizingRow]:
    """One row per (policy, sized group); costs at ``prices`` (default: the hardware file's)."""
    prices = prices or Prices()
    if not rate > 0:
        raise ConfigError("--rate", f"must be > 0 jobs/s, got {rate}")
    by_name = {group.name: group for group in scenario.cluster.instances}
    unknown = sorted(set(groups) - set(by_name))
    if unknown:
        raise ConfigError("--size", f"unknown instance group(s) {unknown}; the scenario has {sorted(by_name)}")
    candidates = candidates_of(scenario, policies or scenario.policies)
    tasks = [SizingTask(scenario, g, c, rate, target, settings) for c in candidates for g in groups]
    description = f"sizing: {len(tasks)} searches"
    try:
        found = run_tasks(sizing_task, tasks, description, settings.workers, settings.ray_address)
    except Interrupted as stop:  # Ctrl-C: the searches that finished
        raise Interrupted(_sizing_rows(tasks, stop.partial, by_name, target, prices)) from None
    return _sizing_rows(tasks, found, by_name, target, prices)


def _sizing_rows(
    tasks: Sequence[SizingTask], found: Sequence[Any], by_name: Mapping[str, Any], target: float, prices: Prices
) -> list[SizingRow]:
    """One row per finished search (None in ``found``: interrupted, left out)."""
    rows = []
    for task, probes in zip(tasks, found, strict=True):
        if probes is None:
            continue
        tried = {count: probe.value for count, probe in probes.items()}
        group = by_name[task.group]
        rows.append(
            SizingRow(
                policy=task.candidate.label,
                group=task.group,
                gpu=group.gpu,
                gpus_per_instance=group.tp,
                min_count=min_passing(tried, target),
                price_per_gpu_hour=prices.per_gpu_hour(group.gpu),
                tried=dict(sorted(tried.items())),
                cut_short=sorted(count for count, probe in probes.items() if not probe.exact),
            )
        )
    return rows
