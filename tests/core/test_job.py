import pytest

from slosched.core.errors import ConfigError
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec, single_job, validate_job


def _workflow(*stages: StageSpec, slo_s: float | None = 60.0) -> JobSpec:
    return JobSpec(id="w", kind=JobKind.WORKFLOW, arrival_s=0.0, stages=stages, slo_s=slo_s)


CALL = CallSpec(input_tokens=100, output_tokens=10)


def test_chain_is_the_default_dependency() -> None:
    job = _workflow(StageSpec("a", (CALL,)), StageSpec("b", (CALL, CALL)), StageSpec("c", (CALL,), after=("a",)))
    validate_job(job)
    assert job.dependencies() == {"a": (), "b": ("a",), "c": ("a",)}
    assert [stage.name for stage in job.topological_stages()] == ["a", "b", "c"]


def test_cycles_are_rejected_with_the_cycle() -> None:
    job = _workflow(StageSpec("a", (CALL,), after=("b",)), StageSpec("b", (CALL,), after=("a",)))
    with pytest.raises(ConfigError, match="dependency cycle: a -> b -> a"):
        validate_job(job)


def test_unknown_references_name_the_stage() -> None:
    job = _workflow(StageSpec("a", (CALL,)), StageSpec("b", (CALL,), after=("nope",)))
    with pytest.raises(ConfigError, match=r"stages\[b\]\.after.*unknown stage 'nope'"):
        validate_job(job)


@pytest.mark.parametrize(
    ("job", "field"),
    [
        (single_job("x", -1.0, CALL), "arrival_s"),
        (single_job("x", 0.0, CALL, slo_s=0.0), "slo_s"),
        (single_job("x", 0.0, CallSpec(input_tokens=0, output_tokens=1)), "input_tokens"),
        (single_job("x", 0.0, CallSpec(input_tokens=5, output_tokens=0)), "output_tokens"),
        (single_job("x", 0.0, CallSpec(input_tokens=5, output_tokens=9, max_output_tokens=3)), "max_output_tokens"),
        (single_job("x", 0.0, CallSpec(input_tokens=5, output_tokens=1, prefix_tokens=6)), "prefix_tokens"),
        (_workflow(StageSpec("a", (CALL,)), StageSpec("a", (CALL,))), "stages"),
        (_workflow(StageSpec("a", ())), "stages[a]"),
    ],
)
def test_bad_jobs_name_the_field(job: JobSpec, field: str) -> None:
    with pytest.raises(ConfigError) as error:
        validate_job(job)
    assert field in str(error.value)
