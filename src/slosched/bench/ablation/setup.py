"""Settings of ``slosched bench ablation``: the stack as it ships, and the stack with one mechanism switched
off at a time through its own parameter block (``policy_params.stack.slosched``), each on the workloads and
clusters of ``slosched bench stack`` (same jobs, seeds, warm-up and deadlines).

A mechanism earns its place where switching it off lowers the capacity on some workload and raises it on
none by more than the spread over seeds; the page shows both directions. Only the stack's own settings
change, so every difference is that mechanism's (the ORACLE and the baselines are the stack bench's).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import slosched.bench.stack.setup as stack_setup
from slosched.core.errors import ConfigError
from slosched.evaluation.workbench import Candidate
from slosched.policies.spec import PolicyParams

WORKLOADS_ENV = "SLOSCHED_ABLATION_WORKLOADS"
# A re-run of some rows (a mechanism added since the last full run) need not redo every variant's searches.
VARIANTS_ENV = "SLOSCHED_ABLATION_VARIANTS"
# Quick: chat, the workload whose stack search takes seconds (a Text-to-SQL search takes many minutes).
QUICK_WORKLOADS = ("chat",)
QUICK_SEEDS, FULL_SEEDS = (1, 2), (1, 2, 3, 4, 5)
TARGET = 0.90  # the stack bench's capacity target


@dataclass(slots=True, frozen=True)
class Ablation:
    """The stack with ``settings`` (keys of its parameter block) in place of its defaults."""

    label: str
    layer: str
    switched_off: str
    settings: tuple[tuple[str, Any], ...] = ()
    self_tune: bool = True

    def candidate(self) -> Candidate:
        stack = stack_setup.stack_candidates()[0]
        if not self.self_tune:
            stack = replace(stack, label=self.label, extras=())
        if not self.settings:
            return stack
        params = PolicyParams(stack={stack_setup.STACK_POLICY: dict(self.settings)})
        return replace(stack, label=self.label, params=params)


FULL_STACK = Ablation(stack_setup.STACK_LABEL, "all", "nothing: the stack as it ships")
ABLATIONS = (
    Ablation(
        "-self-tuning",
        "all",
        "self-tuning on past traffic (the hand-chosen defaults of every knob instead)",
        self_tune=False,
    ),
    Ablation(
        "-tpot-residents",
        "router",
        "a call answers for the tightest TPOT SLO already decoding where it goes",
        (("tpot_residents", False),),
    ),
    Ablation(
        "-prefix-affinity",
        "router",
        "the prefix-affinity filter (min_match 2: no shared prefix is ever long enough)",
        (("min_match", 2.0),),
    ),
    Ablation(
        "-affinity-yields",
        "router",
        "prefix holders yielding a call they would make late to an instance that would finish it in time",
        (("affinity_yields", False),),
    ),
    Ablation(
        "-triage",
        "engine",
        "the best-effort tier and triage admission (one tier, every call admitted eagerly)",
        (("triage", False),),
    ),
    Ablation(
        "-tpot-guard",
        "engine",
        "the TPOT guard (a call joins however far the decode step outgrows the batch's TPOT SLOs)",
        (("tpot_guard", None),),
    ),
    Ablation(
        "-deadline-guard",
        "engine",
        "the deadline guard (a call joins however far the decode step outgrows a running workflow stage's pace)",
        (("deadline_guard", False),),
    ),
    Ablation(
        "-deadline-budget",
        "engine",
        "the step budget sized to the tightest running call (static 2048-token chunks instead)",
        (("batching", "chunked"),),
    ),
    Ablation(
        "-yield-to-queue",
        "engine",
        "steps yielding to a queue the ceiling keeps up with (every running call's deadline bounds the step)",
        (("yield_to_queue", False),),
    ),
    Ablation(
        "-job-triage",
        "job",
        "job-level triage (triage_factor 0: no job is demoted as hopeless)",
        (("triage_factor", 0.0),),
    ),
    Ablation(
        "-job-admission",
        "job",
        "job-level admission through the backlog and the demand test (each job judged alone)",
        (("backlog", False),),
    ),
    Ablation(
        "-pace-test",
        "job",
        "the pace test (a workflow is admitted whatever pace the admitted ones move at)",
        (("pace_factor", None),),
    ),
    Ablation(
        "-relegated-threshold",
        "engine",
        "the threshold of the strict tier for relegated jobs' calls (strict whenever a call that can count runs)",
        (("relegated_strict_from", None),),
    ),
)
VARIANTS = (FULL_STACK, *ABLATIONS)


def variant(label: str) -> Ablation:
    return next(item for item in VARIANTS if item.label == label)


def selected_workloads(quick: bool) -> tuple[str, ...]:
    """The workloads to run: ``SLOSCHED_ABLATION_WORKLOADS`` (comma-separated names) if set, else chat
    (quick) or all five (full); an unknown name is a ``ConfigError`` naming the allowed ones."""
    allowed = [item.name for item in stack_setup.WORKLOADS]
    raw = os.environ.get(WORKLOADS_ENV, "").strip()
    if not raw:
        return QUICK_WORKLOADS if quick else tuple(allowed)
    names = tuple(name.strip() for name in raw.split(",") if name.strip())
    unknown = [name for name in names if name not in allowed]
    if unknown or not names:
        raise ConfigError(WORKLOADS_ENV, f"unknown workload(s) {unknown or [raw]}; allowed: {allowed}")
    return names


def seeds_for(quick: bool) -> Sequence[int]:
    return QUICK_SEEDS if quick else FULL_SEEDS


def selected_variants() -> tuple[Ablation, ...]:
    """The variants to run: the full stack (every ratio's reference) and, when ``SLOSCHED_ABLATION_VARIANTS``
    (comma-separated labels) is set, only the ablations it names, in the bench's order; an unknown label is a
    ``ConfigError`` naming the allowed ones."""
    raw = os.environ.get(VARIANTS_ENV, "").strip()
    if not raw:
        return VARIANTS
    labels = {label.strip() for label in raw.split(",") if label.strip()} - {FULL_STACK.label}
    allowed = [item.label for item in ABLATIONS]
    unknown = sorted(labels - set(allowed))
    if unknown:
        raise ConfigError(VARIANTS_ENV, f"unknown variant(s) {unknown}; allowed: {allowed}")
    if not labels:  # the full stack alone: nothing to compare it with
        raise ConfigError(VARIANTS_ENV, f"names no ablation ({raw!r}); allowed: {allowed}")
    return (FULL_STACK, *(item for item in ABLATIONS if item.label in labels))
