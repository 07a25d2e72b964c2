"""Job progress: DAG bookkeeping for workflows, relQueries and single requests."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from slosched.core.job import JobSpec, StageSpec
from slosched.core.records import JobRecord
from slosched.core.request import Outcome
from slosched.core.views import JobView


@dataclass(slots=True)
class JobState:
    """Which stages wait on how many parents, and how many calls of each released stage are unfinished."""

    spec: JobSpec
    record: JobRecord
    deadline_s: float
    parents_left: dict[str, int]
    children: dict[str, list[str]]
    stages: dict[str, StageSpec]
    calls_left: dict[str, int] = field(default_factory=dict)
    finished_stages: list[str] = field(default_factory=list)
    stages_left: int = 0
    done: bool = False

    @classmethod
    def start(cls, spec: JobSpec, record: JobRecord) -> JobState:
        deps = spec.dependencies()
        children: dict[str, list[str]] = {name: [] for name in deps}
        for name, parents in deps.items():
            for parent in parents:
                children[parent].append(name)
        return cls(
            spec=spec,
            record=record,
            deadline_s=spec.arrival_s + record.slo_s if math.isfinite(record.slo_s) else math.inf,
            parents_left={name: len(parents) for name, parents in deps.items()},
            children=children,
            stages={stage.name: stage for stage in spec.stages},
            stages_left=len(spec.stages),
        )

    def ready_stages(self) -> list[StageSpec]:
        """Stages with no unfinished parent that have not been released yet (in spec order)."""
        return [
            stage
            for stage in self.spec.stages
            if self.parents_left[stage.name] == 0 and stage.name not in self.calls_left
        ]

    def stage_finished(self, name: str) -> list[StageSpec]:
        """Mark ``name`` done; returns the stages this releases."""
        self.stages_left -= 1
        self.finished_stages.append(name)
        released = []
        for child in self.children[name]:
            self.parents_left[child] -= 1
            if self.parents_left[child] == 0:
                released.append(self.stages[child])
        return released

    def view(self, stage: str) -> JobView:
        spec = self.spec
        return JobView(
            id=spec.id,
            kind=spec.kind.value,
            template=spec.template,
            arrival_s=spec.arrival_s,
            slo_s=self.record.slo_s,
            deadline_s=self.deadline_s,
            stage=stage,
            finished_stages=tuple(self.finished_stages),
        )

    def finish(self, outcome: Outcome, now_s: float, reason: str = "") -> None:
        self.done = True
        self.record.outcome = outcome
        self.record.finish_s = now_s
        self.record.reason = reason
