"""Settings of ``slosched bench attainment``: which ``bench stack`` workloads, loads, seeds and run lengths.

A capacity is one number per policy; where two policies' attainment curves run flat near the target (mixed:
`bench convergence` finds its capacities moving by a fifth between run lengths) the number says little about
why one is ahead. This bench splits attainment by who the jobs are: each measured job falls in a group
(its tenant and its kind: a relQuery, a workflow by its template, a single call by its template), and each
group's attainment is pooled over the seeds (met jobs over jobs, so a seed with more of a group weighs more).
Loads are fractions of the strongest baseline's capacity as ``docs/results/stack/stack.json`` has it (the
workload's first guess without it); runs are 4x the stack bench's length (full), the length at which
``bench convergence`` finds relQueries and chat steady.

``SLOSCHED_ATTAINMENT_STACK`` (a JSON object of the stack's settings, e.g. ``{"relegated_strict_from": null}``)
runs the stack with those settings instead, labelled with them, against the same baseline on the same jobs:
how a mechanism's figures in docs/stack.md are made. ``SLOSCHED_ATTAINMENT_BASELINE`` (a scoreboard label,
``ROUTER+ENGINE[key=value]``) puts another baseline beside the stack, e.g. the one the stack bench found
strongest at one load (the loads stay multiples of the capacity-strongest baseline's capacity), and
``SLOSCHED_ATTAINMENT_SEEDS`` (comma-separated) other seeds. Such runs print their figures and leave the page
alone.
"""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import slosched.bench.convergence.setup as convergence_setup
import slosched.bench.stack.setup as stack_setup
from slosched.core.errors import ConfigError
from slosched.core.job import JobKind
from slosched.core.problems import ConfigProblems
from slosched.core.records import JobRecord
from slosched.evaluation.workbench import Candidate
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.param_problems import check_keys
from slosched.policies.registry import param_infos
from slosched.policies.spec import PolicyPair
from slosched.policies.stacks.base import STACKS

WORKLOADS_ENV = "SLOSCHED_ATTAINMENT_WORKLOADS"
STACK_ENV = "SLOSCHED_ATTAINMENT_STACK"
LOADS_ENV = "SLOSCHED_ATTAINMENT_LOADS"
BASELINE_ENV = "SLOSCHED_ATTAINMENT_BASELINE"
SEEDS_ENV = "SLOSCHED_ATTAINMENT_SEEDS"
FULL_WORKLOADS = ("mixed",)  # the one workload with tenants of different tightness and every kind of job
QUICK_WORKLOADS = ("code",)
FULL_SEEDS = (1, 2, 3)
QUICK_SEEDS = (1,)
LOADS = (0.5, 1.0, 1.5)  # x the strongest baseline's capacity (``SLOSCHED_ATTAINMENT_LOADS``: others)
LENGTH_FACTOR = 4  # full runs: x the stack bench's measured jobs (quick: its quick length)
STACK_RESULTS = convergence_setup.STACK_RESULTS


def workload_names(quick: bool) -> tuple[str, ...]:
    """The workloads ``SLOSCHED_ATTAINMENT_WORKLOADS`` names (comma-separated), in the stack bench's order;
    unset: ``FULL_WORKLOADS`` or ``QUICK_WORKLOADS``."""
    return stack_setup.workloads_named(WORKLOADS_ENV) or (QUICK_WORKLOADS if quick else FULL_WORKLOADS)


def loads() -> tuple[float, ...]:
    """The loads ``SLOSCHED_ATTAINMENT_LOADS`` names (comma-separated multiples of the baseline's capacity, each
    > 0), else ``LOADS``."""
    text = os.environ.get(LOADS_ENV, "").strip()
    if not text:
        return LOADS
    try:
        chosen = tuple(float(item) for item in text.split(","))
    except ValueError:
        chosen = ()
    if not chosen or not all(0 < load < float("inf") for load in chosen):
        raise ConfigError(LOADS_ENV, f"{text!r}: expected comma-separated multiples of capacity > 0, e.g. 1,2")
    return chosen


def seeds(quick: bool) -> tuple[int, ...]:
    """The seeds ``SLOSCHED_ATTAINMENT_SEEDS`` names (comma-separated integers >= 0), else ``FULL_SEEDS`` or
    ``QUICK_SEEDS``."""
    text = os.environ.get(SEEDS_ENV, "").strip()
    if not text:
        return QUICK_SEEDS if quick else FULL_SEEDS
    try:
        chosen = tuple(int(item) for item in text.split(","))
    except ValueError:
        chosen = ()
    if not chosen or min(chosen) < 0 or len(set(chosen)) != len(chosen):
        raise ConfigError(SEEDS_ENV, f"{text!r}: expected distinct comma-separated integers >= 0, e.g. 1,2,3,4,5")
    return chosen


def baseline_chosen() -> bool:
    """Whether ``SLOSCHED_ATTAINMENT_BASELINE`` names a baseline (the run is then a variant: it prints only)."""
    return bool(os.environ.get(BASELINE_ENV, "").strip())


def baseline_label(workload: str) -> str:
    """The baseline ``SLOSCHED_ATTAINMENT_BASELINE`` names (checked: a known router and engine, a setting the
    engine has), else the strongest ``bench stack`` found for ``workload`` by capacity."""
    text = os.environ.get(BASELINE_ENV, "").strip()
    if not text:
        return convergence_setup.strongest_baseline(workload)
    try:
        candidate = convergence_setup.candidate(text)
        engine = PolicyPair.parse(candidate.policy).engine
    except ConfigError as error:
        raise ConfigError(BASELINE_ENV, f"{text!r}: {error}") from None
    for settings in candidate.params.engine.values():
        problems = check_keys(BASELINE_ENV, f"engine {engine!r}", settings or {}, engine_keys(engine))
        if problems:
            raise ConfigProblems(problems)
    return text


def engine_keys(engine: str) -> list[str]:
    """The settings an engine preset takes (none for a name that is not a preset: those take none here)."""
    if engine not in ENGINE_PRESETS:
        return []
    return [info.name for info in param_infos(ENGINE_PRESETS.params_of(engine))]


def base_rate(workload: str, label: str, results: Path | None = None) -> float:
    """The capacity @90% the stack bench measured for ``label`` on ``workload`` (its JSON), else the workload's
    first guess: the rate the loads are fractions of."""
    results = results or STACK_RESULTS
    if results.exists():
        row = json.loads(results.read_text(encoding="utf-8")).get("workloads", {}).get(workload, {})
        capacity = row.get("capacity_rps", {}).get(label)
        if isinstance(capacity, int | float) and capacity > 0:
            return float(capacity)
    return stack_setup.workload(workload).guess


def num_jobs(workload: str, quick: bool) -> int:
    """Measured jobs per run: the stack bench's quick length, or ``LENGTH_FACTOR`` x its full length."""
    spec = stack_setup.workload(workload)
    return spec.quick.num_jobs if quick else LENGTH_FACTOR * spec.full.num_jobs


def group_of(job: JobRecord) -> str:
    """The group a measured job is counted in: ``tenant / kind`` (relQueries as one kind; workflows and single
    calls by their template)."""
    if job.kind is JobKind.RELQUERY:
        kind = "relquery"
    elif job.kind is JobKind.WORKFLOW:
        kind = job.template.split("/")[0]
    else:
        kind = job.template
    return f"{job.tenant} / {kind}"


def stack_settings() -> dict[str, Any]:
    """The stack settings ``SLOSCHED_ATTAINMENT_STACK`` overrides (empty: the stack as it ships), each key
    checked against the stack's own (a ``ConfigError`` naming the variable and the allowed keys) and each
    value against its type and range, before any run starts."""
    text = os.environ.get(STACK_ENV, "").strip()
    if not text:
        return {}
    example = 'e.g. {"relegated_strict_from": null}'
    try:
        settings = json.loads(text)
    except ValueError as error:
        raise ConfigError(
            STACK_ENV, f"not JSON ({error}); expected an object of the stack's settings, {example}"
        ) from None
    if not isinstance(settings, dict):
        raise ConfigError(STACK_ENV, f"expected a JSON object of the stack's settings, {example}")
    stack = STACKS.get(stack_setup.STACK_POLICY)
    if stack is not None:
        keys = sorted(stack.router_keys | stack.engine_keys | stack.job_keys)
        problems = check_keys(STACK_ENV, f"stack {stack_setup.STACK_POLICY!r}", settings, keys)
        if problems:
            raise ConfigProblems(problems)
        stack.check_values(settings, STACK_ENV)
    return settings


def stack_candidate(settings: dict[str, Any]) -> Candidate:
    """The stack as ``bench stack`` runs it, with ``settings`` pinned in its block (the self-tuner searches only
    what a block leaves unset) and named in its label."""
    stack = stack_setup.stack_candidates()[0]
    if not settings:
        return stack
    block = {**stack.params.stack.get(stack_setup.STACK_POLICY, {}), **settings}
    return replace(
        stack,
        label=f"{stack.label} {json.dumps(settings, sort_keys=True)}",
        params=replace(stack.params, stack={**stack.params.stack, stack_setup.STACK_POLICY: block}),
    )
