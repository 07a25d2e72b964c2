"""Run one scenario under several policy pairs with identical jobs and seed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from slosched.core.errors import Interrupted
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.scenario.config import Scenario
from slosched.sim.runner import PolicyPair, simulate

Progress = Callable[[str], None]


def compare_policies(
    scenario: Scenario,
    policies: Sequence[PolicyPair] | None = None,
    jobs: Sequence[JobSpec] | None = None,
    base_dir: Path | None = None,
    on_start: Progress | None = None,
    history: Sequence[JobSpec] | None = None,
    seed: int | None = None,
) -> dict[str, RunResult]:
    """Every policy sees the same jobs (generated once), the same seed (default: the scenario's) and the
    same deadlines (learned from ``history``, by default the scenario's own past traffic). Ctrl-C raises
    ``Interrupted`` with the results of the pairs that finished."""
    pairs = list(policies) if policies is not None else scenario.policy_pairs()
    if jobs is None:
        jobs = scenario.jobs(base_dir)
        history = scenario.history() if history is None else history
    specs = scenario.cluster.specs()
    results: dict[str, RunResult] = {}
    try:
        for pair in pairs:
            if on_start is not None:
                on_start(pair.name)
            results[pair.name] = simulate(
                specs,
                jobs,
                pair,
                scenario.seed if seed is None else seed,
                scenario.options(),
                scenario.params(),
                scenario.job_policy,
                history,
            )
    except KeyboardInterrupt:
        raise Interrupted(results) from None
    return results


@dataclass(slots=True, frozen=True)
class FloodFigures:
    """Attainment (in [0, 1]) of the tenants other than the flooding one, per run of a flood scenario."""

    flooder: str
    calm_fair: float  # no flood, fair sharing on
    flood_fair: float  # flood, fair sharing on
    calm_fcfs: float  # no flood, fair sharing off
    flood_fcfs: float  # flood, fair sharing off
    flooder_fair: float  # the flooding tenant's own attainment, fair sharing on
    flooder_fcfs: float

    @property
    def drop_fair_points(self) -> float:
        return 100.0 * (self.calm_fair - self.flood_fair)

    @property
    def drop_fcfs_points(self) -> float:
        return 100.0 * (self.calm_fcfs - self.flood_fcfs)


def attainment_of(result: RunResult, tenants: Callable[[str], bool]) -> float:
    """Share of the jobs of the tenants ``tenants`` accepts that met their deadline (1.0 when none)."""
    jobs = [job for job in result.jobs if tenants(job.tenant)]
    return sum(job.deadline_met for job in jobs) / len(jobs) if jobs else 1.0


def flood_figures(scenario: Scenario, base_dir: Path | None = None) -> FloodFigures:
    """Run ``scenario`` (its ``workload.also`` entries are the flood, their tenants the flooders) with and
    without the flood, with and without its ``fair_share``, on its first policy."""
    flooders = {extra.tenant or "default" for extra in scenario.workload.also}
    calm = scenario.model_copy(update={"workload": scenario.workload.model_copy(update={"also": []})})
    pair = scenario.policy_pairs()[:1]
    figures: dict[str, float] = {}
    for fair in (True, False):
        for name, variant in (("calm", calm), ("flood", scenario)):
            run = variant if fair else variant.model_copy(update={"fair_share": None})
            result = next(iter(compare_policies(run, pair, base_dir=base_dir).values()))
            suffix = "fair" if fair else "fcfs"
            figures[f"{name}_{suffix}"] = attainment_of(result, lambda tenant: tenant not in flooders)
            if name == "flood":
                figures[f"flooder_{suffix}"] = attainment_of(result, lambda tenant: tenant in flooders)
    return FloodFigures(", ".join(sorted(flooders)), **figures)
