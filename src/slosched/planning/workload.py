"""A scenario as the scoreboard's ``Workbench``: its jobs at unit rate, its cluster with counts changed.

Capacity is a rate, so the sweep needs the scenario's jobs *without* their rate: the scenario's own arrival
process is sampled and its times rescaled to a mean of one job per second (the shape of the process,
Poisson, gamma burstiness or on/off, is kept); the workbench then divides them by each rate it tries. A
trace is rescaled the same way (its recorded timing keeps its shape). Deadlines follow the scenario's
``slo`` block and are leak-free as in every scoreboard run (``sim/deadlines.py``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.evaluation.workbench import Candidate, Workbench
from slosched.scenario.config import Scenario
from slosched.workloads.arrivals import ArrivalSpec
from slosched.workloads.generators import generate_jobs
from slosched.workloads.trace_io import load_jobs


@dataclass(slots=True, frozen=True)
class ScenarioJobs:
    """Picklable ``JobsFn`` of one scenario (the workbench sends it to worker processes)."""

    scenario: Scenario
    trace: str | None = None

    def __call__(self, num_jobs: int, seed: int) -> list[JobSpec]:
        if self.trace is not None or self.scenario.workload.trace is not None:
            jobs = load_jobs(Path(self.trace or str(self.scenario.workload.trace)))[:num_jobs]
        else:
            rng = np.random.default_rng(np.random.SeedSequence([self.scenario.seed, seed, 1]))
            arrivals = ArrivalSpec.from_mapping(self.scenario.workload.arrival).sample(num_jobs, rng)
            assert self.scenario.workload.generator is not None
            jobs = generate_jobs(self.scenario.workload.generator, self.scenario.workload.params, arrivals, rng)
        return unit_rate(jobs)


def unit_rate(jobs: Sequence[JobSpec]) -> list[JobSpec]:
    """The same jobs with arrival times scaled to a mean rate of 1 job/s, starting at 0."""
    if not jobs:
        return []
    start = min(job.arrival_s for job in jobs)
    span = max(job.arrival_s for job in jobs) - start
    if not span > 0:
        return [replace(job, arrival_s=job.arrival_s - start) for job in jobs]
    # n jobs over a span of (n - 1) mean gaps: one mean gap becomes one second. Dividing by the span first
    # keeps every value in [0, n - 1] (a tiny span's reciprocal would overflow to inf).
    gaps = len(jobs) - 1
    return [replace(job, arrival_s=(job.arrival_s - start) / span * gaps) for job in jobs]


def instances_with_counts(scenario: Scenario, counts: Mapping[str, int]) -> tuple[InstanceSpec, ...]:
    """The scenario's cluster with some groups' ``count`` replaced (0 drops a group); unknown group names
    are an error naming the groups there are."""
    groups = {group.name: group for group in scenario.cluster.instances}
    unknown = sorted(set(counts) - set(groups))
    if unknown:
        raise ConfigError("--mix", f"unknown instance group(s) {unknown}; the scenario has {sorted(groups)}")
    specs: list[InstanceSpec] = []
    for name, group in groups.items():
        count = counts.get(name, group.count)
        if count < 0:
            raise ConfigError("--mix", f"{name}: a count must be >= 0, got {count}")
        if count > 0:
            specs.extend(group.model_copy(update={"count": count}).specs())
    if not specs:
        raise ConfigError("--mix", "a mix must keep at least one instance")
    return tuple(specs)


def candidates_of(scenario: Scenario, policies: Sequence[str]) -> list[Candidate]:
    """The scenario's policies (or the given ones) with its parameters and job policy."""
    params = scenario.params()
    return [Candidate(label=text, policy=text, params=params, job_policy=scenario.job_policy) for text in policies]


def workbench_of(
    scenario: Scenario, instances: Sequence[InstanceSpec], num_jobs: int, num_warmup_jobs: int, label: str
) -> Workbench:
    return Workbench(label, tuple(instances), ScenarioJobs(scenario), num_jobs, scenario.options(), num_warmup_jobs)
