"""Engine preset ``relserve`` (DPU + ABA); ``relserve-pp`` and ``relserve-dp`` (``relserve_pp.py``,
``relserve_dp.py``) are ablations built here that replace the ABA's latency-delta rule in the tail case by
always-prefill / always-decode.

Parameters: ``num_samples`` (4, rows sampled per job for the prefix-cache miss ratio),
``starvation_unit_wait_s`` (2.0 s per request of the job at arrival; null disables the guard),
``mixed_prefill`` (true: a prefill step also carries the running decodes, as vLLM v1 / Sarathi batch them;
false: separate prefill-only and decode-only steps, the vLLM v0 engine the paper built on),
``output_length`` (``limit``: the ABA's OL is the relQuery's output length limit, as the paper defines it;
``predicted``: the predicted remaining output instead), and,
programmatically only, ``overhead_meter``: an ``OverheadMeter`` the parts add their run time to (for the
overhead benchmark). The baselines are ``fcfs`` (vLLM), ``chunked-fcfs`` (Sarathi) and
``static-priority`` with job policy ``static-sum`` (vLLM-SP).
"""

from __future__ import annotations

from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.batching.relserve_arranger import (
    OUTPUT_LENGTHS,
    AdaptiveBatchArranger,
    SingleJobAdmission,
)
from slosched.policies.engine.ordering.relserve_model import RelServeStepModel
from slosched.policies.engine.ordering.relserve_overhead import OverheadMeter
from slosched.policies.engine.ordering.relserve_priority import RelservePriorityParams, build_dpu
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class RelserveParams(RelservePriorityParams):
    mixed_prefill: bool = setting(True, "a prefill step also carries the running decodes (false: vLLM v0 steps)")
    output_length: str = setting("limit", "the ABA's output length: the relQuery's limit (the paper) or predicted")
    overhead_meter: OverheadMeter | None = setting(None, "from code only: a meter the parts add their run time to")  # noqa: RUF009

    def __post_init__(self) -> None:
        RelservePriorityParams.__post_init__(self)
        if self.output_length not in OUTPUT_LENGTHS:
            raise ConfigError(
                "relserve.output_length", f"expected one of {list(OUTPUT_LENGTHS)}, got {self.output_length!r}"
            )


def build_relserve(name: str, tail_rule: str, params: RelserveParams) -> EnginePolicy:
    """The DPU and the ABA over one fresh step model; ``tail_rule`` picks the ABA's tail case."""
    model = RelServeStepModel()
    arranger = AdaptiveBatchArranger(
        build_dpu(params, model, params.overhead_meter), tail_rule, params.mixed_prefill, params.output_length
    )
    # The DPU is the step observer feeding the model; listing it once keeps observations single.
    return EnginePolicy(name, arranger.dpu, SingleJobAdmission(arranger), arranger)


@ENGINE_PRESETS.register("relserve", params=RelserveParams)
def relserve(params: RelserveParams, context: PolicyContext) -> EnginePolicy:
    return build_relserve("relserve", "delta", params)
