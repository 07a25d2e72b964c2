"""Where ``vllm-v1`` sits between the unfused floor and the fused forward (H100 and H200, each pair in one call)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from slosched.perf.fused_gap import fused_pairs, gaps, report_lines
from slosched.perf.stack_fit import BAND, check_steps

PAIRS = fused_pairs()


@pytest.mark.parametrize(("gpu", "model"), sorted(PAIRS))
def test_the_truth_lies_between_the_fused_forward_and_the_floor_at_every_step(gpu: str, model: str) -> None:
    floor, fused = PAIRS[gpu, model]
    assert len(floor) == len(fused) >= 40 and {s.gpu for s in floor + fused} == {gpu}
    for low, high in zip(check_steps(floor), check_steps(fused), strict=True):
        assert high.step.measured_s < low.step.measured_s  # fusion alone saves on every step
        assert BAND[0] <= low.ratio <= BAND[1]  # the floor: the band the truth is held to
        assert high.ratio < 1.0  # the fused forward's GPU time is below the truth's step time


@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_fusion_saves_more_on_the_small_model(gpu: str) -> None:
    """Elementwise traffic and launches weigh most in a small model: the floor is ~1.6x the fused forward on 1.5B,
    ~1.3x on 8B and (H200) ~1.2x on 32B, whose matrix products dominate."""
    median = {
        model: {g.group: g.floor_over_fused[1] for g in gaps(*pair)} for (on, model), pair in PAIRS.items() if on == gpu
    }
    sizes = [m for m in ("Qwen2.5-Coder-1.5B", "Llama-3-8B", "Qwen2.5-32B") if m in median]  # small to large
    for group in ("decode", "prefill", "mixed"):
        saved = [median[model][group] for model in sizes]
        assert saved == sorted(saved, reverse=True) and saved[-1] > 1.1, (group, saved)


def test_gaps_refuse_files_of_different_steps() -> None:
    floor, fused = PAIRS["H100", "Llama-3-8B"]
    with pytest.raises(ValueError, match="different steps"):
        gaps(floor, fused[1:])


def test_the_report_has_a_line_per_model_and_group() -> None:
    lines = report_lines()
    assert len(lines) == 1 + sum(len(gaps(*pair)) for pair in PAIRS.values())
    assert all("floor/fused" in line for line in lines[1:])


FUSED_MATCHES_EAGER = """
import torch
from slosched.perf import gpu_graph
from slosched.perf.gpu_profile import model_dims
dims = model_dims(True)
eager = gpu_graph.PlainModel(torch, dims, "cpu", torch.float32, 256)
fused = gpu_graph.PlainModel(torch, dims, "cpu", torch.float32, 256, fused=True)
ids = torch.arange(4)
for model in (eager, fused):
    torch.manual_seed(1)
    cache = model.kv_cache(4, 33, True)
    model.out = model.step(None, None, 0, ids, cache, 32)
assert torch.allclose(eager.out, fused.out, atol=1e-4), (eager.out - fused.out).abs().max()
print("ok")
"""


@pytest.mark.vllm
@pytest.mark.skipif(shutil.which("g++") is None, reason="torch.compile on CPU needs a C++ compiler")
def test_the_fused_forward_computes_what_the_plain_one_does(vllm_python: Path) -> None:
    """One decode step of the tiny model, eager and compiled (torch from the vLLM virtualenv, on CPU)."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "src")}
    done = subprocess.run([str(vllm_python), "-c", FUSED_MATCHES_EAGER], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
