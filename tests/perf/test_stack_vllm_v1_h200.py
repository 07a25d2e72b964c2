"""``vllm-v1`` on H200: two scales fitted to 46 H200 steps of Llama-3-8B (the engine's constants held), checked
on six more models measured on the same H200; and nothing else moves for the GPUs that did not change."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import MappingProxyType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.perf import calibrate
from slosched.perf.hardware import gpu_facts
from slosched.perf.measured_steps import gpu_fitted_measured_steps, heldout_measured_steps, parse_measured
from slosched.perf.roofline import CALIBRATION, RooflineModel, gpu_efficiency
from slosched.perf.stack_fit import check_steps, fit_gpu_scales, fit_stack, with_stack, write_stack_fit
from slosched.perf.stacks import CURRENT_ENGINE_STACK

FITTED = gpu_fitted_measured_steps()
H200_STEPS = FITTED["measured-h200-llama-3-8b-graph.json"]
H200_HELD_OUT = {name: steps for name, steps in heldout_measured_steps().items() if steps[0].gpu == "H200"}
SHIPPED = CALIBRATION.stacks[CURRENT_ENGINE_STACK]


def test_the_h200_files_are_what_they_say() -> None:
    assert {s.gpu for s in H200_STEPS} == {"H200"} and {s.model for s in H200_STEPS} == {"Llama-3-8B"}
    assert len(H200_STEPS) == 46
    models = {steps[0].model for steps in H200_HELD_OUT.values()}
    assert len(models) == 6 and "Llama-3-8B" not in models
    assert sum(len(steps) for steps in H200_HELD_OUT.values()) == 265


def test_shipped_h200_scales_are_the_fitted_ones() -> None:
    fit = fit_gpu_scales(H200_STEPS)
    assert fit.params["memory_scale"] == pytest.approx(SHIPPED.memory_scale["H200"], rel=0.01)
    assert fit.params["attention_units"] == pytest.approx(SHIPPED.attention_units_by_gpu["H200"], rel=0.01)
    # the engine's constants are held, compute is the die's (H100's)
    assert fit.stack.layer_overhead_s == SHIPPED.layer_overhead_s
    assert fit.stack.compute_scale["H200"] == SHIPPED.compute_scale["H100"]


def test_the_fitted_scales_agree_with_what_the_hardware_says() -> None:
    """Streamed bandwidth near a device-to-device copy's 4.28 TB/s on that H200; attention units in
    proportion to the bandwidth a unit's fixed (SM-bound) rate must fill, from H100's fitted 70.3."""
    h200, h100 = gpu_facts("H200"), gpu_facts("H100")

    def streamed(gpu: str) -> float:
        facts = gpu_facts(gpu)
        return facts.bandwidth_Bps * gpu_efficiency(facts).memory * SHIPPED.memory_scale[gpu]

    assert streamed("H200") / 1e12 == pytest.approx(4.28, rel=0.03)
    assert streamed("H100") == pytest.approx(h100.bandwidth_Bps)  # H100's streams at its datasheet figure
    predicted_units = SHIPPED.attention_units * streamed("H200") / streamed("H100")
    assert SHIPPED.attention_units_by_gpu["H200"] == pytest.approx(predicted_units, rel=0.02)
    assert h200.fp16_flops == pytest.approx(h100.fp16_flops, rel=0.01)  # the same die's compute


@pytest.mark.parametrize("name", ["measured-h200-llama-3-8b-graph.json", *sorted(H200_HELD_OUT)])
def test_every_h200_step_within_the_band(name: str) -> None:
    steps = H200_STEPS if name.startswith("measured-") else H200_HELD_OUT[name]
    assert [r.step.label for r in check_steps(steps) if not r.in_band] == []


def test_borrowing_h100s_scales_leaves_long_context_h200_steps_outside_the_band() -> None:
    """Why H200 needed its own fit: with H100's scales its long-context attention comes out too fast."""
    borrowed = replace(
        SHIPPED,
        compute_scale=MappingProxyType({"H100": SHIPPED.compute_scale["H100"]}),
        memory_scale=MappingProxyType({"H100": SHIPPED.memory_scale["H100"]}),
        attention_units_by_gpu=MappingProxyType({}),
    )
    steps = [step for steps in (H200_STEPS, *H200_HELD_OUT.values()) for step in steps]
    outside = [r for r in check_steps(steps, CURRENT_ENGINE_STACK, with_stack(borrowed)) if not r.in_band]
    assert len(outside) >= 5 and all(r.ratio > 1.35 for r in outside)
    assert {r.step.group for r in outside} <= {"long", "decode", "mixed"}


counts = st.integers(min_value=0, max_value=4096)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["A100-80G", "H100", "L40S", "B200"]), counts, counts, st.integers(0, 256), counts)
def test_other_gpus_step_times_are_untouched_bit_for_bit(
    gpu: str, prefill: int, prefill_ctx: int, seqs: int, ctx: int
) -> None:
    without = replace(SHIPPED, attention_units_by_gpu=MappingProxyType({}))
    old = RooflineModel.build(gpu, "Llama-3-8B", 1, CURRENT_ENGINE_STACK, with_stack(without))
    new = RooflineModel.build(gpu, "Llama-3-8B", 1, CURRENT_ENGINE_STACK)
    args = (prefill, prefill_ctx, seqs, seqs * ctx)
    assert new.step_time_s(*args) == old.step_time_s(*args)


def test_a_whole_refit_on_h200_steps_applies_its_units_there() -> None:
    """``fit_stack`` fits the stack's own attention units: a GPU-specific override must not hide them."""
    fit = fit_stack(H200_STEPS)
    assert "H200" not in fit.stack.attention_units_by_gpu
    model = RooflineModel.build("H200", "Llama-3-8B", 1, CURRENT_ENGINE_STACK, with_stack(fit.stack))
    assert model._attention_units == fit.params["attention_units"]


def test_the_profiles_stack_fit_carries_the_gpu_only_fit(tmp_path: Path) -> None:
    data = json.loads(Path(calibrate.__file__).with_name("data").joinpath(next(iter(FITTED))).read_text())
    payload = json.loads(write_stack_fit(tmp_path / "stack_fit.json", parse_measured(data)).read_text())
    assert payload["gpu_fitted"]["gpu"] == "H200"
    assert payload["gpu_fitted"]["memory_scale"] == pytest.approx(SHIPPED.memory_scale["H200"], rel=0.01)
    assert payload["shipped_in_band"] == payload["points"] == 46


def test_calibrate_refit_gpu_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = Path(calibrate.__file__).with_name("data")
    h200 = folder / "measured-h200-llama-3-8b-graph.json"
    assert calibrate.main(["--no-anchors", "--refit-gpu", "--measured", str(h200)]) == 0
    out = capsys.readouterr().out
    assert "vllm-v1.memory_scale" in out and "46/46 measured steps within the band" in out
    two_gpus = [str(h200), str(folder / "heldout-h100-llama-2-7b-graph.json")]
    assert calibrate.main(["--no-anchors", "--refit-gpu", "--measured", *two_gpus]) == 2
    assert capsys.readouterr().err.startswith("error: --measured: fit one GPU at a time")
    assert calibrate.main(["--no-anchors"]) == 0
    assert "46/46 fitted GPU steps within the band" in capsys.readouterr().out
