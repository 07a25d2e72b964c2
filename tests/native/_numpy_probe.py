"""Run in a child process by ``test_numpy_inputs.py``: a run whose jobs, instance spec and third-party
policies hand the simulator numpy numbers (as code built on numpy does), printed as a records digest."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

import slosched.sim.cluster
from slosched.core.job import CallSpec, JobKind, JobSpec, StageSpec
from slosched.core.request import Request
from slosched.core.views import EngineView, InstanceView, StepMode, StepPlan
from slosched.native import is_compiled
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.cluster.base import ROUTERS
from slosched.policies.engine.base import BATCHINGS
from slosched.policies.registry import PolicyContext
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, simulate
from tests.conftest import make_cluster
from tests.native._identity_probe import digest


class NumpyRouter:
    def route(self, request: Request, instances: Sequence[InstanceView], now_s: float) -> int:
        return np.argmin([view.waiting_prefill_tokens + view.outstanding_decode_tokens for view in instances])  # type: ignore[return-value]


class NumpyBatching:
    time_invariant = True

    def plan(self, engine: EngineView) -> StepPlan:
        budget = np.int64(512)
        return StepPlan(StepMode.MIXED, budget, np.int32(engine.spec.max_running), np.bool_(True))  # type: ignore[arg-type]


class NumpyPredictor(HistoryOutputPredictor):
    def predict(self, request: Request) -> float:
        return np.float32(super().predict(request))  # type: ignore[return-value]


@ROUTERS.register("numpy-router")
def _router(params: Mapping[str, Any], context: PolicyContext) -> NumpyRouter:
    return NumpyRouter()


@BATCHINGS.register("numpy-chunked")
def _batching(params: Mapping[str, Any], context: PolicyContext) -> NumpyBatching:
    return NumpyBatching()


def jobs() -> list[JobSpec]:
    rng = np.random.default_rng(5)
    inputs, outputs = rng.integers(50, 900, 120), rng.integers(5, 300, 120)
    arrivals = np.cumsum(rng.exponential(0.05, 120)).astype(np.float32)
    return [
        JobSpec(
            f"j{k}", JobKind.SINGLE, arrivals[k], (StageSpec("s", (CallSpec(inputs[k], outputs[k], np.int64(400)),)),)
        )
        for k in range(120)
    ]


def main() -> None:
    specs = [replace(spec, max_running=np.int64(24)) for spec in make_cluster(1, 1)]
    pair = PolicyPair.parse("numpy-router+fcfs/always/numpy-chunked")
    options = SimOptions(slo_scale=4.0)
    result = simulate(specs, jobs(), pair, 3, options, output_predictor=NumpyPredictor())
    print(json.dumps({"compiled": is_compiled(slosched.sim.cluster), "digest": digest(result)}))


if __name__ == "__main__":
    main()
