"""``bench.fidelity.report``: the fidelity page holds every figure it is given, one row per trace/load."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slosched.bench.fidelity.report import write_report


def make_figures() -> dict[str, Any]:
    cases = [
        {"trace": "chat", "load": "low", "metric": "ttft_mean_s", "real": 0.2, "sim": 0.22},
        {"trace": "chat", "load": "low", "metric": "request_latency_mean_s", "real": 2.0, "sim": 1.9},
        {"trace": "chat", "load": "high", "metric": "ttft_mean_s", "real": 1.0, "sim": 1.0},
    ]
    return {
        "cases": cases,
        "mean_abs_error_pct": 4.24,
        "p90_abs_error_pct": 7.5,
        "all_abs_error_pct": 5.0,
        "profile": {
            "num_steps": 321,
            "residual_rel_std": 0.0456,
            "params": {"c0_s": {"estimate": 0.0123, "ci_low": 0.011, "ci_high": 0.0135}},
        },
        "server_start_s": 41.6,
        "wall_s": 612.2,
    }


def test_report_holds_every_figure(tmp_path: Path) -> None:
    path = write_report(make_figures(), tmp_path / "results" / "fidelity.md")
    assert path == tmp_path / "results" / "fidelity.md"
    text = path.read_text()
    lines = text.splitlines()
    assert lines[0] == "# Simulator fidelity against a real vLLM engine (`slosched bench fidelity`)"
    assert "mean absolute error of the mean latencies: **4.2%**" in text
    assert "mean absolute error of the P90 latencies: **7.5%**" in text
    assert "mean absolute error over every compared metric: 5.0%" in text
    header = next(line for line in lines if line.startswith("| trace | load |"))
    separator = lines[lines.index(header) + 1]
    assert separator.count("---") == header.count("|") - 1  # one per column
    rows = [line for line in lines if line.startswith("| chat |")]
    assert len(rows) == 2  # (chat, low) and (chat, high)
    low = rows[0].split(" | ")
    assert low[1] == "low" and "2 / 1.9 (-5.0%)" in rows[0] and "0.2 / 0.22 (+10.0%)" in rows[0]
    assert rows[1].count(" - ") >= 5  # absent metrics are dashes
    assert "Profile: 321 measured steps, residual relative std 0.046." in text
    assert "| c0_s | 0.0123 | [0.011, 0.0135] |" in text
    assert "Server start-up 42 s; whole run 612 s." in text


def test_report_says_how_the_rounds_and_the_machine_went(tmp_path: Path) -> None:
    figures = make_figures()
    figures["rounds"] = 3
    figures["cases"][1]["real_replays"] = [1.8, 2.0, 2.2]
    figures["machine"] = {
        "window_s": 0.5,
        "cpu": {"model": "AMD EPYC", "vector": "avx2"},
        "cores": {"0": {"windows": 40, "slowest_over_fastest": 0.61, "p10_over_p90": 0.72, "rel_std": 0.1}},
        "cross_core_correlation": -0.2,
    }
    text = write_report(figures, tmp_path / "fidelity.md").read_text()
    assert "In each of 3 interleaved rounds" in text
    assert "core 0: slowest window 0.61 of the fastest, 10th percentile 0.72 of the 90th" in text
    assert "correlation between the cores' windows -0.20" in text
    assert "Processor: AMD EPYC, widest vector extension avx2." in text
    assert "spread over 20-20% of its mean (median 20%; slowest replay less the fastest)" in text
    plain = write_report(make_figures(), tmp_path / "plain.md").read_text()
    assert "The machine itself" not in plain and "Between the replays" not in plain


def test_report_gives_the_speed_model_and_the_errors_without_it(tmp_path: Path) -> None:
    figures = make_figures()
    figures["speed"] = {"reference_probe_ms": 0.41, "slope": 0.55, "windows": 120, "correlation": 0.86}
    figures["uncorrected"] = {"mean_abs_error_pct": 11.4, "p90_abs_error_pct": 13.9, "all_abs_error_pct": 15.0}
    figures["serving"] = [
        {"speed_factors": [0.93, 1.21], "step_model_ratios": [1.04, 0.97]},
        {"speed_factors": [1.02], "step_model_ratios": [float("nan"), 1.18]},
    ]
    text = write_report(figures, tmp_path / "fidelity.md").read_text()
    assert (
        "step time ~ (probe / 0.41 ms) ^ 0.55" in text
        and "correlation 0.86); the replays' factors ran 0.93-1.21" in text
    )
    assert "the errors are\n11.4% (mean latencies) and 13.9% (P90)" in text
    assert "charges for the steps it ran: 0.97-1.18" in text  # a replay without steps is left out
    assert "Speed model" not in write_report(make_figures(), tmp_path / "plain.md").read_text()
