"""Run one scenario under several policy pairs with identical jobs and seed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

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
    same deadlines (learned from ``history``, by default the scenario's own past traffic)."""
    pairs = list(policies) if policies is not None else scenario.policy_pairs()
    if jobs is None:
        jobs = scenario.jobs(base_dir)
        history = scenario.history() if history is None else history
    specs = scenario.cluster.specs()
    results: dict[str, RunResult] = {}
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
    return results
