"""The full fidelity run's report: docs/results/fidelity.md (every number from ``slosched bench fidelity``)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import Any

from slosched.fidelity.compare import Case, error_table

REPORT = Path("docs/results/fidelity.md")
_COLUMNS = (
    ("request_latency_mean_s", "request latency mean (s)"),
    ("request_latency_p90_s", "request latency P90 (s)"),
    ("ttft_mean_s", "TTFT mean (s)"),
    ("ttft_p90_s", "TTFT P90 (s)"),
    ("job_latency_mean_s", "job latency mean (s)"),
    ("job_latency_p90_s", "job latency P90 (s)"),
    ("throughput_tokens_per_s", "output tokens/s"),
)


def _cases(figures: dict[str, Any]) -> list[Case]:
    return [
        Case(c["trace"], c["load"], c["metric"], c["real"], c["sim"], tuple(c.get("real_replays", ())))
        for c in figures["cases"]
    ]


def write_report(figures: dict[str, Any], path: Path = REPORT) -> Path:
    cases = _cases(figures)
    header = "| trace | load | " + " | ".join(title for _, title in _COLUMNS) + " |"
    rounds = figures.get("rounds", 1)
    lines = [
        "# Simulator fidelity against a real vLLM engine (`slosched bench fidelity`)",
        "",
        "One vLLM 0.32.0 CPU server (tiny random-weight 4-layer model, vLLM's default scheduler, eager mode,",
        "slosched's plugin loaded in `bypass` mode: it changes no decision and writes every step's shape and time).",
        f"In each of {rounds} interleaved rounds: `slosched profile`'s sweep, a calibration mix (every trace on",
        "seeds of its own), then one replay of every compared case. The simulation (`chunked-fcfs`, the server's",
        "limits, no noise) runs on a profile whose step costs are fitted to every step the engine ran in the",
        "rounds' sweeps and calibration mixes (least squares on the step times,",
        "`perf.profile_fit.fit_mean_profile`) and whose front end (per-request and per-token costs, constant",
        "latency) comes from the sweeps. The engine also timed a fixed CPU workload every",
        "0.1 s between steps (`perf.speed_probe`): each replay is simulated with the step costs at the speed",
        "its own probes saw (`fidelity.speed`), and the case's replays are compared with the mean of those",
        "simulations. Compared replays never feed the fit. Cells: real / simulated (error). Every engine process",
        "is pinned to one core, the API server and the replay client to the others (`devtools/affinity.py`).",
        "",
        *_machine_lines(figures.get("machine")),
        *_speed_lines(figures),
        f"- mean absolute error of the mean latencies: **{figures['mean_abs_error_pct']:.1f}%**",
        f"- mean absolute error of the P90 latencies: **{figures['p90_abs_error_pct']:.1f}%**",
        f"- mean absolute error over every compared metric: {figures['all_abs_error_pct']:.1f}%",
        "",
        header,
        "|" + "---|" * (len(_COLUMNS) + 2),
    ]
    for row in error_table(cases, [name for name, _ in _COLUMNS]):
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", *_spread_lines(cases)]
    profile = figures["profile"]
    lines += [
        "",
        f"Profile: {profile['num_steps']} measured steps, residual relative std {profile['residual_rel_std']:.3f}.",
        "",
        "| parameter | estimate | 95% CI |",
        "|---|---:|---|",
    ]
    for name, values in profile["params"].items():
        lines.append(f"| {name} | {values['estimate']:.3g} | [{values['ci_low']:.3g}, {values['ci_high']:.3g}] |")
    lines += ["", f"Server start-up {figures['server_start_s']:.0f} s; whole run {figures['wall_s']:.0f} s.", ""]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines))
    return path


def _speed_lines(figures: dict[str, Any]) -> list[str]:
    """The speed model and what the correction changed (``uncorrected``: one simulation per case at the
    calibration's median speed)."""
    speed, uncorrected = figures.get("speed"), figures.get("uncorrected")
    if not speed or not uncorrected:
        return []
    factors = [factor for pair in figures.get("serving", []) for factor in pair.get("speed_factors", [])]
    span = f"; the replays' factors ran {min(factors):.2f}-{max(factors):.2f}" if factors else ""
    ratios = [ratio for pair in figures.get("serving", []) for ratio in pair.get("step_model_ratios", [])]
    ratios = [ratio for ratio in ratios if math.isfinite(ratio)]
    model = (
        f"Each replay's engine time over what the corrected profile charges for the steps it ran: "
        f"{min(ratios):.2f}-{max(ratios):.2f} (per case: the JSON's `step_model_ratios`)."
        if ratios
        else ""
    )
    return [
        f"Speed model: step time ~ (probe / {speed['reference_probe_ms']} ms) ^ {speed['slope']} (fitted over",
        f"{speed['windows']} two-second windows of calibration steps, correlation {speed['correlation']}){span}.",
        "Without it (one simulation per case at the calibration's median speed) the errors are",
        f"{uncorrected['mean_abs_error_pct']:.1f}% (mean latencies) and {uncorrected['p90_abs_error_pct']:.1f}% (P90).",
        *([model] if model else []),
        "",
    ]


def _machine_lines(machine: dict[str, Any] | None) -> list[str]:
    """Why rounds: the machine's own speed over the run (``devtools.core_speed``), when it was measured."""
    if not machine:
        return []
    cores = ", ".join(
        f"core {core}: slowest window {figures['slowest_over_fastest']:.2f} of the fastest, "
        f"10th percentile {figures['p10_over_p90']:.2f} of the 90th"
        for core, figures in machine["cores"].items()
    )
    correlation = machine.get("cross_core_correlation")
    between = "" if correlation is None else f"; correlation between the cores' windows {correlation:.2f}"
    cpu = machine.get("cpu")
    processor = f"Processor: {cpu['model']}, widest vector extension {cpu['vector']}. " if cpu else ""
    return [
        f"{processor}The machine itself (`devtools/core_speed.py`, {machine['window_s']} s windows of a fixed "
        "matrix product on",
        f"every core at once, after the run): {cores}{between}. A 10-second replay sees whichever speed its",
        "core has in those seconds; the rounds spread every case, and the sweeps, over the same stretch of time.",
        "",
    ]


def _spread_lines(cases: list[Case]) -> list[str]:
    """How far one case's replays were apart: the real side's own spread, beside the simulation's error."""
    spreads = [case.real_spread_pct for case in cases if case.metric == "request_latency_mean_s"]
    spreads = [spread for spread in spreads if math.isfinite(spread)]  # nan: a single replay
    if not spreads:
        return []
    return [
        f"Between the replays of one case the real mean request latency spread over {min(spreads):.0f}-"
        f"{max(spreads):.0f}% of its mean (median {statistics.median(spreads):.0f}%; slowest replay less the"
        " fastest): how far apart the same jobs on the same server landed on this machine.",
        "",
    ]
