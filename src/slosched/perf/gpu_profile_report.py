"""Torch-free half of the GPU profile (``slosched.perf.gpu_profile``): the fit of measured points to
slosched's measured step model, and the Markdown report beside the roofline stacks and the anchors. The file
format itself is ``gpu_profile_data``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from slosched.core.views import StepObservation
from slosched.perf.calibrate import anchors, evaluate_ms
from slosched.perf.gpu_profile_data import GIB, ROOFLINE_STACKS, ProfilePoint, ProfileResult
from slosched.perf.hardware import canonical_gpu
from slosched.perf.profile_fit import PARAMS, MeasuredProfile, fit_profile
from slosched.perf.roofline import RooflineModel


def observations(points: Sequence[ProfilePoint]) -> list[StepObservation]:
    """One ``StepObservation`` per measured point, at its median time (a single step each: the static cache
    is reset between runs, so the context does not grow across them as ``StepObservation`` runs assume)."""
    rows = []
    for point in points:
        median = point.median_s
        if median is not None:
            rows.append(StepObservation(*point.step_args(), (median,)))
    return rows


def fit_points(
    points: Sequence[ProfilePoint],
    source: dict[str, Any],
    num_gpu_blocks: int | None = None,
    block_size: int | None = None,
) -> MeasuredProfile:
    """slosched's measured step model fitted to the points (raises ``ConfigError`` if they cannot identify it)."""
    return fit_profile(observations(points), num_gpu_blocks=num_gpu_blocks, block_size=block_size, source=source)


def _ms(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    ms = seconds * 1000.0
    return f"{ms:.2f}" if ms < 100 else f"{ms:.1f}"


def _ratio(measured: float | None, model_s: float | None) -> str:
    return "-" if measured is None or not model_s else f"{measured / model_s:.2f}"


def _point_cells(point: ProfilePoint, rooflines: dict[str, RooflineModel], fit: MeasuredProfile | None) -> list[str]:
    """Measured median/min, then per roofline stack its ms and measured/roofline, then the fit's ms."""
    median = point.median_s
    cells = [_ms(median) if point.skipped is None else f"skipped: {point.skipped}", _ms(point.min_s)]
    for model in rooflines.values():
        predicted = model.step_time_s(*point.step_args())
        cells += [_ms(predicted), _ratio(median, predicted)]
    if fit is not None:
        cells.append(_ms(fit.step_model().step_time_s(*point.step_args())))
    return cells


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return lines + ["| " + " | ".join(row) + " |" for row in rows]


def _kind_tables(result: ProfileResult, fit: MeasuredProfile | None) -> list[str]:
    rooflines: dict[str, RooflineModel] = {}
    if result.roofline_gpu is not None and result.roofline_model is not None:
        rooflines = {s: RooflineModel.build(result.roofline_gpu, result.roofline_model, 1, s) for s in ROOFLINE_STACKS}
    tail = [h for s in rooflines for h in (f"roofline {s} ms", f"measured/{s}")] + (["fit ms"] if fit else [])
    prefill = [p for p in result.points if p.kind == "prefill"]
    decode = [p for p in result.points if p.kind == "decode"]
    lines = [
        "## Prefill",
        "",
        "One sequence of N prompt tokens, no prior context; logits of the last position only.",
        "",
    ]
    rows = []
    for p in prefill:
        per_token = "-" if p.median_s is None else f"{p.median_s * 1e6 / p.tokens:.1f}"
        cells = _point_cells(p, rooflines, fit)
        rows.append([str(p.tokens), *cells[:2], per_token, *cells[2:]])
    lines += _table(["N", "median ms", "min ms", "us/token", *tail], rows)
    lines += ["", "## Decode", "", "B sequences with C cached tokens each (static KV cache), one new token each.", ""]
    rows = [[str(p.batch), str(p.tokens), *_point_cells(p, rooflines, fit)] for p in decode]
    lines += _table(["B", "C", "median ms", "min ms", *tail], rows)
    mixed = [p for p in result.points if p.kind == "mixed"]
    if mixed:
        lines += ["", "## Mixed", "", "A P-token chunk at Cp cached tokens beside B decodes at C cached tokens.", ""]
        rows = [
            [
                str(p.tokens),
                str(p.prefill_context),
                str(p.batch),
                str(p.decode_context),
                *_point_cells(p, rooflines, fit),
            ]
            for p in mixed
        ]
        lines += _table(["P", "Cp", "B", "C", "median ms", "min ms", *tail], rows)
    return lines


def _fit_section(fit: MeasuredProfile | None, fit_error: str | None) -> list[str]:
    lines = ["", "## Fitted step model (`gpu_profile_fit.json`)", ""]
    if fit is None:
        return [*lines, f"No fit: {fit_error or 'not run'}."]
    rows = []
    for name in PARAMS:
        estimate, low, high = fit.param(name)
        rows.append([name, f"{estimate:.4g}", f"[{low:.3g}, {high:.3g}]"])
    lines += _table(["parameter", "estimate", f"{fit.confidence:.0%} interval"], rows)
    clamped = ", ".join(fit.clamped) or "none"
    lines += ["", f"{fit.num_steps} points, residual relative std {fit.residual_rel_std:.3f}; clamped at 0: {clamped}."]
    if fit.num_gpu_blocks is None:
        lines.append("The profile has no KV capacity: set `num_kv_blocks` on the scenario's instance group.")
    else:
        lines.append(
            f"KV capacity {fit.num_gpu_blocks} blocks of {fit.block_size} tokens: an estimate (0.9 of device memory "
            "less the weights and a 2 GB reserve, as the roofline reckons it), not measured."
        )
    return lines


def _anchor_section(gpu: str, model: str) -> list[str]:
    canonical = canonical_gpu(gpu)
    chosen = [a for a in anchors() if canonical_gpu(a.gpu) == canonical]
    same_model = sum(a.model == model for a in chosen)
    lines = [f"## Anchor points in hardware.json for {canonical}", ""]
    lines.append(
        f"{len(chosen)} anchor(s) for {canonical}, {same_model} of them for {model}. Each is shown with the "
        "roofline's value under its own source's "
        "stack, as `python -m slosched.perf.calibrate` checks it; Vidur rows cover only the dense and elementwise "
        "operators (no attention, LM head or engine), so they bound a whole measured step from below."
    )
    rows = []
    for anchor in chosen:
        model_ms = evaluate_ms(anchor)
        error = 100.0 * (model_ms / anchor.measured_ms - 1.0)
        if anchor.per_token:  # per-token anchors read better in microseconds
            measured, modelled = f"{anchor.measured_ms * 1e3:.4g} us/token", f"{model_ms * 1e3:.4g} us/token"
        else:
            measured, modelled = f"{anchor.measured_ms:.4g}", f"{model_ms:.4g}"
        rows.append([anchor.source, anchor.label, measured, modelled, f"{error:+.1f}%"])
    return ["", *lines, "", *_table(["source", "anchor", "measured ms", "roofline ms", "error"], rows)]


def render_markdown(result: ProfileResult, fit: MeasuredProfile | None, fit_error: str | None = None) -> str:
    """The committed report: settings, what the numbers mean, one table per kind, the fit and the anchors."""
    model = result.model
    lines = [
        f"# GPU profile: {model.get('name', 'model')} on {result.device}",
        "",
        f"torch {result.torch_version}, transformers {result.transformers_version}, {result.dtype}, random weights; "
        f"{result.warmup} warm-up and {result.repeats} timed runs per point ({result.timing}); ratios are "
        f"measured median / roofline. Model: {', '.join(f'{k}={v}' for k, v in model.items() if k != 'name')}.",
        "",
        "This is Hugging Face transformers' eager implementation (SDPA attention, a static KV cache, no paged "
        "attention, no CUDA graphs, no fused kernels): the hardware + PyTorch floor of a step, not vLLM. vLLM is "
        "faster, above all for small decode batches, where launching hundreds of small kernels per step dominates.",
        "",
    ]
    if result.roofline_gpu is not None and result.roofline_model is not None:
        lines.append(
            f"Roofline: `RooflineModel.build({result.roofline_gpu!r}, {result.roofline_model!r}, 1, stack)` for the "
            f"stacks {', '.join(ROOFLINE_STACKS)} (splitwise: a 2023 vLLM engine's overheads; vidur: kernels only; "
            "vllm-v1: a current engine, whose band for measured/vllm-v1 is [0.90, 1.35])."
        )
        if canonical_gpu(result.roofline_gpu).split("-")[0].lower() not in result.device.lower():
            lines.append(f"Warning: the device ({result.device}) is not the roofline's GPU ({result.roofline_gpu}).")
    else:
        lines.append("No roofline comparison: hardware.json has no roofline for this model.")
    lines += ["", *_kind_tables(result, fit), *_fit_section(fit, fit_error)]
    if result.roofline_gpu is not None and result.roofline_model is not None:
        lines += _anchor_section(result.roofline_gpu, result.roofline_model)
    skipped = [p for p in result.points if p.skipped is not None]
    if skipped:
        lines += [
            "",
            f"{len(skipped)} point(s) skipped for memory (budget {result.memory_budget_bytes / GIB:.1f} GiB).",
        ]
    return "\n".join(lines) + "\n"
