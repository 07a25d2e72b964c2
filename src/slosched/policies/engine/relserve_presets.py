"""Engine presets ``relserve`` (DPU + ABA), ``relserve-pp`` and ``relserve-dp`` (ablations that replace
the ABA's latency-delta rule in the tail case by always-prefill / always-decode).

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

from collections.abc import Mapping
from typing import Any

from slosched.core.errors import ConfigError
from slosched.policies.engine.base import ENGINE_PRESETS, EnginePolicy
from slosched.policies.engine.relserve_arranger import (
    OUTPUT_LENGTHS,
    AdaptiveBatchArranger,
    SingleJobAdmission,
)
from slosched.policies.engine.relserve_model import RelServeStepModel
from slosched.policies.engine.relserve_overhead import OverheadMeter
from slosched.policies.engine.relserve_priority import build_dpu
from slosched.policies.registry import PolicyContext, reject_unknown_params

_PARAMS = {"num_samples", "starvation_unit_wait_s", "mixed_prefill", "output_length", "overhead_meter"}


def build_relserve(name: str, tail_rule: str, params: Mapping[str, Any]) -> EnginePolicy:
    reject_unknown_params(name, params, _PARAMS)
    meter = params.get("overhead_meter")
    if meter is not None and not isinstance(meter, OverheadMeter):
        raise ConfigError(f"{name}.overhead_meter", "must be an OverheadMeter (set it from code, not YAML)")
    model = RelServeStepModel()
    mixed = params.get("mixed_prefill", True)
    if not isinstance(mixed, bool):
        raise ConfigError(f"{name}.mixed_prefill", f"expected true or false, got {mixed!r}")
    output_length = params.get("output_length", "limit")
    if output_length not in OUTPUT_LENGTHS:
        raise ConfigError(f"{name}.output_length", f"expected one of {list(OUTPUT_LENGTHS)}, got {output_length!r}")
    dpu_params = {k: v for k, v in params.items() if k in ("num_samples", "starvation_unit_wait_s")}
    arranger = AdaptiveBatchArranger(build_dpu(dpu_params, model, meter), tail_rule, mixed, output_length)
    # The DPU is the step observer feeding the model; listing it once keeps observations single.
    return EnginePolicy(name, arranger.dpu, SingleJobAdmission(arranger), arranger)


@ENGINE_PRESETS.register("relserve")
def relserve(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return build_relserve("relserve", "delta", params)


@ENGINE_PRESETS.register("relserve-pp")
def relserve_pp(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return build_relserve("relserve-pp", "prefill", params)


@ENGINE_PRESETS.register("relserve-dp")
def relserve_dp(params: Mapping[str, Any], context: PolicyContext) -> EnginePolicy:
    return build_relserve("relserve-dp", "decode", params)
