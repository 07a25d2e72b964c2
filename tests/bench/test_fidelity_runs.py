"""``bench fidelity``'s serving figures: a recorded case (real vLLM records with streamed first tokens, and
their simulation) in vLLM's terms, both through the function ``compare`` uses."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from slosched.bench.fidelity.runs import serving_pair, serving_text
from slosched.fidelity.records_io import load_run
from slosched.metrics.summary import summarize
from tests.fidelity.test_recorded import CASE


def test_a_case_carries_the_real_and_the_simulated_run_in_vllm_terms() -> None:
    _, real, sim = load_run(CASE)
    pair = serving_pair("workflow", "light", [real], [sim])
    assert pair["real"] == summarize(real).serving.to_json_dict()
    assert pair["sim"] == summarize(sim).serving.to_json_dict()
    for side in ("real", "sim"):
        figures = pair[side]
        assert figures["completed"] == len(real.requests)
        assert all(math.isfinite(figures[key]) and figures[key] > 0 for key in ("p99_ttft_ms", "p99_tpot_ms"))
    # The same work: the token counts agree; the timings are what the fidelity bench compares.
    assert pair["real"]["total_output_tokens"] == pair["sim"]["total_output_tokens"]
    text = serving_text(pair)
    assert f"p99 TTFT ms real {pair['real']['p99_ttft_ms']:.1f} sim {pair['sim']['p99_ttft_ms']:.1f}" in text
    assert "engine time" not in text
    assert serving_text(pair | {"step_model_ratios": [1.1, 1.3, math.nan]}).endswith("engine time / model 1.20")
    assert pair["real"]["output_throughput"] == pytest.approx(
        pair["real"]["total_output_tokens"] / pair["real"]["duration"]
    )


def test_replays_serving_figures_are_their_mean() -> None:
    _, real, sim = load_run(CASE)
    slower = replace(real, requests=[replace(r, finish_s=r.finish_s + 0.1) for r in real.requests])
    one, other = serving_pair("w", "l", [real], [sim])["real"], serving_pair("w", "l", [slower], [sim])["real"]
    both = serving_pair("w", "l", [real, slower], [sim])["real"]
    assert both["completed"] == one["completed"]  # a count every replay agrees on stays as it is
    assert both["mean_e2el_ms"] == pytest.approx((one["mean_e2el_ms"] + other["mean_e2el_ms"]) / 2)
    assert other["mean_e2el_ms"] > one["mean_e2el_ms"]
    # One simulation per replay: the simulated side is their mean the same way.
    assert serving_pair("w", "l", [real], [real, slower])["sim"] == both
