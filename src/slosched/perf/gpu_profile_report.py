"""Torch-free half of the GPU profile (``slosched.perf.gpu_profile``): grids, the decode memory budget,
measured points, the fit to slosched's measured step model, and the Markdown report.

A point is one step shape: ``prefill`` = one sequence of ``tokens`` prompt tokens (no prior context);
``decode`` = ``batch`` sequences with ``tokens`` cached tokens each, one new token each. In slosched's step
vocabulary (``perf.base``) these are ``(N, 0, 0, 0)`` and ``(0, 0, B, B * C)``. Invariant: a point has
timed runs xor a ``skipped`` reason.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from slosched.core.errors import ConfigError
from slosched.core.views import StepObservation
from slosched.perf.calibrate import anchors, evaluate_ms
from slosched.perf.hardware import canonical_gpu
from slosched.perf.profile_fit import PARAMS, MeasuredProfile, fit_profile
from slosched.perf.roofline import ACTIVATION_RESERVE_BYTES_PER_GPU, RooflineModel

FORMAT = "slosched-gpu-profile"
FORMAT_VERSION = 1
KINDS = ("prefill", "decode", "mixed")
ROOFLINE_STACKS = ("splitwise", "vidur", "vllm-v1")
_GIB = float(1 << 30)


@dataclass(slots=True, frozen=True)
class Grid:
    """What to measure: prefill lengths, decode batches x contexts, and runs per point."""

    prefill_tokens: tuple[int, ...]
    decode_batches: tuple[int, ...]
    decode_contexts: tuple[int, ...]
    warmup: int
    repeats: int

    @property
    def max_positions(self) -> int:
        """Longest sequence any point builds (a prefill, or a decode context plus its new token)."""
        return max(max(self.prefill_tokens), max(self.decode_contexts) + 1)


def grid_for(tiny: bool, quick: bool) -> Grid:
    """The sweep: the full Llama-3-8B grid, a quick subset, or small CPU-sized grids for ``tiny``."""
    if tiny:
        # Batches far apart so that decode cost visibly grows with the batch even on a busy CPU.
        return Grid((32, 128, 512), (1, 8, 64), (128, 512), 1 if quick else 2, 3 if quick else 5)
    if quick:
        return Grid((128, 1024, 4096), (1, 32, 128), (512, 2048), 1, 3)
    return Grid((128, 512, 1024, 2048, 4096, 8192), (1, 8, 32, 64, 128, 256), (512, 2048), 2, 7)


def decode_memory_bytes(batch: int, context: int, kv_bytes_per_token: int, layers: int) -> int:
    """Bytes a decode point needs beyond the weights: the static cache of ``context + 1`` slots per sequence
    plus one layer's random K/V used to fill it (filled layer by layer)."""
    cache = batch * (context + 1) * kv_bytes_per_token
    return cache + batch * context * kv_bytes_per_token // max(1, layers)


def plan_decode(
    grid: Grid, kv_bytes_per_token: int, layers: int, budget_bytes: int
) -> list[tuple[int, int, str | None]]:
    """``(batch, context, skip_reason)`` for every decode point, batches outer; a point whose memory exceeds
    ``budget_bytes`` gets a reason (naming both sizes) instead of being measured."""
    if budget_bytes <= 0:
        raise ConfigError("memory_budget_bytes", f"must be > 0, got {budget_bytes}")
    plan: list[tuple[int, int, str | None]] = []
    for batch in grid.decode_batches:
        for context in grid.decode_contexts:
            need = decode_memory_bytes(batch, context, kv_bytes_per_token, layers)
            reason = None
            if need > budget_bytes:
                reason = f"needs {need / _GIB:.1f} GiB of KV cache > budget {budget_bytes / _GIB:.1f} GiB"
            plan.append((batch, context, reason))
    return plan


def kv_blocks_estimate(
    total_memory_bytes: int, weight_bytes: int, kv_bytes_per_token: int, block_size: int = 16, utilization: float = 0.9
) -> int:
    """KV blocks a vLLM-like engine would get on this device, as ``RooflineModel.num_kv_blocks`` reckons it
    (``utilization`` of the memory, less the weights and the activation reserve); 0 when nothing fits."""
    free = total_memory_bytes * utilization - ACTIVATION_RESERVE_BYTES_PER_GPU - weight_bytes
    return max(0, int(free // (kv_bytes_per_token * block_size)))


@dataclass(slots=True, frozen=True)
class ProfilePoint:
    """One measured (or skipped) step shape; ``tokens`` is the prompt (prefill, mixed) or per-sequence context
    (decode). A mixed step is a ``tokens``-token chunk at ``prefill_context`` cached tokens beside ``batch``
    decodes at ``decode_context`` cached tokens each."""

    kind: str
    batch: int
    tokens: int
    times_s: tuple[float, ...] = ()
    skipped: str | None = None
    prefill_context: int = 0
    decode_context: int = 0

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError("kind", f"must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if bool(self.times_s) == (self.skipped is not None):
            raise ConfigError("times_s", "a point has timed runs or a skip reason, exactly one of them")

    @property
    def median_s(self) -> float | None:
        return statistics.median(self.times_s) if self.times_s else None

    @property
    def min_s(self) -> float | None:
        return min(self.times_s) if self.times_s else None

    def step_args(self) -> tuple[int, int, int, int]:
        """The step in slosched's vocabulary ``(prefill, prefill_ctx, decode_seqs, decode_ctx)``."""
        if self.kind == "prefill":
            return (self.tokens, 0, 0, 0)
        if self.kind == "mixed":
            return (self.tokens, self.prefill_context, self.batch, self.batch * self.decode_context)
        return (0, 0, self.batch, self.batch * self.tokens)

    def to_json_dict(self) -> dict[str, Any]:
        mixed = {"prefill_context": self.prefill_context, "decode_context": self.decode_context}
        return {
            **(mixed if self.kind == "mixed" else {}),
            "kind": self.kind,
            "batch": self.batch,
            "tokens": self.tokens,
            "median_s": self.median_s,
            "min_s": self.min_s,
            "repeats": len(self.times_s),
            "times_s": list(self.times_s),
            "skipped": self.skipped,
        }

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> ProfilePoint:
        skipped = data.get("skipped")
        return cls(
            str(data["kind"]),
            int(data["batch"]),
            int(data["tokens"]),
            tuple(float(t) for t in data.get("times_s", ())),
            None if skipped is None else str(skipped),
            int(data.get("prefill_context", 0)),
            int(data.get("decode_context", 0)),
        )


@dataclass(slots=True)
class ProfileResult:
    """A whole run: environment, sweep settings and points (``roofline_gpu``/``roofline_model`` name the
    roofline to compare with; ``None`` for a model with no roofline, such as the tiny test model)."""

    device: str
    torch_version: str
    transformers_version: str
    dtype: str
    model: dict[str, Any]
    warmup: int
    repeats: int
    memory_budget_bytes: int
    points: list[ProfilePoint] = field(default_factory=list)
    roofline_gpu: str | None = None
    roofline_model: str | None = None
    kv_blocks_estimate: int | None = None  # vLLM-like KV capacity in 16-token blocks (CUDA runs only)
    timing: str = "synchronize + perf_counter around one forward"

    def measured(self, kind: str) -> list[ProfilePoint]:
        return [p for p in self.points if p.kind == kind and p.skipped is None]

    def to_json_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "points"}
        return {"format": FORMAT, "version": FORMAT_VERSION, **data, "points": [p.to_json_dict() for p in self.points]}

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> ProfileResult:
        if data.get("format") != FORMAT or data.get("version") != FORMAT_VERSION:
            raise ConfigError("gpu_profile", f"not a {FORMAT} file of version {FORMAT_VERSION}")
        settings = {k: v for k, v in data.items() if k not in ("format", "version", "points")}
        return cls(**settings, points=[ProfilePoint.from_json_dict(p) for p in data["points"]])


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
            f"{len(skipped)} point(s) skipped for memory (budget {result.memory_budget_bytes / _GIB:.1f} GiB).",
        ]
    return "\n".join(lines) + "\n"
