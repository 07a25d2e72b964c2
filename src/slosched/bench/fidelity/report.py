"""The full fidelity run's report: docs/results/fidelity.md (every number from ``slosched bench fidelity``)."""

from __future__ import annotations

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
    return [Case(c["trace"], c["load"], c["metric"], c["real"], c["sim"]) for c in figures["cases"]]


def write_report(figures: dict[str, Any], path: Path = REPORT) -> Path:
    cases = _cases(figures)
    header = "| trace | load | " + " | ".join(title for _, title in _COLUMNS) + " |"
    lines = [
        "# Simulator fidelity against a real vLLM engine (`slosched bench fidelity`)",
        "",
        "One vLLM 0.32.0 CPU server (tiny random-weight 4-layer model, vLLM's default scheduler, eager mode)",
        "profiled by `slosched profile`'s sweep, then every trace replayed against it and simulated with the measured",
        "profile as truth (`chunked-fcfs`, the server's limits, no noise). Cells: real / simulated (error).",
        "Every engine process is pinned to one core, the API server and the replay client to the others",
        "(`devtools/affinity.py` says why).",
        "",
        f"- mean absolute error of the mean latencies: **{figures['mean_abs_error_pct']:.1f}%**",
        f"- mean absolute error of the P90 latencies: **{figures['p90_abs_error_pct']:.1f}%**",
        f"- mean absolute error over every compared metric: {figures['all_abs_error_pct']:.1f}%",
        "",
        header,
        "|" + "---|" * (len(_COLUMNS) + 2),
    ]
    for row in error_table(cases, [name for name, _ in _COLUMNS]):
        lines.append("| " + " | ".join(row) + " |")
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
