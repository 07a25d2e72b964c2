"""Workflow templates: what a job policy may expect of a workflow's *remaining* stages.

A template is what the serving system knows of a workflow kind before a job runs: its stage order,
which stages are optional (with what probability), which repeat (with a pmf of the number of rounds),
and typical call lengths. It never holds a particular job's realized stages. ``text2sql-chess`` is built
from the CHESS statistics in ``workloads.json`` (means of the per-step laws, the KW/GUT probabilities,
the self-correction pmf, the EVAL fan-out pmf).

Invariants: ``expected_after`` returns only stages strictly after the one being released, each with a
weight in [0, inf) (a probability, or an expected number of rounds for a repeated stage).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from slosched.workloads.bundled import workload_section


@dataclass(slots=True, frozen=True)
class TemplateStage:
    """One stage kind. ``repeat_pmf`` (rounds -> probability) makes it a loop named ``{name}1``,
    ``{name}2``, ...; ``prob`` is the chance an optional stage runs; ``unless`` names a stage whose
    presence rules this one out (IR5 runs only when KW did not)."""

    name: str
    input_tokens: float
    output_tokens: float
    num_calls: float = 1.0
    prob: float = 1.0
    repeat_pmf: Mapping[int, float] | None = None
    unless: str | None = None


@dataclass(slots=True, frozen=True)
class ExpectedStage:
    """A stage expected after the current one: ``weight`` times a stage of ``num_calls`` parallel calls of
    these lengths (its latency is one call's; its work, all of them)."""

    name: str
    weight: float
    input_tokens: float
    output_tokens: float
    num_calls: float = 1.0


@dataclass(slots=True, frozen=True)
class WorkflowTemplate:
    name: str
    stages: tuple[TemplateStage, ...]

    def locate(self, stage: str) -> tuple[int, int] | None:
        """(template position, round number or 0) of a realized stage name; None when unknown."""
        for position, kind in enumerate(self.stages):
            if kind.repeat_pmf is None:
                if stage == kind.name:
                    return position, 0
            else:
                match = re.fullmatch(re.escape(kind.name) + r"(\d+)", stage)
                if match:
                    return position, int(match.group(1))
        return None

    def expected_after(self, stage: str, finished: Sequence[str]) -> list[ExpectedStage] | None:
        """Stages expected after ``stage`` given the finished ones; None when ``stage`` is not known."""
        where = self.locate(stage)
        if where is None:
            return None
        position, round_number = where
        seen = {*finished, stage}
        expected: list[ExpectedStage] = []
        current = self.stages[position]
        if current.repeat_pmf is not None:
            more = _expected_more_rounds(current.repeat_pmf, round_number)
            if more > 0:
                expected.append(
                    ExpectedStage(current.name, more, current.input_tokens, current.output_tokens, current.num_calls)
                )
        for kind in self.stages[position + 1 :]:
            weight = self._weight(kind, seen, position)
            if weight > 0:
                expected.append(ExpectedStage(kind.name, weight, kind.input_tokens, kind.output_tokens, kind.num_calls))
        return expected

    def _weight(self, kind: TemplateStage, seen: set[str], position: int) -> float:
        if kind.repeat_pmf is not None:
            return _expected_more_rounds(kind.repeat_pmf, 0)
        if kind.unless is not None:
            if kind.unless in seen:
                return 0.0
            decided = self.locate(kind.unless)
            if decided is not None and decided[0] < position:
                return 1.0  # the ruling-out stage's turn has passed without it
        return kind.prob


def _expected_more_rounds(pmf: Mapping[int, float], started: int) -> float:
    """E[rounds - started | rounds >= started]: rounds still to come once round ``started`` is under way."""
    mass = sum(p for k, p in pmf.items() if k >= started)
    if mass <= 0:
        return 0.0
    return sum((k - started) * p for k, p in pmf.items() if k >= started) / mass


def _mean(step: Mapping[str, object], side: str) -> float:
    dist = step[side]
    assert isinstance(dist, Mapping)
    mu, sigma, cap = float(dist["mu"]), float(dist["sigma"]), float(dist["max"])
    return min(math.exp(mu + sigma * sigma / 2.0), cap)


@functools.cache
def _chess() -> WorkflowTemplate:
    facts = workload_section("text2sql_chess")
    steps = facts["steps"]

    def kind(name: str, step: str, **extra: object) -> TemplateStage:
        return TemplateStage(name, _mean(steps[step], "input"), _mean(steps[step], "output"), **extra)  # type: ignore[arg-type]

    revise_pmf = {int(k): float(v) for k, v in facts["revise_rounds_pmf"].items()}
    fanout = {int(k): float(v) for k, v in facts["eval_fanout_pmf"].items()}
    # GEN: the stage lasts as long as its longer candidate (~12.4k prompt, ~700 output tokens).
    gen = TemplateStage("GEN", math.exp(9.422), math.exp(6.54 + 0.248**2 / 2), num_calls=2)
    return WorkflowTemplate(
        "text2sql-chess",
        (
            kind("IR1", "IR"),
            kind("KW", "KW", prob=0.847),
            kind("IR2", "IR"),
            kind("IR3", "IR"),
            kind("IR4", "IR"),
            kind("IR5", "IR", prob=1.0 - 0.847, unless="KW"),
            gen,
            kind("REVISE", "REVISE", repeat_pmf=revise_pmf),
            kind("UT1", "UT"),
            kind("GUT", "GUT", prob=0.947),
            kind("UT2", "UT"),
            kind("EVAL", "EVAL", prob=1.0 - fanout.get(0, 0.0), num_calls=sum(k * p for k, p in fanout.items())),
            kind("UT3", "UT"),
        ),
    )


def workflow_template(name: str) -> WorkflowTemplate | None:
    """The template registered for a job's ``template`` name, or None (the job policy then budgets
    each stage with all the time the job has left)."""
    if name == "text2sql-chess":
        return _chess()
    return None
