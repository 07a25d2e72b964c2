"""Scenario files (YAML): cluster, workload, SLO, policies and simulator knobs, validated with pydantic.

Every error names the field (dotted path) and, where there is a fixed set, the allowed values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import numpy as np
import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.instance import DEFAULT_SOFTWARE_STACK, InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.problems import Problem, problems_of, unknown_message
from slosched.perf.hardware import gpu_facts, model_facts, use_hardware
from slosched.perf.hf_config import looks_like_config
from slosched.perf.profile_fit import MeasuredProfile
from slosched.perf.roofline import CALIBRATION
from slosched.policies.fairness.spec import FairShareSpec
from slosched.policies.job.base import JOB_POLICIES
from slosched.scenario.overrides import apply_overrides
from slosched.scenario.validation import ScenarioError, policy_param_problems
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams
from slosched.workloads.arrivals import ArrivalProcess, ArrivalSpec
from slosched.workloads.generators import generate_jobs
from slosched.workloads.trace_io import load_jobs

_STRICT = ConfigDict(extra="forbid", frozen=True)


class InstanceGroup(BaseModel):
    """``count`` identical instances named ``{name}-{i}`` (or ``name`` itself when count is 1)."""

    model_config = _STRICT
    name: str
    gpu: str
    model: str
    tp: int = Field(default=1, ge=1)
    count: int = Field(default=1, ge=1)
    max_running: int = Field(default=256, ge=1)
    max_batched_tokens: int = Field(default=8192, ge=16)
    max_model_len: int = Field(default=32768, ge=16)
    block_size: int = Field(default=16, ge=1)
    num_kv_blocks: int | None = Field(default=None, ge=1)
    prefix_caching: bool = True
    gpu_memory_utilization: float = Field(default=0.9, gt=0, le=1)
    stack: str = DEFAULT_SOFTWARE_STACK
    available_from_s: float = Field(default=0.0, ge=0)
    profile: str | None = None  # measured step model (slosched profile), replaces the roofline truth; a
    # relative path is relative to the scenario file

    @field_validator("model")
    @classmethod
    def _config_beside_the_scenario(cls, value: str, info: ValidationInfo) -> str:
        """A model given as a Hugging Face config path (``perf/hf_config.py``) that is relative names a file
        beside the scenario file, as a profile does; made absolute so worker processes find it too."""
        base = (info.context or {}).get("base_dir")
        if not looks_like_config(value) or Path(value).is_absolute():
            return value
        return str((Path(base) / value if base is not None else Path(value)).resolve())

    @field_validator("profile")
    @classmethod
    def _profile_beside_the_scenario(cls, value: str | None, info: ValidationInfo) -> str | None:
        """A relative profile path names a file beside the scenario file (when loaded from one)."""
        base = (info.context or {}).get("base_dir")
        if value is None or base is None or Path(value).is_absolute():
            return value
        return str(Path(base) / value)

    @model_validator(mode="after")
    def _known_hardware(self) -> InstanceGroup:
        gpu_facts(self.gpu)
        model_facts(self.model)
        if self.stack not in CALIBRATION.stacks:
            raise UnknownNameError("stack", self.stack, list(CALIBRATION.stacks))
        if self.profile is not None:
            MeasuredProfile.load(self.profile)  # fail at load time, naming the file
        return self

    def specs(self) -> list[InstanceSpec]:
        names = [self.name] if self.count == 1 else [f"{self.name}-{i}" for i in range(self.count)]
        fields = self.model_dump(exclude={"name", "count"})
        return [InstanceSpec(name=name, **fields) for name in names]


class ClusterConfig(BaseModel):
    model_config = _STRICT
    instances: list[InstanceGroup] = Field(min_length=1)

    def specs(self) -> tuple[InstanceSpec, ...]:
        specs = [spec for group in self.instances for spec in group.specs()]
        names = [spec.name for spec in specs]
        if len(set(names)) != len(names):
            raise ConfigError("cluster.instances", f"instance names must be unique, got {names}")
        return tuple(specs)


class WorkloadConfig(BaseModel):
    """Either a generator (name, params, arrival process, number of jobs) or a JSONL ``trace`` file.

    ``tenant``: the tenant of the generated jobs (default: the generator's, ``default``). ``also``: more
    generated workloads, each with its own arrivals and tenant, merged in by arrival time (several tenants
    on one cluster, e.g. one flooding the others with a large relQuery); each draws from its own seed stream,
    so adding one leaves the others' jobs unchanged."""

    model_config = _STRICT
    generator: str | None = None
    params: dict[str, Any] = Field(default_factory=dict)
    arrival: dict[str, Any] = Field(default_factory=lambda: {"process": "poisson", "rate": 1.0})
    num_jobs: int = Field(default=1000, ge=1)
    trace: str | None = None
    tenant: str | None = Field(default=None, min_length=1)
    also: list[WorkloadConfig] = Field(default_factory=list)

    def generated(self, rng: np.random.Generator) -> list[JobSpec]:
        """This generator's jobs (not ``also``), under ``tenant`` when one is given."""
        assert self.generator is not None
        arrivals = ArrivalSpec.from_mapping(self.arrival).sample(self.num_jobs, rng)
        jobs = generate_jobs(self.generator, self.params, arrivals, rng)
        tenant = self.tenant
        return jobs if tenant is None else [dataclasses.replace(job, tenant=tenant) for job in jobs]

    @model_validator(mode="after")
    def _one_source(self) -> WorkloadConfig:
        if (self.generator is None) == (self.trace is None):
            raise ConfigError("workload", "give exactly one of 'generator' or 'trace'")
        if self.generator is not None:
            _check_arrival(self.arrival)
        if any(extra.generator is None or extra.also for extra in self.also):
            raise ConfigError("workload.also", "each entry needs a 'generator' (no trace) and no 'also' of its own")
        return self


def _check_arrival(arrival: Mapping[str, Any]) -> None:
    """Validate the ``arrival`` block, naming its fields ``arrival.*`` as the scenario spells them (the
    spec itself says ``arrivals``) and the closest key to a misspelt one."""
    known = list(ArrivalSpec.model_fields)
    for key in arrival:
        if key not in known:
            raise ConfigError(f"arrival.{key}", unknown_message("key", key, known))
    processes = get_args(ArrivalProcess)
    if arrival.get("process") not in processes:
        raise ConfigError("arrival.process", unknown_message("process", arrival.get("process"), processes))
    try:
        ArrivalSpec.from_mapping(arrival)
    except ConfigError as error:
        rest = error.field.removeprefix("arrivals").lstrip(".")
        field = f"arrival.{rest}" if rest else "arrival"
        raise ConfigError(field, str(error).removeprefix(f"{error.field}: ")) from None


class SloConfig(BaseModel):
    """``seconds``: one SLO for every job; ``scale``: x each job's no-contention latency on the fastest
    instance, as a client can estimate it at submission (``basis: estimated``, the default: template
    statistics of past traffic, input lengths, max_tokens) or from its true output lengths (``basis:
    true-lengths``, an ORACLE deadline). A job's own ``slo_s`` (trace) wins over both."""

    model_config = _STRICT
    seconds: float | None = Field(default=None, gt=0)
    scale: float | None = Field(default=None, gt=0)
    basis: Literal["estimated", "true-lengths"] = "estimated"

    @model_validator(mode="after")
    def _at_most_one(self) -> SloConfig:
        if self.seconds is not None and self.scale is not None:
            raise ConfigError("slo", "give 'seconds' or 'scale', not both")
        return self


class SimulatorConfig(BaseModel):
    model_config = _STRICT
    noise_sigma: float = Field(default=0.05, ge=0, le=1)
    view_staleness_s: float = Field(default=0.0, ge=0)
    fast_forward: bool = True
    belief_refit_s: float = Field(default=2.0, ge=0)
    # Seconds between the per-instance samples of the report's time series; unset: about 500 over the
    # arrival span; 0: none. Sampling only reads, so it never changes a result.
    sample_interval_s: float | None = Field(default=None, ge=0)
    # A job its job policy finds hopeless: served as best effort (relegate), or ended at once as rejected, as
    # for gateway clients that ask for an early "cannot meet deadline" (sim/options.py).
    on_infeasible: Literal["relegate", "reject"] = "relegate"
    # The policies' output-length belief: each template and stage's mean, or refined by prompt length.
    output_predictor: Literal["mean", "bucket"] = "mean"


class PolicyParamsConfig(BaseModel):
    model_config = _STRICT
    router: dict[str, dict[str, Any]] = Field(default_factory=dict)
    engine: dict[str, dict[str, Any]] = Field(default_factory=dict)
    job: dict[str, dict[str, Any]] = Field(default_factory=dict)
    stack: dict[str, dict[str, Any]] = Field(default_factory=dict)


def _one_or_many(value: object) -> object:
    return [value] if isinstance(value, str) else value


def _known_pair(text: str) -> str:
    """One ``policies`` entry (checked alone, so every bad entry is reported)."""
    PolicyPair.parse(text)
    return text


class Scenario(BaseModel):
    model_config = _STRICT
    name: str = "scenario"
    description: str = ""
    seed: int = 0
    # User hardware files (GPUs, models, prices) merged over the bundled ones, relative to the scenario file;
    # applied before the cluster is checked (``_apply_hardware``).
    hardware: Annotated[list[str], BeforeValidator(_one_or_many)] = Field(default_factory=list)
    # USD per GPU-hour by GPU name, over the hardware file's list prices (cost columns of ``sweep``).
    prices: dict[str, Annotated[float, Field(ge=0, allow_inf_nan=False)]] = Field(default_factory=dict)
    cluster: ClusterConfig
    workload: WorkloadConfig
    slo: SloConfig = Field(default_factory=SloConfig)
    policies: list[Annotated[str, AfterValidator(_known_pair)]] = Field(
        default_factory=lambda: ["round-robin+fcfs"], min_length=1
    )
    job_policy: str = "deadline"
    policy_params: PolicyParamsConfig = Field(default_factory=PolicyParamsConfig)
    simulator: SimulatorConfig = Field(default_factory=SimulatorConfig)
    # Fair sharing across tenants ({tenants: {NAME: {weight, band}}, default_weight, max_wait_s}); absent: none.
    fair_share: dict[str, Any] | None = None

    @field_validator("fair_share")
    @classmethod
    def _fair_share(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            FairShareSpec.from_mapping(value)  # errors name the field
        return value

    @field_validator("prices")
    @classmethod
    def _priced_gpus_known(cls, value: dict[str, float]) -> dict[str, float]:
        for name in value:
            gpu_facts(name)  # an unknown GPU names the known ones
        return value

    @field_validator("job_policy")
    @classmethod
    def _known_job_policy(cls, value: str) -> str:
        if value not in JOB_POLICIES:
            raise UnknownNameError("job_policy", value, JOB_POLICIES.names())
        return value

    def policy_pairs(self) -> list[PolicyPair]:
        return [PolicyPair.parse(text) for text in self.policies]

    def params(self) -> PolicyParams:
        return PolicyParams(
            router=self.policy_params.router,
            engine=self.policy_params.engine,
            job=self.policy_params.job,
            stack=self.policy_params.stack,
            fair_share=None if self.fair_share is None else FairShareSpec.from_mapping(self.fair_share),
        )

    def options(self) -> SimOptions:
        sim = self.simulator
        return SimOptions(
            noise_sigma=sim.noise_sigma,
            view_staleness_s=sim.view_staleness_s,
            fast_forward=sim.fast_forward,
            belief_refit_s=sim.belief_refit_s,
            sample_interval_s=sim.sample_interval_s,
            on_infeasible=sim.on_infeasible,
            output_predictor=sim.output_predictor,
            slo_s=self.slo.seconds,
            slo_scale=self.slo.scale,
            slo_basis=self.slo.basis,
        )

    def history(self, trace: str | Path | None = None) -> list[JobSpec] | None:
        """Past traffic the leak-free deadlines learn from: the generator's jobs under another seed (the
        same mix, other jobs). A replayed trace has none; its own per-template aggregates stand in."""
        if trace is not None or self.workload.generator is None:
            return None
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 2]))
        num_jobs = min(self.workload.num_jobs, 2000)
        arrivals = ArrivalSpec.from_mapping(self.workload.arrival).sample(num_jobs, rng)
        return generate_jobs(self.workload.generator, self.workload.params, arrivals, rng)

    def jobs(self, base_dir: Path | None = None, trace: str | Path | None = None) -> list[JobSpec]:
        """The scenario's jobs: a trace file (argument or scenario) or the seeded generator."""
        source = trace if trace is not None else self.workload.trace
        if source is not None:
            path = Path(source)
            if not path.is_absolute() and base_dir is not None and trace is None:
                path = base_dir / path
            return load_jobs(path)
        rng = np.random.default_rng(np.random.SeedSequence([self.seed, 1]))
        jobs = self.workload.generated(rng)
        for index, extra in enumerate(self.workload.also):
            extra_rng = np.random.default_rng(np.random.SeedSequence([self.seed, 1, index + 1]))
            jobs += extra.generated(extra_rng)
        if self.workload.also:
            jobs.sort(key=lambda job: job.arrival_s)  # stable: ties keep workload order
            if len({job.id for job in jobs}) != len(jobs):
                raise ConfigError("workload.also", "job ids collide; give each workload a distinct id_prefix")
        return jobs


def parse_scenario(
    data: Mapping[str, Any], where: str = "scenario", base_dir: Path | None = None, check_generator: bool = False
) -> Scenario:
    """Validate a scenario mapping; relative file paths in it (profiles) resolve against ``base_dir``.

    Raises ``ScenarioError`` (a ``ConfigError``) listing every problem found, not only the first.
    ``check_generator``: also check the workload generator's name now (files do; a mapping built in code
    may name a generator registered later, so by default it is checked when jobs are built)."""
    problems = _apply_hardware(data, base_dir)
    scenario: Scenario | None = None
    try:
        scenario = Scenario.model_validate(data, context={"base_dir": base_dir})
    except ValidationError as error:
        problems += [_named(problem, where) for problem in problems_of(error, Scenario)]
    problems += policy_param_problems(data)
    if check_generator:
        problems += _generator_problems(data)
    if problems:
        raise ScenarioError(problems)
    assert scenario is not None
    return scenario


def _apply_hardware(data: Mapping[str, Any], base_dir: Path | None) -> list[Problem]:
    """Make the scenario's ``hardware`` files active (as ``--hardware`` does: for this process and the
    workers it starts), so the cluster's GPU and model names are checked against them."""
    value = data.get("hardware")
    files = [value] if isinstance(value, str) else value
    if not files or not isinstance(files, list) or not all(isinstance(item, str) for item in files):
        return []  # absent, or a wrong type the model's validation reports
    paths = [Path(item) if Path(item).is_absolute() or base_dir is None else base_dir / item for item in files]
    try:
        use_hardware(paths)
    except ConfigError as error:
        return [Problem("hardware", str(error))]
    return []


def _generator_problems(data: Mapping[str, Any]) -> list[Problem]:
    from slosched.workloads.generators import generator_names

    workload = data.get("workload")
    name = workload.get("generator") if isinstance(workload, Mapping) else None
    if not isinstance(name, str) or name in generator_names():
        return []
    return [Problem("workload.generator", unknown_message("generator", name, generator_names(), "known names"))]


def _named(problem: Problem, where: str) -> Problem:
    return problem if problem.field != "scenario" else Problem(where, problem.message)


def _yaml_problem(error: yaml.YAMLError) -> str:
    """PyYAML's multi-line message as one line: the problem and where it is."""
    problem = getattr(error, "problem", None) or type(error).__name__
    mark = getattr(error, "problem_mark", None)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(problem)


def load_scenario(path: str | Path, overrides: Sequence[str] = ()) -> Scenario:
    """The scenario file at ``path`` with ``--set`` ``overrides`` (``scenario_overrides.py``) applied."""
    path = Path(path)
    if not path.exists():
        raise ConfigError("scenario", f"file not found: {path}")
    if not path.is_file():
        raise ConfigError("scenario", f"{path} is a directory, not a scenario file")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError("scenario", f"{path} is not valid YAML: {_yaml_problem(error)}") from None
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError("scenario", f"cannot read {path}: {error}") from None
    if not isinstance(data, Mapping):
        raise ConfigError("scenario", f"{path} must hold a mapping at the top level")
    return parse_scenario(apply_overrides(data, overrides), str(path), base_dir=path.parent, check_generator=True)
