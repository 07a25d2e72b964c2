"""Settings of ``slosched bench convergence``: a ladder of run lengths for the ``bench stack`` workloads.

``bench stack`` searches each capacity at its workload's job count (the bench's floor, grown by the
steady-state rule to 20x the p90 no-contention latency) and, for the stack and the strongest baseline,
once more at 4x that length; ``steady_state`` holds where the two medians agree within 5%. Where they do
not, the published capacity is either a burst cleared (the 4x figure lower) or a tail of large jobs
sampled too thinly to settle (seeds scattered both ways). This bench climbs the ladder one rung further:
each rung is the stack bench's own 4x search of the rung below (``evaluation/steady.long_search``: 4x the
job count the rung below ended with, started at its capacity), on the same seeds, so the first two rungs are
``bench stack``'s method (its capacity and ``capacity_4x``; searched afresh here, from the workload's own first
guess, they agree with its figures to the search's 2% precision and the seeds' scatter) and the third says
whether the 4x figure itself holds. The
verdict per workload is the shortest rung whose median holds at the next one within 5%, for both policies:
the run length that workload needs.

Policies: the stack (as ``bench stack`` runs it, self-tuning) and the strongest baseline that
``docs/results/stack/stack.json`` names for the workload (chosen after the fact by the full baseline
search, which this bench does not repeat); without that file, the reference baseline
``least-tokens+chunked-fcfs[token_budget=512]``. With ``SLOSCHED_CONVERGENCE_ORACLE=1`` the stack's ORACLE twin
(true output lengths) climbs beside them: issue 24's capacity check falls back to the oracle's ratio where even
the oracle stays under the target, and that ratio is only comparable when measured on the same ladder. The
oracle does not enter the verdict (it is no policy a user can run).
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import slosched.bench.stack.setup as stack_setup
from slosched.core.errors import ConfigError
from slosched.evaluation.workbench import Candidate

WORKLOADS_ENV = "SLOSCHED_CONVERGENCE_WORKLOADS"
RUNGS_ENV = "SLOSCHED_CONVERGENCE_RUNGS"
ORACLE_ENV = "SLOSCHED_CONVERGENCE_ORACLE"
FULL_SEEDS = (1, 2, 3, 4, 5)  # ``bench stack``'s
QUICK_SEEDS = (1, 2)
FULL_RUNGS = 3  # 1x, 4x, 16x the stack bench's length
QUICK_RUNGS = 2
QUICK_WORKLOADS = ("code",)  # fixed SLAs, short jobs: the cheapest ladder of the five
TARGET = 0.90  # the loosest target: the one ``steady_state`` and ``capacity_4x`` read
TOLERANCE = 0.05  # ``evaluation/steady.STEADY_TOLERANCE``
STACK_RESULTS = Path("docs/results/stack/stack.json")
REFERENCE_BASELINE = "least-tokens+chunked-fcfs[token_budget=512]"
_LABEL = re.compile(r"^(?P<policy>[\w.-]+\+[\w./-]+)(?:\[(?P<key>\w+)=(?P<value>\d+)\])?$")


def workload_names(quick: bool) -> tuple[str, ...]:
    """The workloads ``SLOSCHED_CONVERGENCE_WORKLOADS`` names (comma-separated), in the stack bench's order;
    unset: all five (full) or ``QUICK_WORKLOADS``."""
    all_five = tuple(workload.name for workload in stack_setup.WORKLOADS)
    return stack_setup.workloads_named(WORKLOADS_ENV) or (QUICK_WORKLOADS if quick else all_five)


def rungs(quick: bool) -> int:
    """How many lengths each ladder climbs (``SLOSCHED_CONVERGENCE_RUNGS``, 2-4)."""
    text = os.environ.get(RUNGS_ENV, "").strip()
    if not text:
        return QUICK_RUNGS if quick else FULL_RUNGS
    if not text.isdigit() or not 2 <= int(text) <= 4:
        raise ConfigError(RUNGS_ENV, f"{text!r} is not a number of rungs; allowed: 2, 3, 4")
    return int(text)


def with_oracle() -> bool:
    """Whether the stack's ORACLE twin climbs too (``SLOSCHED_CONVERGENCE_ORACLE``: 1 or 0, unset 0)."""
    text = os.environ.get(ORACLE_ENV, "").strip()
    if text not in ("", "0", "1"):
        raise ConfigError(ORACLE_ENV, f"{text!r}; allowed: 0, 1")
    return text == "1"


def policies(workload: str) -> list[str]:
    """The labels that climb ``workload``'s ladder: the stack, its strongest baseline, then (asked for) the
    oracle; the first two decide the verdict."""
    labels = [stack_setup.STACK_LABEL, strongest_baseline(workload)]
    return [*labels, stack_setup.ORACLE_LABEL] if with_oracle() else labels


def strongest_baseline(workload: str, results: Path | None = None) -> str:
    """The strongest baseline ``bench stack`` found for ``workload`` (its JSON, ``STACK_RESULTS`` by default),
    else the reference one."""
    results = results or STACK_RESULTS
    if not results.exists():
        return REFERENCE_BASELINE
    row = json.loads(results.read_text(encoding="utf-8")).get("workloads", {}).get(workload, {})
    return str(row.get("strongest_baseline") or REFERENCE_BASELINE)


def candidate(label: str) -> Candidate:
    """The candidate a label names: the stack's own label, or ``ROUTER+ENGINE[key=value]`` as scoreboards
    write their baselines."""
    if label == stack_setup.STACK_LABEL:
        return stack_setup.stack_candidates()[0]
    if label == stack_setup.ORACLE_LABEL:
        return stack_setup.stack_candidates()[1]
    match = _LABEL.match(label)
    if match is None:
        raise ConfigError("baseline", f"label {label!r}: expected ROUTER+ENGINE or ROUTER+ENGINE[key=value]")
    settings = {match["key"]: int(match["value"])} if match["key"] else None
    return Candidate.of(match["policy"], settings)
