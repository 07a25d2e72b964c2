"""Build a simulation for one policy pair (``ROUTER+ENGINE``) and run it.

Policies come from the shared builder (``policies/spec.py``); ``PolicyPair`` and ``PolicyParams`` live there
and are re-exported here for the callers that import them from the runner.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from slosched.core.belief import OutputLengthPredictor
from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.registry import PolicyContext
from slosched.policies.spec import PolicyPair, PolicyParams, PolicySpec
from slosched.sim.cluster import ClusterSim
from slosched.sim.models import InstanceModels
from slosched.sim.options import SimOptions

__all__ = ["PolicyPair", "PolicyParams", "build_sim", "simulate"]


def simulate(
    instances: Sequence[InstanceSpec],
    jobs: Sequence[JobSpec],
    policy: PolicyPair,
    seed: int,
    options: SimOptions,
    params: PolicyParams | None = None,
    job_policy: str = "deadline",
    history: Sequence[JobSpec] | None = None,
    output_predictor: OutputLengthPredictor | None = None,
) -> RunResult:
    """One run; the same seed and jobs give bit-identical results. ``history``: past traffic the leak-free
    deadlines learn their statistics from (``sim/deadlines.py``); None uses the jobs' own aggregates.
    ``output_predictor``: what the policies share for output lengths (default ``HistoryOutputPredictor``;
    a bench passes an ORACLE one to measure the limit)."""
    sim = build_sim(instances, policy, seed, options, params, job_policy, history, output_predictor)
    result = sim.run(jobs)
    result.seed = seed
    return result


def build_sim(
    instances: Sequence[InstanceSpec],
    policy: PolicyPair,
    seed: int,
    options: SimOptions,
    params: PolicyParams | None = None,
    job_policy: str = "deadline",
    history: Sequence[JobSpec] | None = None,
    output_predictor: OutputLengthPredictor | None = None,
    policy_name: str | None = None,
) -> ClusterSim:
    """The simulation ``simulate`` runs, not yet run (benches that probe it mid-run build it here, so every
    path seeds and builds policies the same way). ``policy_name`` names the result (default: the pair)."""
    params = params or PolicyParams()
    models = [InstanceModels.build(spec) for spec in instances]
    block_sizes = {spec.block_size for spec in instances}
    if len(block_sizes) > 1:
        raise ConfigError("cluster.instances.block_size", f"all instances must share one block size, got {block_sizes}")
    policy_rng, sim_seed = np.random.SeedSequence(seed).spawn(2)
    context = PolicyContext(
        instances=tuple(instances),
        rng=np.random.default_rng(policy_rng),
        output_predictor=(
            output_predictor if output_predictor is not None else HistoryOutputPredictor(mode=options.output_predictor)
        ),
    )
    policies = PolicySpec.from_pair(policy, params, job_policy).build(context)
    router, job_layer = policies.cluster_layer()
    engines = policies.engines(len(models))
    return ClusterSim(
        models,
        engines,
        router,
        job_layer,
        context.output_predictor,
        options,
        seed=int(sim_seed.generate_state(1)[0]),
        policy_name=policy.name if policy_name is None else policy_name,
        history=history,
    )
