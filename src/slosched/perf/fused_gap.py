"""Where ``vllm-v1`` sits between the unfused floor and a fused forward, measured.

The measured steps the stack is checked against are an unfused floor: a plain PyTorch forward in one CUDA graph
per shape, elementwise ops unfused. ``gpu_profile --engine graph --fused`` measures the same forward with each
layer compiled by torch.compile (inductor fuses the norms, rotary, SiLU-mul and residual adds; attention stays
SDPA), on the same GPU in the same call. Its GPU time is a lower bound neither: vLLM fuses further (paged
FlashAttention/FlashInfer, fused QKV-RoPE) but adds its scheduler's CPU time per step. The two files of a
GPU and model (``perf/data/fused-<gpu>-<model>-floor.json``, ``...-fused.json``: H100 on 2026-11-27, H200 on
2026-12-04, where Qwen2.5-32B was held out of every fit) say how far fusion alone takes each step, and where the
truth lies between them (``python -m slosched.perf.calibrate`` prints it).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

from slosched.perf.measured_steps import GROUPS, MeasuredStep, bundled_file_steps
from slosched.perf.stack_fit import check_steps
from slosched.perf.stacks import CURRENT_ENGINE_STACK

# (GPU, model) -> the stem of its two files; each pair was measured in one call on one machine.
FUSED_FILES = {
    ("H100", "Llama-3-8B"): "fused-h100-llama-3-8b",
    ("H100", "Qwen2.5-Coder-1.5B"): "fused-h100-qwen2.5-coder-1.5b",
    ("H200", "Llama-3-8B"): "fused-h200-llama-3-8b",
    ("H200", "Qwen2.5-Coder-1.5B"): "fused-h200-qwen2.5-coder-1.5b",
    ("H200", "Qwen2.5-32B"): "fused-h200-qwen2.5-32b",
}


@dataclass(slots=True, frozen=True)
class GroupGap:
    """One step group of one model: floor / fused (how much fusion alone saves) and each over the truth."""

    group: str
    floor_over_fused: tuple[float, float, float]  # min, median, max over the group's steps
    floor_over_truth: tuple[float, float]  # min, max
    fused_over_truth: tuple[float, float]


def fused_pairs() -> dict[tuple[str, str], tuple[list[MeasuredStep], list[MeasuredStep]]]:
    """(floor steps, fused steps) per (GPU, model), step for step the same shapes."""
    return {
        key: (bundled_file_steps(f"{stem}-floor.json"), bundled_file_steps(f"{stem}-fused.json"))
        for key, stem in FUSED_FILES.items()
    }


def gaps(floor: list[MeasuredStep], fused: list[MeasuredStep]) -> list[GroupGap]:
    """Per group: floor / fused and both over ``vllm-v1``; the steps must be the same shapes in the same order."""
    if [s.step_args() for s in floor] != [s.step_args() for s in fused]:
        raise ValueError("the floor and fused files measured different steps")
    floor_rows, fused_rows = check_steps(floor), check_steps(fused)
    found = []
    for group in GROUPS:
        index = [i for i, step in enumerate(floor) if step.group == group]
        if not index:
            continue
        saved = [floor[i].measured_s / fused[i].measured_s for i in index]
        over_floor = [floor_rows[i].ratio for i in index]
        over_fused = [fused_rows[i].ratio for i in index]
        found.append(
            GroupGap(
                group,
                (min(saved), statistics.median(saved), max(saved)),
                (min(over_floor), max(over_floor)),
                (min(over_fused), max(over_fused)),
            )
        )
    return found


def report_lines() -> list[str]:
    """The table ``calibrate`` prints: per model and group, floor / fused and each over the truth."""
    lines = [f"\nwhere {CURRENT_ENGINE_STACK} sits (floor = the unfused forward, fused = torch.compile'd layers)"]
    for (gpu, model), (floor, fused) in fused_pairs().items():
        for gap in gaps(floor, fused):
            low, mid, high = gap.floor_over_fused
            lines.append(
                f"  {gpu:5} {model:20} {gap.group:8} floor/fused {low:.2f}-{high:.2f} (median {mid:.2f})  "
                f"floor/{CURRENT_ENGINE_STACK} {gap.floor_over_truth[0]:.2f}-{gap.floor_over_truth[1]:.2f}  "
                f"fused/{CURRENT_ENGINE_STACK} {gap.fused_over_truth[0]:.2f}-{gap.fused_over_truth[1]:.2f}"
            )
    return lines
