"""JSONL job traces: one job per line, so a run's input can be recorded, edited and replayed.

Line formats (``kind`` picks one; optional fields may be left out):

- every kind optionally carries the per-token SLOs ``ttft_slo_s, tpot_slo_s`` (seconds).
- ``single``: ``id, arrival_s, input_tokens, output_tokens`` and optionally ``slo_s, max_output_tokens,
  template, tenant, session_id, prefix_key, prefix_tokens, group_key, group_tokens``, and ``stage`` when
  the stage is not named like ``core.job.single_job`` names it (the template, or ``"call"``).
- ``workflow``: ``id, arrival_s, stages`` and optionally ``slo_s, template, tenant``; a stage is ``name,
  calls`` and optionally ``after`` (list of stage names; absent = the previous stage) and
  ``tool_duration_s``; a call has the ``single`` line's call fields. A name may repeat (one step run
  several times): repeats are renamed ``name#2``, ``name#3``, ... (``core.job.step_name`` gives the
  step back), and an ``after`` naming a repeated step means its latest occurrence before the stage.
- ``relquery``: ``id, arrival_s, rows`` (each ``input_tokens, output_tokens``, and optionally ``group,
  group_tokens``: the first ``group_tokens`` of the row's input are shared with the rows of the same group)
  and optionally ``template_tokens`` (0), ``max_output_tokens``, ``slo_s, template, tenant``. It becomes one
  stage ``"rows"`` with a call per row: ``input_tokens = template_tokens + row input``, prefix
  ``f"{id}/template"`` of ``template_tokens`` tokens, then the row's group.

Invariants: ``load_jobs(save_jobs(jobs))`` equals ``jobs`` (every ``JobSpec`` a line can describe is
written losslessly; one it cannot is refused on save); every loaded job passed ``validate_job`` and ids
are unique. A bad line raises ``ConfigError`` naming the source, the line number and the field.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, unique_stage_names, validate_job
from slosched.workloads._validation import config_error
from slosched.workloads.trace_dump import job_to_line

__all__ = ["job_from_line", "job_to_line", "load_jobs", "parse_jobs", "save_jobs"]


class _Line(BaseModel):
    # Strict: a trace written by hand must not have "100" silently read as 100 or 1.5 as a token count.
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class _CallFields(_Line):
    input_tokens: int
    output_tokens: int
    max_output_tokens: int | None = None
    prefix_key: str | None = None
    prefix_tokens: int = 0
    session_id: str | None = None
    group_key: str | None = None
    group_tokens: int = 0

    def to_call(self) -> CallSpec:
        return CallSpec(
            self.input_tokens,
            self.output_tokens,
            self.max_output_tokens,
            self.prefix_key,
            self.prefix_tokens,
            self.session_id,
            self.group_key,
            self.group_tokens,
        )


class _JobFields(_Line):
    id: str = Field(min_length=1)
    arrival_s: float
    slo_s: float | None = None
    tenant: str = "default"
    template: str = ""
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None


class SingleLine(_JobFields, _CallFields):
    kind: Literal["single"]
    stage: str | None = Field(default=None, min_length=1)

    def to_job(self) -> JobSpec:
        stage = StageSpec(self.stage or self.template or "call", (self.to_call(),))
        return _job(self, JobKind.SINGLE, (stage,))


class StageLine(_Line):
    name: str = Field(min_length=1)
    calls: list[_CallFields] = []
    after: list[str] | None = None
    tool_duration_s: float = 0.0

    def to_stage(self) -> StageSpec:
        calls = tuple(call.to_call() for call in self.calls)
        after = tuple(self.after) if self.after is not None else None
        return StageSpec(self.name, calls, after, self.tool_duration_s)


class WorkflowLine(_JobFields):
    kind: Literal["workflow"]
    stages: list[StageLine]

    def to_job(self) -> JobSpec:
        return _job(self, JobKind.WORKFLOW, _unique_stages([stage.to_stage() for stage in self.stages]))


def _unique_stages(stages: list[StageSpec]) -> tuple[StageSpec, ...]:
    """Stages with repeated names renamed ``name#2``, ...; ``after`` follows the renaming.

    Real traces (CHESS) run one step several times. An ``after`` naming a repeated step means its
    latest occurrence before the stage (its first one if none precedes it); ``step#k`` names one exactly.
    """
    identities = unique_stage_names([stage.name for stage in stages])
    if identities == [stage.name for stage in stages]:
        return tuple(stages)
    first: dict[str, str] = {}
    latest: dict[str, str] = {}
    for stage, identity in zip(stages, identities, strict=True):
        first.setdefault(stage.name, identity)
    renamed: list[StageSpec] = []
    for stage, identity in zip(stages, identities, strict=True):
        after = stage.after
        if after is not None:
            after = tuple(dict.fromkeys(latest.get(name, first.get(name, name)) for name in after))
        renamed.append(StageSpec(identity, stage.calls, after, stage.tool_duration_s))
        latest[stage.name] = identity
    return tuple(renamed)


class RowLine(_Line):
    input_tokens: int
    output_tokens: int
    group: str | None = None
    group_tokens: int = Field(default=0, ge=0)


class RelqueryLine(_JobFields):
    kind: Literal["relquery"]
    template_tokens: int = Field(default=0, ge=0)
    rows: list[RowLine] = Field(min_length=1)
    max_output_tokens: int | None = None

    def to_job(self) -> JobSpec:
        key = f"{self.id}/template"
        calls = tuple(
            CallSpec(
                self.template_tokens + row.input_tokens,
                row.output_tokens,
                self.max_output_tokens,
                key,
                self.template_tokens,
                group_key=row.group,
                group_tokens=row.group_tokens,
            )
            for row in self.rows
        )
        return _job(self, JobKind.RELQUERY, (StageSpec("rows", calls),))


def _job(line: _JobFields, kind: JobKind, stages: tuple[StageSpec, ...]) -> JobSpec:
    return JobSpec(
        line.id, kind, line.arrival_s, stages, line.slo_s, line.tenant, line.template, line.ttft_slo_s, line.tpot_slo_s
    )


_LINE = TypeAdapter(Annotated[SingleLine | WorkflowLine | RelqueryLine, Field(discriminator="kind")])


def job_from_line(line: str, where: str = "line") -> JobSpec:
    """Parse and validate one JSONL line; errors name ``where`` and the field."""
    try:
        job = _LINE.validate_json(line).to_job()
    except ValidationError as error:
        inner = config_error(error, "", skip_loc=1)
        message = _message(inner)
        if error.errors()[0]["type"] == "union_tag_not_found":
            message += "; allowed kinds: single, workflow, relquery"
        raise ConfigError(f"{where}, {inner.field}", message) from None
    try:
        validate_job(job)
    except ConfigError as error:
        raise ConfigError(f"{where}, {error.field}", _message(error)) from None
    return job


def _message(error: ConfigError) -> str:
    return str(error).removeprefix(f"{error.field}: ")


def parse_jobs(lines: Iterable[str], source: str = "<lines>") -> list[JobSpec]:
    """Jobs from JSONL lines (blank lines skipped), in line order; ids must be unique."""
    jobs: list[JobSpec] = []
    first_line: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{source} line {number}"
        job = job_from_line(line, where)
        if job.id in first_line:
            first = first_line[job.id]
            raise ConfigError(f"{where}, id", f"duplicate job id {job.id!r} (first on line {first})")
        first_line[job.id] = number
        jobs.append(job)
    return jobs


def load_jobs(path: str | os.PathLike[str]) -> list[JobSpec]:
    """Jobs of the JSONL trace at ``path``."""
    with open(path, encoding="utf-8") as stream:
        return parse_jobs(stream, source=os.fspath(path))


def save_jobs(path: str | os.PathLike[str], jobs: Iterable[JobSpec]) -> int:
    """Write ``jobs`` to ``path`` as JSONL (replacing the file); returns the number written."""
    count = 0
    with open(path, "w", encoding="utf-8", newline="\n") as stream:
        for job in jobs:
            stream.write(job_to_line(job))
            stream.write("\n")
            count += 1
    return count
