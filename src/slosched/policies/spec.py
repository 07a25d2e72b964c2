"""The one ``PolicySpec -> PolicySet`` builder the simulator, the gateway and the vLLM plugin share.

A ``PolicySpec`` names what runs, with parameters: a router, an engine (``EngineSpec``: a preset, or
``ORDERING/ADMISSION/BATCHING`` parts) and a job policy. It is parsed from the ``ROUTER+ENGINE`` text of a
scenario or the CLI plus a ``PolicyParams`` mapping (``from_text``), or built field by field (the gateway's
config, the plugin's engine-only spec). ``build(context)`` gives a ``PolicySet``: the router, a factory of
fresh engine policies (one per instance: engine policies are stateful), the job policy and the output
predictor they share. Every runtime builds through here, so a name means the same objects everywhere.

Build order is fixed (router, then job policy; engines when the runtime asks, in instance order), because
factories may draw from the context's seeded RNG and the same seed must give the same run.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from slosched.core.belief import OutputLengthPredictor
from slosched.core.errors import ConfigError, UnknownNameError
from slosched.policies.cluster.base import ROUTERS, Router
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.spec import EngineSpec
from slosched.policies.fairness.share import FairShare
from slosched.policies.fairness.spec import FairShareSpec
from slosched.policies.job.bands import BandAware, bands_of
from slosched.policies.job.base import JOB_POLICIES, JobPolicy
from slosched.policies.registry import PolicyContext
from slosched.policies.stacks.base import STACKS, stack_names

DEFAULT_JOB_POLICY = "deadline"


@dataclass(slots=True, frozen=True)
class PolicyParams:
    """Parameters per router / engine / job policy name (a scenario's ``policy_params``)."""

    router: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    engine: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    job: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    stack: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Fair sharing across tenants (a scenario's ``fair_share``); None: none, exactly the behaviour without it.
    fair_share: FairShareSpec | None = None


@dataclass(slots=True, frozen=True)
class PolicyPair:
    """The names of ``ROUTER+ENGINE`` (the unit scenarios and benchmarks compare); no parameters. A stack
    name (``slosched``, ``policies/stacks/``) stands for its router and engine, and ``stack`` keeps it."""

    router: str
    engine: str
    stack: str | None = None

    @property
    def name(self) -> str:
        return self.stack if self.stack is not None else f"{self.router}+{self.engine}"

    @classmethod
    def parse(cls, text: str) -> PolicyPair:
        stack = STACKS.get(text.strip())
        if stack is not None:
            return cls(stack.router, stack.engine, stack.name)
        router, plus, engine = text.strip().partition("+")
        if not plus or not router or not engine:
            raise ConfigError(
                "policy",
                f"{text!r} is not ROUTER+ENGINE (e.g. round-robin+fcfs or round-robin+urgency/always/chunked) "
                f"nor a stack ({', '.join(stack_names())}); "
                f"routers: {', '.join(ROUTERS.names())}; engines: {', '.join(ENGINE_PRESETS.names())} "
                "or ORDERING/ADMISSION/BATCHING",
            )
        pair = cls(router.strip(), engine.strip())
        pair.validate()
        return pair

    def validate(self) -> None:
        if self.router not in ROUTERS:
            raise UnknownNameError(ROUTERS.kind, self.router, ROUTERS.names())
        EngineSpec.parse(self.engine)


@dataclass(slots=True)
class PolicySet:
    """Built policies of one run (or one gateway, or one engine). ``router`` and ``job`` are None for an
    engine-only spec (the vLLM plugin routes nothing); ``new_engine`` builds a fresh engine policy."""

    name: str
    router: Router | None
    job: JobPolicy | None
    new_engine: Callable[[], EnginePolicy]
    context: PolicyContext

    @property
    def output_predictor(self) -> OutputLengthPredictor:
        return self.context.output_predictor

    def engines(self, count: int) -> list[EnginePolicy]:
        """``count`` independent engine policies, one per instance, in instance order."""
        return [self.new_engine() for _ in range(count)]

    def cluster_layer(self) -> tuple[Router, JobPolicy]:
        """The router and the job policy, for runtimes that route (the simulator, the gateway)."""
        if self.router is None or self.job is None:
            raise ConfigError("policy", f"{self.name!r} names no router or no job policy; a cluster needs both")
        return self.router, self.job


@dataclass(slots=True, frozen=True)
class PolicySpec:
    """What runs, by name, with parameters. ``router``/``job`` None: an engine-only spec."""

    engine: EngineSpec = field(default_factory=EngineSpec)
    router: str | None = None
    job: str | None = None
    router_params: Mapping[str, Any] = field(default_factory=dict)
    job_params: Mapping[str, Any] = field(default_factory=dict)
    fair_share: FairShareSpec | None = None

    @property
    def name(self) -> str:
        return f"{self.router}+{self.engine.name}" if self.router is not None else self.engine.name

    @classmethod
    def from_text(cls, text: str, params: PolicyParams | None = None, job: str = DEFAULT_JOB_POLICY) -> PolicySpec:
        """``ROUTER+ENGINE`` with each name's parameters looked up in ``params``."""
        return cls.from_pair(PolicyPair.parse(text), params, job)

    @classmethod
    def from_pair(
        cls, pair: PolicyPair, params: PolicyParams | None = None, job: str = DEFAULT_JOB_POLICY
    ) -> PolicySpec:
        """The spec of ``pair``; a stack ignores ``job`` (it sets its own job policy)."""
        params = params or PolicyParams()
        if pair.stack is not None:  # a stack sets its job policy too, and takes its one parameter block
            stack = STACKS[pair.stack]
            router_params, engine_params, job_params = stack.split_params(params.stack.get(stack.name))
            spec = cls.of(stack.router, stack.engine, stack.job, router_params, engine_params, job_params)
        else:
            given_router, given_engine = params.router.get(pair.router), params.engine.get(pair.engine)
            spec = cls.of(pair.router, pair.engine, job, given_router, given_engine, params.job.get(job))
        return spec if params.fair_share is None else dataclasses.replace(spec, fair_share=params.fair_share)

    @classmethod
    def of(
        cls,
        router: str,
        engine: str,
        job: str = DEFAULT_JOB_POLICY,
        router_params: Mapping[str, Any] | None = None,
        engine_params: Mapping[str, Any] | None = None,
        job_params: Mapping[str, Any] | None = None,
    ) -> PolicySpec:
        """A validated spec from names and per-name parameters (the gateway's ``policies`` section)."""
        engine_spec = EngineSpec.parse(engine, engine_params)
        spec = cls(engine_spec, router, job, dict(router_params or {}), dict(job_params or {}))
        spec.validate()
        return spec

    def validate(self) -> None:
        """Every name registered; errors name the field and the allowed values."""
        self.engine.validate()
        if self.router is not None and self.router not in ROUTERS:
            raise UnknownNameError(ROUTERS.kind, self.router, ROUTERS.names())
        if self.job is not None and self.job not in JOB_POLICIES:
            raise UnknownNameError(JOB_POLICIES.kind, self.job, JOB_POLICIES.names())

    def build(self, context: PolicyContext) -> PolicySet:
        """Fresh policies over ``context`` (instances, seeded RNG, shared output predictor)."""
        router = ROUTERS.build(self.router, self.router_params, context) if self.router is not None else None
        job = JOB_POLICIES.build(self.job, self.job_params, context) if self.job is not None else None
        engine, fair = self.engine, self.fair_share
        if isinstance(job, BandAware):  # admission judges a job by the work its tenant's band meets
            job.use_bands(bands_of(fair))

        def new_engine() -> EnginePolicy:
            policy = engine.build(context)
            if fair is not None:  # one FairShare per instance, as the engine policy itself
                policy.fair_share = FairShare(fair)
            return policy

        return PolicySet(self.name, router, job, new_engine, context)
