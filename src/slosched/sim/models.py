"""Per-instance models: ground truth (roofline or a measured profile), belief (linear predictor), capacity, limits."""

from __future__ import annotations

import functools
from dataclasses import dataclass

from slosched.core.belief import StepPredictor
from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.perf.linear import LinearStepPredictor
from slosched.perf.profile_fit import MeasuredProfile, MeasuredStepModel
from slosched.perf.roofline import RooflineModel


@dataclass(slots=True)
class InstanceModels:
    """``max_model_len``: the longest prompt + output an instance accepts (its configured length, capped
    by what its KV cache can hold, as vLLM checks at start-up)."""

    spec: InstanceSpec
    truth: RooflineModel | MeasuredStepModel
    belief: StepPredictor
    num_kv_blocks: int
    max_model_len: int

    @classmethod
    def build(cls, spec: InstanceSpec) -> InstanceModels:
        truth: RooflineModel | MeasuredStepModel
        if spec.profile is not None:
            truth = _measured(spec.profile)
        else:
            truth = _truth(spec.gpu, spec.model, spec.tp, spec.stack)
        blocks = spec.num_kv_blocks
        if blocks is None:
            blocks = truth.num_kv_blocks(spec.gpu_memory_utilization, spec.block_size)
        if blocks < 1:
            raise ConfigError(
                f"instance {spec.name!r}",
                f"{spec.model} with tp={spec.tp} leaves no KV cache on {spec.gpu}; use a larger tp or GPU",
            )
        max_len = min(spec.max_model_len, blocks * spec.block_size)
        return cls(spec, truth, LinearStepPredictor(), blocks, max_len)

    def job_latency_s(self, job: JobSpec) -> float:
        """The job alone on this instance: the critical path through its stages (calls of a stage run
        in parallel, so a stage lasts as long as its longest call, plus its tool step)."""
        if len(job.stages) == 1:
            stage = job.stages[0]
            longest = max(
                (self.call_latency_s(call.input_tokens, call.output_tokens) for call in stage.calls),
                default=0.0,
            )
            return longest + stage.tool_duration_s
        finish: dict[str, float] = {}
        deps = job.dependencies()
        for stage in job.topological_stages():
            start = max((finish[parent] for parent in deps[stage.name]), default=0.0)
            longest = max(
                (self.call_latency_s(call.input_tokens, call.output_tokens) for call in stage.calls),
                default=0.0,
            )
            finish[stage.name] = start + longest + stage.tool_duration_s
        return max(finish.values())

    def call_latency_s(self, input_tokens: int, output_tokens: int) -> float:
        return _call_latency(self.truth, input_tokens, output_tokens)

    @property
    def frontend_s(self) -> tuple[float, float, float]:
        """``(serial, constant, per_token)``: the engine front end's (API server's) serial cost per request,
        the constant latency a request spends outside engine steps, and the front end's work per streamed
        token; only a measured profile knows them (the roofline models the engine alone)."""
        if isinstance(self.truth, MeasuredStepModel):
            truth = self.truth
            return truth.request_overhead_s, truth.request_latency_s, truth.token_overhead_s
        return 0.0, 0.0, 0.0


@functools.lru_cache(maxsize=64)
def _truth(gpu: str, model: str, tp: int, stack: str) -> RooflineModel:
    return RooflineModel.build(gpu, model, tp, stack)


@functools.lru_cache(maxsize=64)
def _measured(path: str) -> MeasuredStepModel:
    return MeasuredProfile.load(path).step_model()


def _call_latency(truth: RooflineModel | MeasuredStepModel, input_tokens: int, output_tokens: int) -> float:
    return truth.no_contention_latency_s(input_tokens, output_tokens)
