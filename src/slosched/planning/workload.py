"""A scenario as the scoreboard's ``Workbench``: its jobs at unit rate, its cluster with counts changed.

Capacity is a rate, so the sweep needs the scenario's jobs *without* their rate: the scenario's own arrival
process is sampled and its times rescaled to a mean of one job per second (the shape of the process,
Poisson, gamma burstiness or on/off, is kept); the workbench then divides them by each rate it tries. A
trace is rescaled the same way (its recorded timing keeps its shape). Deadlines follow the scenario's
``slo`` block and are leak-free as in every scoreboard run (``sim/deadlines.py``).

``scenario_workbench`` is the one way a scenario becomes runs: ``sweep``, fleet sizing and ``compare`` /
``simulate`` all build them here (same jobs for the same seed, the same warm-up prefix, the same history for
the deadlines), so a capacity the sweep reports is a rate ``compare`` shows carried.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.evaluation.sizing import warmup_for
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
    base_dir: str | None = None  # where a relative trace path of the scenario file resolves

    def __call__(self, num_jobs: int, seed: int) -> list[JobSpec]:
        if self.trace_path_given():
            jobs = load_jobs(self.trace_path())[:num_jobs]
        else:
            rng = np.random.default_rng(np.random.SeedSequence([self.scenario.seed, seed, 1]))
            arrivals = ArrivalSpec.from_mapping(self.scenario.workload.arrival).sample(num_jobs, rng)
            assert self.scenario.workload.generator is not None
            jobs = generate_jobs(self.scenario.workload.generator, self.scenario.workload.params, arrivals, rng)
        return unit_rate(jobs)

    def trace_path(self) -> Path:
        path = Path(self.trace or str(self.scenario.workload.trace))
        if self.trace is None and not path.is_absolute() and self.base_dir is not None:
            return Path(self.base_dir) / path
        return path

    def trace_path_given(self) -> bool:
        return self.trace is not None or self.scenario.workload.trace is not None

    def rate(self) -> float:
        """The scenario's own mean arrival rate: a trace's recorded one, else the arrival block's ``rate``
        (1 job/s where it has none)."""
        if self.trace_path_given():
            arrivals = [job.arrival_s for job in load_jobs(self.trace_path())]
            span = max(arrivals) - min(arrivals) if len(arrivals) > 1 else 0.0
            return (len(arrivals) - 1) / span if span > 0 else 1.0
        rate = self.scenario.workload.arrival.get("rate")
        return float(rate) if isinstance(rate, int | float) and rate > 0 else 1.0


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


def with_model(scenario: Scenario, model: str) -> Scenario:
    """The scenario with every instance group serving ``model`` (a catalog name or a Hugging Face config
    path, made absolute so worker processes find it); checked here, so a bad file is one error line."""
    from slosched.perf.hardware import model_facts
    from slosched.perf.hf_config import looks_like_config
    from slosched.scenario.config import ClusterConfig

    if looks_like_config(model):
        model = str(Path(model).resolve())
    try:
        model_facts(model)
    except ConfigError as error:
        raise ConfigError("--model", str(error)) from None
    groups = [group.model_copy(update={"model": model}) for group in scenario.cluster.instances]
    return scenario.model_copy(update={"cluster": ClusterConfig(instances=groups)})


def candidates_of(scenario: Scenario, policies: Sequence[str]) -> list[Candidate]:
    """The scenario's policies (or the given ones) with its parameters and job policy."""
    params = scenario.params()
    return [Candidate(label=text, policy=text, params=params, job_policy=scenario.job_policy) for text in policies]


MIN_WARMUP_JOBS = 10


def warmup_jobs(num_jobs: int) -> int:
    """The warm-up prefix of a run of ``num_jobs`` measured jobs (the workbench's rule, with a floor)."""
    return max(MIN_WARMUP_JOBS, warmup_for(num_jobs))


def workbench_of(
    scenario: Scenario,
    instances: Sequence[InstanceSpec],
    num_jobs: int,
    label: str,
    jobs: ScenarioJobs | None = None,
    work_tolerance: float | None = None,
) -> Workbench:
    """The scenario on ``instances`` with ``num_jobs`` measured jobs per run and its warm-up prefix;
    ``work_tolerance``: the work rule's (``evaluation/sizing.py``; the full sweep's, None: off)."""
    source = jobs or ScenarioJobs(scenario)
    # The deadlines' history follows the count (``fixed_history=False``): ``compare`` at the count a sweep
    # ended with must replay the sweep's very run, and compare knows only the count.
    return Workbench(
        label,
        tuple(instances),
        source,
        num_jobs,
        scenario.options(),
        warmup_jobs(num_jobs),
        fixed_history=False,
        work_tolerance=work_tolerance,
    )


def with_slo_reference(bench: Workbench, reference: Sequence[InstanceSpec]) -> Workbench:
    """``bench`` with its scaled SLOs taken on ``reference``'s fastest instance instead of its own cluster's
    (none: unchanged), so clusters of different GPUs are judged against the same deadlines."""
    if not reference:
        return bench
    return replace(bench, options=replace(bench.options, slo_reference=tuple(reference)))


def scenario_workbench(
    scenario: Scenario, trace: str | None = None, base_dir: str | None = None, num_jobs: int | None = None
) -> Workbench:
    """The scenario as given (its cluster, its ``num_jobs`` or its trace's length) as ``compare`` runs it."""
    jobs = ScenarioJobs(scenario, trace, base_dir)
    count = num_jobs or (len(load_jobs(jobs.trace_path())) if jobs.trace_path_given() else scenario.workload.num_jobs)
    return workbench_of(scenario, instances_with_counts(scenario, {}), count, scenario.name, jobs)
