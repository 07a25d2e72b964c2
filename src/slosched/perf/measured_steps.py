"""Measured engine steps in slosched's step vocabulary: the project's H100 files and ``gpu_profile`` output.

Three file shapes are read (all written by the project's own scripts):

* the gpu-profile format (``slosched-gpu-profile``, ``python -m slosched.perf.gpu_profile`` and
  ``shared/tools/gpu_floor.py``): prefill, decode and mixed points, GPU and model named by
  ``roofline_gpu``/``roofline_model``;
* ``gpu_mixed_floor.py``'s ``llama3_8b_mixed`` rows (``graph_median_s``: the CUDA-graph replay);
* ``gpu_long_floor.py``'s ``rows`` (long-context prompt chunks and decode batches).

A step is ``(prefill tokens, prefill context, decode sequences, decode context summed over sequences)``,
as ``StepTimeModel.step_time_s`` takes it. The bundled files (``perf/data/measured-*.json``) are the 52
H100 points measured for the project on 2026-11-26 (see ``docs/hardware.md``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from slosched.core.errors import ConfigError
from slosched.perf.gpu_profile_data import ProfileResult

BUNDLED = (
    "measured-h100-llama3-8b-cudagraph.json",
    "measured-h100-llama3-8b-mixed-steps.json",
    "measured-h100-llama3-8b-long-context.json",
)
# Per-GPU fit sources: steps of another GPU, to which only that GPU's scales are fitted (stack_fit.fit_gpu_scales).
GPU_FITTED = ("measured-h200-llama-3-8b-graph.json",)
HELDOUT_PREFIXES = ("heldout-", "reproduce-")
GROUPS = ("decode", "prefill", "mixed", "long")
LONG_CONTEXT = 4096  # a step whose prompt chunk or decode sequences see at least this many tokens is "long"
_H100_LLAMA3 = ("H100", "Llama-3-8B")  # what the bundled mixed/long files (which name no roofline) measured


@dataclass(slots=True, frozen=True)
class MeasuredStep:
    """One measured step: ``group`` is decode, prefill, mixed or long; ``measured_s`` its median time."""

    group: str
    label: str
    gpu: str
    model: str
    num_prefill_tokens: int
    prefill_context_tokens: int
    num_decode_seqs: int
    decode_context_tokens: int
    measured_s: float

    def step_args(self) -> tuple[int, int, int, int]:
        return (self.num_prefill_tokens, self.prefill_context_tokens, self.num_decode_seqs, self.decode_context_tokens)


def _step(
    gpu_model: tuple[str, str], prefill: int, prefill_ctx: int, seqs: int, ctx: int, seconds: float
) -> MeasuredStep:
    """A step of ``seqs`` decodes at ``ctx`` cached tokens each beside a ``prefill``-token chunk at ``prefill_ctx``."""
    if prefill and seqs:
        group, label = "mixed", f"P={prefill} Cp={prefill_ctx} + B={seqs} C={ctx}"
    elif prefill:
        group, label = "prefill", f"P={prefill}" + (f" Cp={prefill_ctx}" if prefill_ctx else "")
    else:
        group, label = "decode", f"B={seqs} C={ctx}"
    if max(prefill_ctx, ctx) >= LONG_CONTEXT:
        group = "long"
    return MeasuredStep(group, label, *gpu_model, prefill, prefill_ctx, seqs, seqs * ctx, float(seconds))


def _profile_steps(data: Mapping[str, Any], gpu_model: tuple[str, str]) -> list[MeasuredStep]:

    result = ProfileResult.from_json_dict(dict(data))
    if result.roofline_gpu and result.roofline_model:
        gpu_model = (result.roofline_gpu, result.roofline_model)
    steps = []
    for point in result.points:
        median = point.median_s
        if median is not None:
            prefill, prefill_ctx, seqs, total_ctx = point.step_args()
            steps.append(_step(gpu_model, prefill, prefill_ctx, seqs, total_ctx // max(1, seqs), median))
    return steps


def _row_steps(rows: list[Mapping[str, Any]], key: str, gpu_model: tuple[str, str]) -> list[MeasuredStep]:
    steps = []
    for row in rows:
        if key not in row:
            continue  # a failed measurement (its ``error`` says why)
        if row.get("kind") == "decode":
            args = (0, 0, int(row["batch"]), int(row["context"]))
        else:
            args = (int(row["prefill_tokens"]), int(row["prefill_context"]), int(row["decode_seqs"]), 0)
            args = (*args[:3], int(row["decode_context"]))
        steps.append(_step(gpu_model, *args, float(row[key])))
    return steps


def parse_measured(data: Mapping[str, Any], gpu_model: tuple[str, str] = _H100_LLAMA3) -> list[MeasuredStep]:
    """The steps of one file's JSON (any of the three shapes); ``gpu_model`` for files that name none."""
    if data.get("format") == "slosched-gpu-profile":
        return _profile_steps(data, gpu_model)
    if "llama3_8b_mixed" in data:
        return _row_steps(data["llama3_8b_mixed"], "graph_median_s", gpu_model)
    if "rows" in data:
        return _row_steps(data["rows"], "median_s", gpu_model)
    raise ConfigError("measured", "not a gpu-profile, mixed-steps or long-context file")


def load_measured(path: str | Path) -> list[MeasuredStep]:
    """The measured steps of the file at ``path``."""
    return parse_measured(json.loads(Path(path).read_text()))


def heldout_measured_steps() -> dict[str, list[MeasuredStep]]:
    """Steps kept out of every fit, by file: six more models measured on the same H100 and on an H200 by
    ``python -m slosched.perf.gpu_profile --engine graph --model NAME [--gpu H200]`` (2026-11-26), and the
    project's own profiler re-measuring Llama-3-8B (``reproduce-*``). They check that the calibration
    generalises across model sizes (and, on H200, that its two fitted scales do)."""
    folder = resources.files("slosched.perf").joinpath("data")
    names = sorted(e.name for e in folder.iterdir() if e.name.startswith(HELDOUT_PREFIXES) and e.name.endswith(".json"))
    return {name: bundled_file_steps(name) for name in names}


def gpu_fitted_measured_steps() -> dict[str, list[MeasuredStep]]:
    """The steps each further GPU's scales were fitted to, by file: Llama-3-8B on an H200 (2026-11-26,
    ``gpu_profile --engine graph --gpu H200``)."""
    return {name: bundled_file_steps(name) for name in GPU_FITTED}


def bundled_file_steps(name: str) -> list[MeasuredStep]:
    """The steps of one file shipped in ``slosched/perf/data``."""
    return parse_measured(json.loads(resources.files("slosched.perf").joinpath("data", name).read_text()))


def bundled_measured_steps() -> list[MeasuredStep]:
    """The project's H100 Llama-3-8B steps (CUDA graph per shape): 24 prefill/decode, 18 mixed, 10 long."""
    return [step for name in BUNDLED for step in bundled_file_steps(name)]
