"""Jobs: what a user waits for. A job is one request, a workflow DAG of stages, or a relQuery.

Specs hold ground truth (``output_tokens``) because the simulator needs it; policies never receive a
spec, only the views of ``slosched.core.views``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from slosched.core.errors import ConfigError
from slosched.core.numbers import plain_numbers


class JobKind(StrEnum):
    SINGLE = "single"
    WORKFLOW = "workflow"
    RELQUERY = "relquery"


@dataclass(slots=True, frozen=True)
class CallSpec:
    """One LLM call. ``output_tokens`` is the true length (simulator only). ``max_output_tokens`` None means
    the client set no limit: like vLLM, the engine then allows up to its model length minus the prompt
    (never the true length, which nothing but the simulator's physics may see).

    ``prefix_key``/``prefix_tokens`` say that the first ``prefix_tokens`` prompt tokens are shared with every
    other call carrying the same key (a template, a session's earlier turns), which is what a prefix cache
    can reuse. ``group_key``/``group_tokens`` (with a ``prefix_key``) say that the next ``group_tokens`` are
    shared with the calls of the same key and group only (rows of a relQuery whose leading field holds one
    value).
    """

    input_tokens: int
    output_tokens: int
    max_output_tokens: int | None = None
    prefix_key: str | None = None
    prefix_tokens: int = 0
    session_id: str | None = None
    group_key: str | None = None
    group_tokens: int = 0

    def __post_init__(self) -> None:
        plain_numbers(self, ("input_tokens", "output_tokens", "max_output_tokens", "prefix_tokens", "group_tokens"), ())


@dataclass(slots=True, frozen=True)
class StageSpec:
    """A workflow stage: parallel LLM calls and/or a non-LLM step lasting ``tool_duration_s``.

    ``after`` names the stages it depends on; ``None`` means "the previous stage" (a chain).
    """

    name: str
    calls: tuple[CallSpec, ...] = ()
    after: tuple[str, ...] | None = None
    tool_duration_s: float = 0.0

    def __post_init__(self) -> None:
        plain_numbers(self, (), ("tool_duration_s",))


@dataclass(slots=True, frozen=True)
class JobSpec:
    """A job as submitted. ``slo_s`` (end to end) None means the scenario's SLO rule decides.

    ``ttft_slo_s`` / ``tpot_slo_s`` are optional per-call token-latency SLOs (chat serving); a job with
    them meets its SLO only if every call also meets them.
    """

    id: str
    kind: JobKind
    arrival_s: float
    stages: tuple[StageSpec, ...]
    slo_s: float | None = None
    tenant: str = "default"
    template: str = ""
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None

    def __post_init__(self) -> None:
        plain_numbers(self, (), ("arrival_s", "slo_s", "ttft_slo_s", "tpot_slo_s"))

    @property
    def num_calls(self) -> int:
        return sum(len(stage.calls) for stage in self.stages)

    def topological_stages(self) -> list[StageSpec]:
        """Stages ordered so every stage comes after the stages it depends on (the job must be valid)."""
        deps = self.dependencies()
        by_name = {stage.name: stage for stage in self.stages}
        ordered: list[StageSpec] = []
        placed: set[str] = set()
        while len(ordered) < len(self.stages):
            progress = False
            for stage in self.stages:
                if stage.name not in placed and all(parent in placed for parent in deps[stage.name]):
                    ordered.append(by_name[stage.name])
                    placed.add(stage.name)
                    progress = True
            if not progress:
                raise ConfigError(f"job {self.id!r}.stages", "dependency cycle")
        return ordered

    def dependencies(self) -> dict[str, tuple[str, ...]]:
        """Stage name -> names it waits for (explicit ``after`` or the previous stage)."""
        deps: dict[str, tuple[str, ...]] = {}
        previous: str | None = None
        for stage in self.stages:
            if stage.after is not None:
                deps[stage.name] = stage.after
            else:
                deps[stage.name] = (previous,) if previous is not None else ()
            previous = stage.name
        return deps


STEP_SEPARATOR = "#"


def step_name(stage_name: str) -> str:
    """The step a stage runs (what predictors learn from): ``"unit_tester#2"`` -> ``"unit_tester"``.

    A stage's name is its identity inside a job and must be unique; a workflow that runs one step
    several times names the repeats ``step#2``, ``step#3``, ... (see :func:`unique_stage_names`).
    """
    if STEP_SEPARATOR not in stage_name:
        return stage_name  # most stages: no repeat suffix to strip
    step, separator, suffix = stage_name.rpartition(STEP_SEPARATOR)
    return step if separator and step and suffix.isdigit() else stage_name


def unique_stage_names(names: Sequence[str]) -> list[str]:
    """Unique identities for stage ``names`` in order: a repeated name becomes ``name#2``, ``name#3``, ...

    The first occurrence keeps its name, so a workflow without repeats is unchanged; a suffix already
    taken by another stage is skipped.
    """
    taken = set(names)
    seen: set[str] = set()
    unique: list[str] = []
    for name in names:
        identity = name
        if name in seen:
            count = 2
            while f"{name}{STEP_SEPARATOR}{count}" in taken:
                count += 1
            identity = f"{name}{STEP_SEPARATOR}{count}"
            taken.add(identity)
        seen.add(name)
        unique.append(identity)
    return unique


def single_job(
    job_id: str, arrival_s: float, call: CallSpec, slo_s: float | None = None, template: str = ""
) -> JobSpec:
    return JobSpec(
        id=job_id,
        kind=JobKind.SINGLE,
        arrival_s=arrival_s,
        stages=(StageSpec(name=template or "call", calls=(call,)),),
        slo_s=slo_s,
        template=template,
    )


def validate_job(job: JobSpec) -> None:
    """Reject jobs that can never run: bad numbers, unknown stage references, dependency cycles."""
    where = f"job {job.id!r}"
    if job.arrival_s < 0:
        raise ConfigError(f"{where}.arrival_s", f"must be >= 0, got {job.arrival_s}")
    for name in ("slo_s", "ttft_slo_s", "tpot_slo_s"):
        value = getattr(job, name)
        if value is not None and not value > 0:
            raise ConfigError(f"{where}.{name}", f"must be > 0, got {value}")
    if not job.stages:
        raise ConfigError(f"{where}.stages", "a job needs at least one stage")
    names = [stage.name for stage in job.stages]
    if len(set(names)) != len(names):
        raise ConfigError(
            f"{where}.stages", f"stage names must be unique (name repeats of one step 'step#2', ...), got {names}"
        )
    for stage in job.stages:
        _validate_stage(where, stage)
    deps = job.dependencies()
    for name, parents in deps.items():
        for parent in parents:
            if parent not in deps:
                raise ConfigError(f"{where}.stages[{name}].after", f"unknown stage {parent!r}; known stages: {names}")
    _reject_cycles(where, deps)


def _validate_stage(where: str, stage: StageSpec) -> None:
    if not stage.calls and stage.tool_duration_s <= 0:
        raise ConfigError(f"{where}.stages[{stage.name}]", "a stage needs calls or a tool_duration_s > 0")
    if stage.tool_duration_s < 0:
        raise ConfigError(f"{where}.stages[{stage.name}].tool_duration_s", "must be >= 0")
    for index, call in enumerate(stage.calls):
        field_name = f"{where}.stages[{stage.name}].calls[{index}]"
        if call.input_tokens < 1:
            raise ConfigError(f"{field_name}.input_tokens", f"must be >= 1, got {call.input_tokens}")
        if call.output_tokens < 1:
            raise ConfigError(f"{field_name}.output_tokens", f"must be >= 1, got {call.output_tokens}")
        if call.max_output_tokens is not None and call.max_output_tokens < call.output_tokens:
            raise ConfigError(f"{field_name}.max_output_tokens", "must be >= output_tokens")
        if not 0 <= call.prefix_tokens <= call.input_tokens:
            raise ConfigError(f"{field_name}.prefix_tokens", "must be in [0, input_tokens]")
        if not 0 <= call.group_tokens <= call.input_tokens - call.prefix_tokens:
            raise ConfigError(f"{field_name}.group_tokens", "must be in [0, input_tokens - prefix_tokens]")
        if call.group_tokens and (call.group_key is None or call.prefix_key is None):
            raise ConfigError(f"{field_name}.group_key", "group_tokens need a group_key and a prefix_key")


def _reject_cycles(where: str, deps: dict[str, tuple[str, ...]]) -> None:
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        mark = state.get(name, 0)
        if mark == 2:
            return
        if mark == 1:
            cycle = [*path[path.index(name) :], name]
            raise ConfigError(f"{where}.stages", f"dependency cycle: {' -> '.join(cycle)}")
        state[name] = 1
        for parent in deps[name]:
            visit(parent, [*path, name])
        state[name] = 2

    for stage_name in deps:
        visit(stage_name, [])
