"""Fit the roofline's efficiencies to the measured anchor points in ``hardware.json`` (rerunnable), and check
the current-engine stack ``vllm-v1`` against every measured whole step.

``python -m slosched.perf.calibrate [--measured FILE ...] [--refit | --refit-gpu] [--no-anchors]`` refits the anchors,
prints the fitted constants (to paste into ``stacks.CALIBRATION``) and the anchor table; then it prints every
measured step (default: the 52 bundled H100 Llama-3-8B steps; ``--measured``: gpu-profile files, e.g. from
``python -m slosched.perf.gpu_profile --engine graph``) with measured ms, ``vllm-v1`` ms, measured / vllm-v1 and
the splitwise/vidur ratios, and exits 1 if any ratio is outside [0.90, 1.35]. ``--refit`` refits ``vllm-v1``
to those steps first (:func:`slosched.perf.stack_fit.fit_stack`) and prints its constants; ``--refit-gpu`` refits
only the measured GPU's memory scale and attention units (:func:`slosched.perf.stack_fit.fit_gpu_scales`: another
GPU for the same engine, as H200's were fitted). Without ``--measured`` it also checks the H200 steps those were
fitted to and every held-out file (six more models on H100 and on H200).

Where ``vllm-v1`` sits: the measured steps are a plain PyTorch forward in one CUDA graph per shape, an upper
bound on a current engine's GPU time (elementwise ops unfused, SDPA attention, the grouped KV copied per query
head). vLLM fuses and uses FlashAttention/FlashInfer but adds scheduler CPU time per step (mostly overlapped by
asynchronous scheduling), so ``vllm-v1`` is fitted to measured / 1.10: between the unfused floor (ratio 1) and a
fully fused engine with no CPU cost (about 1.2-1.3 where elementwise traffic and launches weigh most). Its
ratios run 0.97-1.13 on decode and prefill, up to 1.28 on mixed steps whose chunk the floor runs non-causally.

Each anchor is evaluated with the very ``RooflineModel`` the simulator uses, under the stack of its source:

* ``vidur`` — per-operator kernel profiles: ``RooflineModel.linear_time_s`` (dense + elementwise ops
  only; attention, all-reduce and LM head are excluded from those CSVs), no engine overhead.
  ``prefill_us_per_token`` is compared with ``linear_time_s(4096) / 4096``.
* ``splitwise`` — Splitwise's ``perf_model.csv`` (Llama2-70B; its ``tensor_parallel`` column is 2):
  ``prompt_ms`` = one prefill step of the prompt; ``token_ms`` = mean decode step while a batch of
  512-token prompts generates its 128 tokens.
* ``hexgen`` — Llama-3.1-70B with 4-bit weights and KV, TP1 assumed (it fits one 48 GB GPU): one
  decode step at batch 1 with a 1024-token context (the context's share is below 1 %).

Qualitative only (not fitted, not checked): Hexgen's ``generate_candidate_step_s`` and
``relative_speed_vs_A100`` (whole workflow stages whose token counts are not given) and NexusSched's
claims (ranges, not measurements).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from scipy.optimize import least_squares

from slosched.perf import fused_gap
from slosched.perf.hardware import measured_anchor_points
from slosched.perf.measured_steps import (
    MeasuredStep,
    bundled_measured_steps,
    gpu_fitted_measured_steps,
    heldout_measured_steps,
    load_measured,
)
from slosched.perf.roofline import CALIBRATION, Calibration, GpuEfficiency, RooflineModel, StackProfile
from slosched.perf.stack_fit import (
    FLOOR_OVER_ENGINE,
    StepCheck,
    check_steps,
    fit_gpu_scales,
    fit_stack,
    format_checks,
    group_summary,
    with_stack,
)
from slosched.perf.stacks import CURRENT_ENGINE_STACK


@dataclass(slots=True, frozen=True)
class Anchor:
    """One measured point and how to evaluate it: ``quantity`` is ``linear`` (``linear_time_s`` of
    ``num_tokens``), ``prefill`` (one prefill step of ``num_tokens``) or ``decode`` (mean of
    ``num_steps`` decode steps of ``num_tokens`` sequences, each starting at ``context_tokens``)."""

    source: str
    label: str
    measured_ms: float
    gpu: str
    model: str
    tp: int
    stack: str
    quantity: str
    num_tokens: int
    context_tokens: int = 0
    num_steps: int = 1
    per_token: bool = False


@dataclass(slots=True, frozen=True)
class AnchorCheck:
    """Measured vs modelled; ``error_pct`` = 100 * (model / measured - 1)."""

    source: str
    label: str
    measured_ms: float
    model_ms: float
    error_pct: float


@dataclass(slots=True, frozen=True)
class FitResult:
    calibration: Calibration
    params: dict[str, float]
    max_abs_error_pct: float
    rms_log_error: float


def _vidur_anchors(block: Mapping[str, Any]) -> list[Anchor]:
    columns = (
        ("t_1tok_ms", 1, False),
        ("t_512tok_ms", 512, False),
        ("t_4096tok_ms", 4096, False),
        ("prefill_us_per_token", 4096, True),
    )
    anchors = []
    for row in block["rows"]:
        gpu, model, tp = row["gpu"], row["model"], int(row["tp"])
        for key, tokens, per_token in columns:
            if key not in row:
                continue
            anchors.append(
                Anchor(
                    source="vidur",
                    label=f"{model} {gpu} tp{tp} {key}",
                    measured_ms=float(row[key]) / (1000.0 if per_token else 1.0),
                    gpu=gpu,
                    model=model,
                    tp=tp,
                    stack="vidur",
                    quantity="linear",
                    num_tokens=tokens,
                    per_token=per_token,
                )
            )
    return anchors


def _splitwise_anchor(gpu: str, what: str, ms: float, quantity: str, num_tokens: int) -> Anchor:
    return Anchor(
        source="splitwise",
        label=f"Llama-2-70B {gpu} tp2 {what}",
        measured_ms=float(ms),
        gpu=gpu,
        model="Llama-2-70B",
        tp=2,
        stack="splitwise",
        quantity=quantity,
        num_tokens=num_tokens,
        context_tokens=512 if quantity == "decode" else 0,
        num_steps=127 if quantity == "decode" else 1,
    )


def _splitwise_anchors(block: Mapping[str, Any]) -> list[Anchor]:
    anchors = []
    for gpu, tables in block.items():
        if gpu.startswith("_"):
            continue
        for size, ms in tables["prompt_ms"].items():
            anchors.append(_splitwise_anchor(gpu, f"prompt {size}", ms, "prefill", int(size)))
        for key, ms in tables["token_ms"].items():
            batch = int(key.removeprefix("batch"))
            anchors.append(_splitwise_anchor(gpu, f"token {key}", ms, "decode", batch))
    return anchors


def _hexgen_anchors(block: Mapping[str, Any]) -> list[Anchor]:
    return [
        Anchor(
            source="hexgen",
            label=f"Llama-3.1-70B-4bit {gpu} tp1 decode",
            measured_ms=float(ms),
            gpu=gpu,
            model="Llama-3.1-70B",
            tp=1,
            stack="hexgen",
            quantity="decode",
            num_tokens=1,
            context_tokens=1024,
        )
        for gpu, ms in block["decode_ms_per_token"].items()
    ]


def anchors() -> list[Anchor]:
    """Every measured anchor point in ``hardware.json``, in file order."""
    data = measured_anchor_points()
    return [
        *_vidur_anchors(data["vidur_profiles"]),
        *_splitwise_anchors(data["splitwise_perf_model"]),
        *_hexgen_anchors(data["hexgen_text2sql_llama31_70b_4bit"]),
    ]


def evaluate_ms(anchor: Anchor, calibration: Calibration | None = None) -> float:
    """The model's value for ``anchor`` in ms (per token for per-token anchors)."""
    model = RooflineModel.build(anchor.gpu, anchor.model, anchor.tp, anchor.stack, calibration)
    n = anchor.num_tokens
    if anchor.quantity == "linear":
        seconds = model.linear_time_s(n)
    elif anchor.quantity == "prefill":
        seconds = model.step_time_s(n, 0, 0, 0)
    else:
        seconds = float(model.decode_run_s(n, n * anchor.context_tokens, anchor.num_steps).mean())
    return seconds * 1000.0 / (n if anchor.per_token else 1)


def anchor_checks(calibration: Calibration | None = None) -> list[AnchorCheck]:
    """Every anchor against the model (default: the shipped ``CALIBRATION``)."""
    rows = []
    for anchor in anchors():
        model_ms = evaluate_ms(anchor, calibration)
        error = 100.0 * (model_ms / anchor.measured_ms - 1.0)
        rows.append(AnchorCheck(anchor.source, anchor.label, anchor.measured_ms, model_ms, error))
    return rows


# name: (initial, lower, upper). Efficiencies in (0, 1]; overheads in seconds.
PARAMETERS: dict[str, tuple[float, float, float]] = {
    "A100.compute": (0.6, 0.05, 1.0),
    "H100.compute": (0.6, 0.05, 1.0),
    "A40.compute": (0.6, 0.05, 1.0),
    "A100.memory": (0.7, 0.05, 1.0),
    "H100.memory": (0.7, 0.05, 1.0),
    "A40.memory": (0.7, 0.05, 1.0),
    "L40S.memory": (0.7, 0.05, 1.0),
    "splitwise.step_overhead_s": (2e-3, 1e-5, 0.05),
    "splitwise.seq_overhead_s": (1e-4, 1e-7, 5e-3),
    "splitwise.H100.compute_scale": (0.8, 0.2, 1.0),
    "hexgen.step_overhead_s": (2e-3, 1e-5, 0.05),
}


def calibration_from(params: dict[str, float]) -> Calibration:
    """Build a ``Calibration`` from fitted parameters, with the ties documented in ``roofline``."""
    gpus = dict(CALIBRATION.gpus)

    def eff(name: str, compute: float, memory: float) -> GpuEfficiency:
        return replace(gpus[name], compute=compute, memory=memory)

    a100 = eff("A100-80G", params["A100.compute"], params["A100.memory"])
    a40 = eff("A40", params["A40.compute"], params["A40.memory"])
    gpus.update(
        {
            "A100-80G": a100,
            "A100-40G": a100,
            "H100": eff("H100", params["H100.compute"], params["H100.memory"]),
            "A40": a40,
            "A6000": a40,
            "L40S": eff("L40S", params["A40.compute"], params["L40S.memory"]),
        }
    )
    stacks: dict[str, StackProfile] = dict(CALIBRATION.stacks)
    stacks["splitwise"] = replace(
        stacks["splitwise"],
        step_overhead_s=params["splitwise.step_overhead_s"],
        seq_overhead_s=params["splitwise.seq_overhead_s"],
        compute_scale=MappingProxyType({"H100": params["splitwise.H100.compute_scale"]}),
    )
    stacks["hexgen"] = replace(stacks["hexgen"], step_overhead_s=params["hexgen.step_overhead_s"])
    return Calibration(MappingProxyType(gpus), MappingProxyType(stacks))


def fit_efficiencies() -> FitResult:
    """Least squares over log(model / measured) of every anchor, parameters searched in log space.

    11 parameters for 37 anchors. Deterministic (fixed start, no randomness).
    """
    names = list(PARAMETERS)
    lower = np.log([PARAMETERS[n][1] for n in names])
    upper = np.log([PARAMETERS[n][2] for n in names])
    x0 = np.log([PARAMETERS[n][0] for n in names])
    points = anchors()
    measured = np.log([a.measured_ms for a in points])

    def residuals(x: np.ndarray) -> np.ndarray:
        cal = calibration_from(dict(zip(names, np.exp(x), strict=True)))
        return np.log([evaluate_ms(a, cal) for a in points]) - measured

    solution = least_squares(residuals, x0, bounds=(lower, upper), x_scale=1.0)
    params = dict(zip(names, (float(v) for v in np.exp(solution.x)), strict=True))
    cal = calibration_from(params)
    errors = [abs(c.error_pct) for c in anchor_checks(cal)]
    rms = float(math.sqrt(np.mean(solution.fun**2)))
    return FitResult(cal, params, max(errors), rms)


def format_table(rows: list[AnchorCheck]) -> str:
    lines = [f"{'source':10} {'anchor':52} {'measured':>10} {'model':>10} {'error':>7}"]
    for r in rows:
        lines.append(f"{r.source:10} {r.label:52} {r.measured_ms:10.3f} {r.model_ms:10.3f} {r.error_pct:+6.1f}%")
    return "\n".join(lines)


def _anchor_report() -> None:
    result = fit_efficiencies()
    for name, value in result.params.items():
        print(f"{name:32} {value:.4g}")
    print(f"max |error| {result.max_abs_error_pct:.1f}%  rms log error {result.rms_log_error:.4f}")
    print()
    print(format_table(anchor_checks(result.calibration)))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m slosched.perf.calibrate", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--measured", type=Path, nargs="+", default=None, help="measured step files (default: the bundled H100 ones)"
    )
    refit = parser.add_mutually_exclusive_group()
    refit.add_argument("--refit", action="store_true", help=f"refit {CURRENT_ENGINE_STACK} to the measured steps")
    refit.add_argument(
        "--refit-gpu",
        action="store_true",
        help="refit only the measured GPU's memory scale and attention units (a new GPU for the same engine)",
    )
    parser.add_argument("--no-anchors", action="store_true", help="skip the hardware.json anchor refit and table")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Anchor refit and table, then every measured step against vllm-v1; 1 if any step is out of the band."""
    args = _parser().parse_args(argv)
    if not args.no_anchors:
        _anchor_report()
        print()
    try:
        measured = args.measured
        steps = bundled_measured_steps() if measured is None else [step for p in measured for step in load_measured(p)]
    except (OSError, ValueError) as error:  # ConfigError is a ValueError; json errors too
        print(f"error: --measured: {error}", file=sys.stderr)
        return 2
    calibration = None
    if args.refit or args.refit_gpu:
        try:
            fit = fit_stack(steps) if args.refit else fit_gpu_scales(steps)
        except ValueError as error:  # steps of several GPUs
            print(f"error: --measured: {error}", file=sys.stderr)
            return 2
        calibration = with_stack(fit.stack)
        for name, value in fit.params.items():
            print(f"{CURRENT_ENGINE_STACK}.{name:24} {value:.4g}")
        print(f"rms log error {fit.rms_log_error:.4f} (against measured / {FLOOR_OVER_ENGINE})")
    rows = check_steps(steps, CURRENT_ENGINE_STACK, calibration)
    print(format_checks(rows))
    outside = [r for r in rows if not r.in_band]
    print(f"{len(rows) - len(outside)}/{len(rows)} measured steps within the band")
    if measured is None:
        title = "the steps each further GPU's two scales were fitted to (engine constants held)"
        outside += _files_report(title, "fitted GPU steps", gpu_fitted_measured_steps(), calibration)
        title = f"held out of the fit (the same check on other models and GPUs; {CURRENT_ENGINE_STACK} as above)"
        outside += _files_report(title, "held-out steps", heldout_measured_steps(), calibration)
        print("\n".join(fused_gap.report_lines()))  # informational: the band is held against the floor
    return 1 if outside else 0


def _files_report(
    title: str, what: str, files: Mapping[str, list[MeasuredStep]], calibration: Calibration | None
) -> list[StepCheck]:
    """Per file: steps in the band, ratio range per group, and every step outside it."""
    print(f"\n{title}")
    outside: list[StepCheck] = []
    total = 0
    for name, steps in files.items():
        rows = check_steps(steps, CURRENT_ENGINE_STACK, calibration)
        missed = [r for r in rows if not r.in_band]
        ranges = "  ".join(f"{g} {lo:.2f}-{hi:.2f}" for g, (lo, hi) in group_summary(rows).items())
        model = f"{steps[0].gpu} {steps[0].model}" if steps else "?"
        print(f"  {model:25} {len(rows) - len(missed):3}/{len(rows):<3} {ranges}  ({name})")
        for r in missed:
            print(f"    OUT {r.step.group} {r.step.label}: measured / {CURRENT_ENGINE_STACK} = {r.ratio:.3f}")
        outside += missed
        total += len(rows)
    print(f"{total - len(outside)}/{total} {what} within the band")
    return outside


if __name__ == "__main__":
    sys.exit(main())
