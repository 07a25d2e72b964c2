"""Gateway configuration (YAML, validated with pydantic): backends, policies, timeouts, limits, security.

Every error names the field (dotted path) and, for names, the registered values. Policy names are checked
against the registries at load, so a typo fails before the server binds.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError, model_validator

from slosched.contract import XARGS_KEY_ENV
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.instance import InstanceSpec
from slosched.core.problems import ConfigProblems, Problem, problems_of, unknown_message
from slosched.gateway.ops.server_config import ServerConfig
from slosched.gateway.ops.tenants_config import Tenants
from slosched.policies.param_problems import check_keys, check_named, pipeline_problems

if TYPE_CHECKING:
    from slosched.policies.fairness.spec import FairShareSpec
    from slosched.policies.spec import PolicySpec

_STRICT = ConfigDict(extra="forbid", frozen=True)


class BackendConfig(BaseModel):
    """One vLLM server. ``max_concurrency`` is the gateway's concurrency window for it (sequences forwarded
    and not finished: a call is its prompts times ``n``); ``max_queue`` bounds the requests waiting at the
    gateway for a slot on it."""

    model_config = _STRICT
    name: str = Field(min_length=1)
    url: str = Field(pattern=r"^https?://")
    model: str = "tiny"
    gpu: str = "cpu"
    max_concurrency: int = Field(default=32, ge=1)
    max_queue: int = Field(default=256, ge=0)
    max_model_len: int = Field(default=2048, ge=16)
    num_kv_blocks: int = Field(default=1024, ge=1)
    forward_priority: bool = False

    def spec(self) -> InstanceSpec:
        return InstanceSpec(
            name=self.name,
            gpu=self.gpu,
            model=self.model,
            max_running=self.max_concurrency,
            max_model_len=self.max_model_len,
            num_kv_blocks=self.num_kv_blocks,
        )


class PolicyConfig(BaseModel):
    """Registry names: a router, an engine (a preset or ``ORDERING/ADMISSION/BATCHING``; its ordering and
    admission run on the gateway's per-instance queues, its batching part stays inside vLLM) and a job
    policy, each with parameters; ``spec()`` is what the shared builder (``policies/spec.py``) builds."""

    model_config = _STRICT
    router: str = "least-tokens"
    router_params: dict[str, Any] = Field(default_factory=dict)
    engine: str = "chunked-fcfs"
    engine_params: dict[str, Any] = Field(default_factory=dict)
    job: str = "deadline"
    job_params: dict[str, Any] = Field(default_factory=dict)
    # A stack (``slosched``) sets router, engine and job policy together from one parameter block.
    stack: str | None = None
    stack_params: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0
    # The policies' output-length belief (as the simulator's ``output_predictor``): each template and stage's
    # mean, or refined by prompt length (perf/output_length.py).
    output_predictor: Literal["mean", "bucket"] = "mean"

    @model_validator(mode="after")
    def _known_names(self) -> PolicyConfig:
        """Every unknown policy, parameter and pipeline stage name at once (``ConfigProblems``, fields as
        in this block), then the shapes the builder checks (``spec``)."""
        problems = self._stack_problems() if self.stack is not None else self._layer_problems()
        if problems:
            raise ConfigProblems(problems)
        self.spec()  # parameter shapes and values
        return self

    def _stack_problems(self) -> list[Problem]:
        from slosched.policies.stacks.base import STACKS

        stack = STACKS.get(str(self.stack))
        if stack is None:
            return [Problem("stack", unknown_message("stack", self.stack, STACKS, "known names"))]
        layered = self.model_fields_set & {"router", "router_params", "engine", "engine_params", "job", "job_params"}
        problems = [Problem("stack", f"a stack sets its own layers; drop {sorted(layered)}")] if layered else []
        keys = sorted(stack.router_keys | stack.engine_keys | stack.job_keys)
        return problems + check_keys("stack_params", f"stack {self.stack!r}", self.stack_params, keys)

    def _layer_problems(self) -> list[Problem]:
        from slosched.policies.catalog import registries
        from slosched.policies.engine.spec import EngineSpec

        problems: list[Problem] = []
        for layer, section in (("router", "routers"), ("job", "job_policies")):
            registry, name = registries()[section], getattr(self, layer)
            if name not in registry:
                problems.append(Problem(layer, unknown_message(registry.kind, name, registry.names(), "known names")))
            else:
                problems += check_named(f"{layer}_params", section, name, getattr(self, f"{layer}_params"))
        if self.router == "pipeline":
            problems += pipeline_problems("router_params", self.router_params)
        try:
            EngineSpec.parse(self.engine, self.engine_params, "engine")
        except UnknownNameError as error:  # a preset or a part ("engine.batching"): named as such
            what = error.field.rpartition(".")[2] if "." in error.field else "engine preset"
            problems.append(Problem(error.field, unknown_message(what, error.name, error.known, "known names")))
        except ConfigError as error:
            problems.append(Problem(error.field, str(error).removeprefix(f"{error.field}: ")))
        return problems

    def spec(self) -> PolicySpec:
        from slosched.policies.engine.spec import EngineSpec
        from slosched.policies.spec import PolicyPair, PolicyParams, PolicySpec

        if self.stack is not None:
            params = PolicyParams(stack={self.stack: self.stack_params})
            return PolicySpec.from_pair(PolicyPair.parse(self.stack), params)

        engine = EngineSpec.parse(self.engine, self.engine_params, "policies.engine")
        return PolicySpec(engine, self.router, self.job, self.router_params, self.job_params)


class TimeoutConfig(BaseModel):
    """Seconds. Every wait in the gateway is bounded by one of these."""

    model_config = _STRICT
    connect_s: float = Field(default=2.0, gt=0)
    queue_s: float = Field(default=60.0, gt=0)
    first_byte_s: float = Field(default=60.0, gt=0)
    read_s: float = Field(default=30.0, gt=0)
    request_s: float = Field(default=600.0, gt=0)
    health_s: float = Field(default=2.0, gt=0)
    job_idle_s: float = Field(default=300.0, gt=0)
    # A call's first-byte wait: first_byte_factor x the backend's predicted time to first byte (the whole
    # body when not streaming), at least first_byte_min_s, at most first_byte_s (always on a last attempt).
    first_byte_min_s: float = Field(default=5.0, gt=0)
    first_byte_factor: float = Field(default=8.0, gt=0)


class EjectionConfig(BaseModel):
    """Outlier ejection (``gateway/backends/ejection.py``): after ``consecutive_failures`` failed calls in a row a
    backend is ejected for ``base_s``, doubled on each repeated ejection up to ``max_s``, then probed."""

    model_config = _STRICT
    consecutive_failures: int = Field(default=5, ge=1)
    base_s: float = Field(default=10.0, gt=0)
    max_s: float = Field(default=300.0, gt=0)


class AlphaTuningConfig(BaseModel):
    """Live alpha tuning of the ``workload-balanced`` router (``gateway.dispatch.alpha``): ``window_s`` recording
    window (100 s in the paper); retune when a window's latencies grew with p below ``p_threshold``."""

    model_config = _STRICT
    enabled: bool = False
    window_s: float = Field(default=100.0, gt=0)
    p_threshold: float = Field(default=0.01, gt=0, lt=1)


class FairShareConfig(BaseModel):
    """Fair sharing across tenants (``policies/fairness``): weights are the tenants' ``weight``, bands their
    ``priority``; ``max_wait_s`` bounds how long a lower band waits behind a higher one."""

    model_config = _STRICT
    default_weight: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    max_wait_s: float = Field(default=30.0, gt=0, allow_inf_nan=False)


class GatewayConfig(BaseModel):
    """The whole gateway. ``host`` defaults to loopback; expose it deliberately."""

    model_config = _STRICT
    host: str = "127.0.0.1"
    port: int = Field(default=8080, ge=0, le=65535)
    backends: list[BackendConfig] = Field(min_length=1)
    policies: PolicyConfig = Field(default_factory=PolicyConfig)
    timeouts: TimeoutConfig = Field(default_factory=TimeoutConfig)
    ejection: EjectionConfig = Field(default_factory=EjectionConfig)
    alpha_tuning: AlphaTuningConfig = Field(default_factory=AlphaTuningConfig)
    scrape_interval_s: float = Field(default=1.0, gt=0)
    # Plugin-exported engine state older than this is not routed on (gateway/backends/engine_state.py).
    engine_state_max_age_s: float = Field(default=5.0, gt=0)
    health_interval_s: float = Field(default=2.0, gt=0)
    retry_down_after_s: float = Field(default=5.0, gt=0)
    max_attempts: int = Field(default=3, ge=1)
    priority_mode: Literal["deadline", "job"] = "deadline"
    forward_xargs: bool = True
    # The secret the gateway signs its vllm_xargs with (contract.sign_xargs; the plugin needs the same one).
    # Default: the SLOSCHED_XARGS_KEY environment variable; unset: fields go unsigned and a plugin ignores them.
    xargs_key: Annotated[str, StringConstraints(min_length=16, max_length=1024)] | None = Field(
        default_factory=lambda: os.environ.get(XARGS_KEY_ENV) or None, repr=False
    )
    # The shortest time between two re-pumps of a queue driven by a time-dependent engine policy
    # (PolicyQueue.next_wake_s); queue changes pump at once.
    tick_s: float = Field(default=0.05, gt=0)
    default_max_tokens: int = Field(default=256, ge=1)
    api_keys: list[str] = Field(default_factory=list)
    # Identity from the operator (gateway/ops/identity.py): keys -> tenants; after api_keys (their validator reads it).
    tenants: Tenants = Field(default_factory=dict)
    # Fair sharing of queue places and slots by tenant weight (on when set or when a tenant has a weight).
    fair_share: FairShareConfig | None = None
    # Let the x-tenant header pick the tenant of open-mode callers and legacy api_keys (dev/bench setups).
    trust_tenant_header: bool = False
    tenant_rate_limits: dict[str, float] = Field(default_factory=dict)
    default_rate_limit: float | None = Field(default=None, gt=0)
    # One JSON line per finished call on stdout (gateway/ops/access_log.py); reloadable.
    access_log: bool = False
    # Keys that may read /status.json (gateway/ops/status.py); empty: any caller the other routes let in.
    operator_api_keys: list[Annotated[str, StringConstraints(min_length=1, max_length=512)]] = Field(
        default_factory=list
    )
    # Tenants named in the `tenant` label of /metrics beyond those in `tenants:`; the rest count as "other".
    metrics_max_tenants: int = Field(default=32, ge=0, le=10_000)
    max_body_bytes: int = Field(default=4_000_000, ge=1024)
    max_jobs: int = Field(default=10_000, ge=1)
    # Job API (gateway/jobs/manager.py): open jobs one tenant may hold when its tenant entry sets no max_jobs, so
    # one tenant cannot fill max_jobs for everyone.
    max_jobs_per_tenant: int = Field(default=1_000, ge=1)
    # Durable jobs: sqlite:///PATH (relative to the working directory), postgresql://..., redis://...,
    # memory:// (nothing survives a restart); replica is this gateway's name there (default host:port).
    job_store: str = "sqlite:///.slosched/jobs.sqlite3"
    replica: str | None = Field(default=None, min_length=1, max_length=128)
    job_retention_s: float = Field(default=86_400.0, gt=0)
    # Replicas heartbeat this often; one silent for 3 intervals has its open jobs claimed by the others.
    job_heartbeat_s: float = Field(default=5.0, gt=0)
    # Client-connection limits: header/body timeouts, header size, connections, shutdown grace.
    server: ServerConfig = Field(default_factory=ServerConfig)

    @model_validator(mode="after")
    def _unique_names(self) -> GatewayConfig:
        names = [backend.name for backend in self.backends]
        if len(set(names)) != len(names):
            raise ConfigError("backends", f"backend names must be unique, got {names}")
        for tenant, rate in self.tenant_rate_limits.items():
            if not rate > 0:
                raise ConfigError(f"tenant_rate_limits.{tenant}", f"must be > 0 requests/s, got {rate}")
        return self


def fair_share_spec(config: GatewayConfig) -> FairShareSpec | None:
    """The fair-sharing spec of ``config``; None (first come, first served) unless configured."""
    from slosched.policies.fairness.spec import FairShareSpec

    weights = tuple((name, tenant.weight) for name, tenant in config.tenants.items() if tenant.weight is not None)
    if config.fair_share is None and not weights:
        return None
    fair = config.fair_share or FairShareConfig()
    bands = tuple((name, tenant.priority) for name, tenant in config.tenants.items())
    return FairShareSpec(weights, bands, fair.default_weight, fair.max_wait_s)


# Fields whose values an error never echoes (config errors end up in logs and terminals).
_SECRET = frozenset({"api_keys", "operator_api_keys", "xargs_key", "job_store"})


def parse_config(data: Any, where: str = "config") -> GatewayConfig:
    """Validate a mapping; raises ``ConfigProblems`` (a ``ConfigError``) naming every bad field at once,
    each as the file spells it, as scenarios do (``core/problems.py``)."""
    if not isinstance(data, dict):
        raise ConfigError(where, f"expected a mapping, got {type(data).__name__}")
    try:
        return GatewayConfig.model_validate(data)
    except ValidationError as error:
        problems = [
            p if p.field != "scenario" else Problem(where, p.message) for p in problems_of(error, GatewayConfig)
        ]
        raise ConfigProblems(problems) from None


def load_config(path: Path) -> GatewayConfig:
    if not path.is_file():
        raise ConfigError(str(path), "gateway config file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise ConfigError(str(path), f"invalid YAML: {error}") from error
    return parse_config(data, str(path))
