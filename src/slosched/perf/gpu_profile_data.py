"""The GPU profile's file format (``slosched-gpu-profile``): grids, the decode memory budget and measured points.

A point is one step shape: ``prefill`` = one sequence of ``tokens`` prompt tokens (no prior context);
``decode`` = ``batch`` sequences with ``tokens`` cached tokens each, one new token each; ``mixed`` = a prompt
chunk beside decodes. In slosched's step vocabulary (``perf.base``) the first two are ``(N, 0, 0, 0)`` and
``(0, 0, B, B * C)``. Invariant: a point has timed runs xor a ``skipped`` reason. Torch-free and free of the
calibration, so that the profiler, the report and the measured-step loader all read one format.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field, fields
from typing import Any

from slosched.core.errors import ConfigError
from slosched.perf.roofline import ACTIVATION_RESERVE_BYTES_PER_GPU

FORMAT = "slosched-gpu-profile"
FORMAT_VERSION = 1
KINDS = ("prefill", "decode", "mixed")
ROOFLINE_STACKS = ("splitwise", "vidur", "vllm-v1")
GIB = float(1 << 30)


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
                reason = f"needs {need / GIB:.1f} GiB of KV cache > budget {budget_bytes / GIB:.1f} GiB"
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
