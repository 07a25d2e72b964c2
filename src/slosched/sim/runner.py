"""Build a simulation for one policy pair (``ROUTER+ENGINE``) and run it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError, UnknownNameError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import ENGINE_PRESETS
from slosched.policies.job.base import JOB_POLICIES
from slosched.policies.registry import PolicyContext
from slosched.sim.cluster import ClusterSim
from slosched.sim.models import InstanceModels
from slosched.sim.options import SimOptions


@dataclass(slots=True, frozen=True)
class PolicyPair:
    router: str
    engine: str

    @property
    def name(self) -> str:
        return f"{self.router}+{self.engine}"

    @classmethod
    def parse(cls, text: str) -> PolicyPair:
        router, plus, engine = text.strip().partition("+")
        if not plus or not router or not engine:
            raise ConfigError(
                "policy",
                f"{text!r} is not ROUTER+ENGINE (e.g. round-robin+fcfs); routers: "
                f"{', '.join(ROUTERS.names())}; engines: {', '.join(ENGINE_PRESETS.names())}",
            )
        pair = cls(router, engine)
        pair.validate()
        return pair

    def validate(self) -> None:
        for registry, name in ((ROUTERS, self.router), (ENGINE_PRESETS, self.engine)):
            if name not in registry:
                raise UnknownNameError(registry.kind, name, registry.names())


@dataclass(slots=True, frozen=True)
class PolicyParams:
    """Parameters per router / engine name (from the scenario)."""

    router: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    engine: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    job: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def simulate(
    instances: Sequence[InstanceSpec],
    jobs: Sequence[JobSpec],
    policy: PolicyPair,
    seed: int,
    options: SimOptions,
    params: PolicyParams | None = None,
    job_policy: str = "deadline",
    history: Sequence[JobSpec] | None = None,
) -> RunResult:
    """One run; the same seed and jobs give bit-identical results. ``history``: past traffic the leak-free
    deadlines learn their statistics from (``sim/deadlines.py``); None uses the jobs' own aggregates."""
    params = params or PolicyParams()
    models = [InstanceModels.build(spec) for spec in instances]
    block_sizes = {spec.block_size for spec in instances}
    if len(block_sizes) > 1:
        raise ConfigError("cluster.instances.block_size", f"all instances must share one block size, got {block_sizes}")
    policy_rng, sim_seed = np.random.SeedSequence(seed).spawn(2)
    context = PolicyContext(
        instances=tuple(instances),
        rng=np.random.default_rng(policy_rng),
        output_predictor=HistoryOutputPredictor(),
    )
    router = ROUTERS.build(policy.router, params.router.get(policy.router, {}), context)
    engines = [ENGINE_PRESETS.build(policy.engine, params.engine.get(policy.engine, {}), context) for _ in models]
    job_layer = JOB_POLICIES.build(job_policy, params.job.get(job_policy, {}), context)
    sim = ClusterSim(
        models,
        engines,
        router,
        job_layer,
        context.output_predictor,
        options,
        seed=int(sim_seed.generate_state(1)[0]),
        policy_name=policy.name,
        history=history,
    )
    result = sim.run(jobs)
    result.seed = seed
    return result
