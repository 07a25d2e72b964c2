"""Fit and check a current-engine software stack (``vllm-v1``) against measured whole steps.

The measured steps (:mod:`slosched.perf.measured_steps`) are a plain PyTorch forward captured in one CUDA
graph per shape: an upper bound on a current engine's GPU time for the same step (elementwise ops unfused,
SDPA attention, the grouped KV copied per query head in prompt chunks). vLLM fuses those kernels and uses
FlashAttention/FlashInfer, but adds scheduler CPU time per step, mostly hidden by asynchronous scheduling.
The stack is therefore fitted to ``measured / FLOOR_OVER_ENGINE``: a fused engine about 10 % faster than
the floor. ``BAND`` is what every measured point must satisfy: ``measured / truth`` in [0.90, 1.35]
(never more than 10 % faster than the engine's model, at most 35 % slower, the unfused floor's excess).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType

import numpy as np
from scipy.optimize import least_squares

from slosched.perf.hardware import gpu_facts, model_facts
from slosched.perf.measured_steps import GROUPS, MeasuredStep
from slosched.perf.roofline import CALIBRATION, Calibration, RooflineModel, StackProfile, gpu_efficiency
from slosched.perf.stacks import CURRENT_ENGINE_STACK

FLOOR_OVER_ENGINE = 1.10
BAND = (0.90, 1.35)
REFERENCE_STACKS = ("splitwise", "vidur")
# name: (initial, lower, upper). memory_scale is capped so bandwidth stays at or below the datasheet's;
# seq_work_scale's lower bound keeps a per-row cost the floor (which samples nothing) cannot show.
PARAMETERS: dict[str, tuple[float, float, float]] = {
    "compute_scale": (0.8, 0.3, 1.3),
    "memory_scale": (1.1, 0.5, 1.0),  # upper bound: 1 / the GPU's memory efficiency (set per GPU)
    "layer_overhead_s": (50e-6, 0.0, 1e-3),
    "seq_work_scale": (0.3, 0.1, 5.0),
    "attention_scale": (0.8, 0.2, 1.5),
    "attention_units": (64.0, 1.0, 1024.0),
    "mixed_layer_overhead_s": (20e-6, 0.0, 1e-3),
}


@dataclass(slots=True, frozen=True)
class StepCheck:
    """One measured step against the stack: ``ratio`` = measured / stack; ``reference`` per older stack."""

    step: MeasuredStep
    stack_ms: float
    ratio: float
    reference: Mapping[str, float]

    @property
    def in_band(self) -> bool:
        return BAND[0] <= self.ratio <= BAND[1]


def _model(step: MeasuredStep, stack: str, calibration: Calibration | None) -> RooflineModel:
    return RooflineModel.build(step.gpu, step.model, 1, stack, calibration)


def check_steps(
    steps: Sequence[MeasuredStep], stack: str = CURRENT_ENGINE_STACK, calibration: Calibration | None = None
) -> list[StepCheck]:
    """Every step timed by ``stack`` (TP 1, as measured) and by the reference stacks."""
    models: dict[tuple[str, str, str], RooflineModel] = {}
    rows = []
    for step in steps:
        times = {}
        for name in (stack, *REFERENCE_STACKS):
            key = (step.gpu, step.model, name)
            if key not in models:
                models[key] = _model(step, name, calibration if name == stack else None)
            times[name] = models[key].step_time_s(*step.step_args())
        ratios = {name: step.measured_s / times[name] for name in REFERENCE_STACKS}
        rows.append(StepCheck(step, times[stack] * 1e3, step.measured_s / times[stack], MappingProxyType(ratios)))
    return rows


def stack_from(params: Mapping[str, float], gpu: str, base: StackProfile) -> StackProfile:
    """``base`` with the fitted parameters (the scales for ``gpu``, other GPUs' scales kept)."""
    return replace(
        base,
        compute_scale=MappingProxyType({**base.compute_scale, gpu: params["compute_scale"]}),
        memory_scale=MappingProxyType({**base.memory_scale, gpu: params["memory_scale"]}),
        layer_overhead_s=params["layer_overhead_s"],
        seq_work_scale=params["seq_work_scale"],
        attention_scale=params["attention_scale"],
        attention_units=params["attention_units"],
        # the fitted units apply on ``gpu`` too (a GPU-specific override would hide them)
        attention_units_by_gpu=MappingProxyType({k: v for k, v in base.attention_units_by_gpu.items() if k != gpu}),
        mixed_layer_overhead_s=params["mixed_layer_overhead_s"],
    )


def with_stack(stack: StackProfile, calibration: Calibration = CALIBRATION) -> Calibration:
    """``calibration`` with ``stack`` added or replaced."""
    return Calibration(calibration.gpus, MappingProxyType({**calibration.stacks, stack.name: stack}))


@dataclass(slots=True, frozen=True)
class StackFit:
    stack: StackProfile
    params: dict[str, float]
    rms_log_error: float


def fit_stack(steps: Sequence[MeasuredStep], name: str = CURRENT_ENGINE_STACK) -> StackFit:
    """Least squares over log(stack / (measured / FLOOR_OVER_ENGINE)) of ``steps`` (all on one GPU).

    Deterministic (fixed start). The per-step constant is all per-layer (``step_overhead_s`` stays as
    in the base stack): one model cannot separate the two, and launches scale with the layers.
    """
    return _fit(steps, name, PARAMETERS, stack_from)


# What a new GPU for the same engine changes: its streaming rate and the attention units that fill it.
# Compute is held: the H100-family dies (H200 is GH100 with HBM3e) run the same GEMMs at the same clocks.
GPU_PARAMETERS: dict[str, tuple[float, float, float]] = {
    "memory_scale": (1.1, 0.5, 1.0),  # upper bound: 1 / the GPU's memory efficiency (set per GPU)
    "attention_units": (64.0, 1.0, 1024.0),
}


def gpu_stack_from(params: Mapping[str, float], gpu: str, base: StackProfile) -> StackProfile:
    """``base`` with ``gpu``'s own memory scale and attention units (every other GPU's kept)."""
    return replace(
        base,
        memory_scale=MappingProxyType({**base.memory_scale, gpu: params["memory_scale"]}),
        attention_units_by_gpu=MappingProxyType({**base.attention_units_by_gpu, gpu: params["attention_units"]}),
    )


def fit_gpu_scales(steps: Sequence[MeasuredStep], name: str = CURRENT_ENGINE_STACK) -> StackFit:
    """``name``'s memory scale and attention units for the one GPU of ``steps``, every engine constant held.

    The engine's constants (launch floor, per-row cost, attention's FLOP efficiency, mixed-step cost) are
    the engine's, fitted on H100; another GPU of the same family differs in how fast it streams memory.
    The compute scale is the GPU's ``efficiency_like`` GPU's (or its own, if the stack sets one).
    """
    return _fit(steps, name, GPU_PARAMETERS, gpu_stack_from)


def _fit(
    steps: Sequence[MeasuredStep],
    name: str,
    parameters: Mapping[str, tuple[float, float, float]],
    build: Callable[[Mapping[str, float], str, StackProfile], StackProfile],
) -> StackFit:
    """``parameters`` (initial, lower, upper) of stack ``name`` fitted to ``steps`` of one GPU; ``build``
    makes the stack from a parameter set."""
    gpus = {s.gpu for s in steps}
    if len(gpus) != 1:
        raise ValueError(f"fit one GPU at a time, got {sorted(gpus)}")
    gpu = gpus.pop()
    facts = gpu_facts(gpu)
    efficiency = gpu_efficiency(facts)
    base = CALIBRATION.stacks.get(name, StackProfile(name))
    names = list(parameters)
    bounds = {n: parameters[n][1:] for n in names}
    bounds["memory_scale"] = (0.5, 1.0 / efficiency.memory)
    lower, upper = np.array([bounds[n][0] for n in names]), np.array([bounds[n][1] for n in names])
    x0 = np.clip([parameters[n][0] for n in names], lower, upper)
    target = np.log([s.measured_s / FLOOR_OVER_ENGINE for s in steps])
    models = {m: model_facts(m) for m in {s.model for s in steps}}

    def residuals(x: np.ndarray) -> np.ndarray:
        stack = build(dict(zip(names, (float(v) for v in x), strict=True)), gpu, base)
        built = {m: RooflineModel(facts, f, 1, efficiency, stack) for m, f in models.items()}
        return np.log([built[s.model].step_time_s(*s.step_args()) for s in steps]) - target

    solution = least_squares(residuals, x0, bounds=(lower, upper))
    params = dict(zip(names, (float(v) for v in solution.x), strict=True))
    rms = float(math.sqrt(np.mean(solution.fun**2)))
    return StackFit(build(params, gpu, base), params, rms)


def group_summary(rows: Sequence[StepCheck]) -> dict[str, tuple[float, float]]:
    """(min, max) ratio per group of points that has any."""
    summary = {}
    for group in GROUPS:
        ratios = [r.ratio for r in rows if r.step.group == group]
        if ratios:
            summary[group] = (min(ratios), max(ratios))
    return summary


def format_checks(rows: Sequence[StepCheck], stack: str = CURRENT_ENGINE_STACK) -> str:
    head = f"{'group':8} {'point':34} {'measured':>9} {stack:>9} {'ratio':>6}"
    lines = [head + "".join(f" {'/' + name:>10}" for name in REFERENCE_STACKS) + "  band"]
    for r in rows:
        refs = "".join(f" {r.reference[name]:10.2f}" for name in REFERENCE_STACKS)
        flag = "ok" if r.in_band else "OUT"
        point = f"{r.step.group:8} {r.step.label:34} {r.step.measured_s * 1e3:9.2f}"
        lines.append(f"{point} {r.stack_ms:9.2f} {r.ratio:6.3f}{refs}  {flag}")
    lines.append(f"ratio = measured / {stack}; band [{BAND[0]:.2f}, {BAND[1]:.2f}]")
    for group, (low, high) in group_summary(rows).items():
        lines.append(f"  {group:8} min {low:.3f}  max {high:.3f}")
    return "\n".join(lines)


def write_stack_fit(path: Path, steps: Sequence[MeasuredStep]) -> Path:
    """``vllm-v1`` refitted to ``steps`` (whole, and the GPU's scales alone) and the stacks' bands, as JSON
    (``gpu_profile``'s fit step). The refitted constants go into ``stacks.CALIBRATION``; ``calibrate
    --measured`` rechecks the profile."""
    fit = fit_stack(steps)
    refit = check_steps(steps, CURRENT_ENGINE_STACK, with_stack(fit.stack))
    gpu_fit = fit_gpu_scales(steps)
    shipped = check_steps(steps)
    payload = {
        "stack": CURRENT_ENGINE_STACK,
        "target": f"measured / {FLOOR_OVER_ENGINE}",
        "band": list(BAND),
        "fitted": fit.params,
        "rms_log_error": fit.rms_log_error,
        "refit_ratio_by_group": group_summary(refit),
        # A new GPU for the same engine: only its streaming rate and attention units refitted.
        "gpu_fitted": {"gpu": steps[0].gpu, **gpu_fit.params},
        "gpu_rms_log_error": gpu_fit.rms_log_error,
        "gpu_refit_ratio_by_group": group_summary(check_steps(steps, CURRENT_ENGINE_STACK, with_stack(gpu_fit.stack))),
        "shipped_ratio_by_group": group_summary(shipped),
        "shipped_in_band": sum(r.in_band for r in shipped),
        "points": len(shipped),
    }
    path.write_text(json.dumps(payload, indent=1) + "\n")
    return path
