"""The soak benchmark's page, ``docs/results/soak.md``, and its memory plot (every number from the run)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def _plot(samples: list[list[float]], warmup_s: float, path: Path) -> None:
    """RSS over time, and (right axis) the cumulative count of unexpected answers, to line up memory steps
    with episodes of errors."""
    figure = Figure(figsize=(7, 3.2))
    FigureCanvasAgg(figure)
    axes = figure.subplots()
    times = [sample[0] for sample in samples]
    axes.plot(times, [sample[1] for sample in samples], marker=".", linewidth=1, label="VmRSS")
    axes.axvline(warmup_s, color="grey", linestyle="--", linewidth=1, label="end of warm-up")
    axes.set_xlabel("time since the load started (s)")
    axes.set_ylabel("gateway VmRSS (MB)")
    axes.legend(loc="lower right")
    errors = figure.axes[0].twinx()
    errors.plot(times, [sample[2] for sample in samples], color="tab:red", linewidth=1, alpha=0.6)
    errors.set_ylabel("unexpected answers (cumulative)", color="tab:red")
    axes.grid(alpha=0.3)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def write_report(figures: dict[str, Any], bound_mb: float, results_dir: Path) -> None:
    """Write the page and ``soak/rss.png`` under ``results_dir``."""
    _plot(figures["samples"], figures["warmup_s"], results_dir / "soak" / "rss.png")
    side = figures["gateway"]
    terminal = figures["terminal"]
    verdict = "passed" if figures["passed"] else "FAILED"
    lines = [
        "# Gateway soak (`slosched bench soak`)",
        "",
        f"The gateway (subprocess, `round-robin+chunked-fcfs`, one stub backend answering instantly, `max_jobs` "
        f"500) under an open-loop mixed load of {figures['rate_rps']:.0f} operations/s for "
        f"{figures['duration_s']:.0f} s: plain completions (some with SLO headers), streamed completions, chat "
        "calls, job flows (workflow create + stage + complete, or a 3-row relQuery) and malformed requests. "
        f"Resident memory (VmRSS) sampled every few seconds; the start value is taken after a "
        f"{figures['warmup_s']:.0f} s warm-up. The load generator shares this 2-core machine with the stub and "
        "the gateway (and with other work).",
        "",
        f"Result: **{verdict}** (criterion: growth below {bound_mb:.0f} MB, no request lost on either side, "
        "every job terminal).",
        "",
        "| figure | value |",
        "|---|---:|",
        f"| RSS after warm-up (MB) | {figures['rss_start_mb']:.1f} |",
        f"| RSS at the end (MB) | {figures['rss_end_mb']:.1f} |",
        f"| growth (MB) | {figures['growth_mb']:.1f} |",
        f"| peak after warm-up (MB) | {figures['rss_peak_mb']:.1f} |",
        f"| trend after warm-up (least squares, MB/min) | {figures['slope_mb_per_min']:.3f} |",
        f"| HTTP requests sent | {figures['requests']:,} |",
        f"| lost (sent - ended, client side) | {figures['lost']} |",
        f"| unexpected (valid without 2xx, malformed without 4xx) | {figures['unexpected']} |",
        f"| gateway: calls accepted / in a terminal outcome | {side['accepted']:,.0f} / {side['terminal']:,.0f} |",
        f"| gateway: jobs created / terminal | {side['jobs_created']:,} / {side['jobs_terminal']:,.0f} |",
        "",
        "Terminal state of every request sent (client side):",
        "",
        "| " + " | ".join(terminal) + " |",
        "|" + "---:|" * len(terminal),
        "| " + " | ".join(f"{count:,}" for count in terminal.values()) + " |",
        "",
        "Gateway calls that did not complete, by outcome/reason (from its `/metrics`): "
        + (", ".join(f"{key} {count:,.0f}" for key, count in side["not_completed"].items()) or "none")
        + ".",
        "",
        "![gateway resident memory over the soak](soak/rss.png)",
        "",
        "The finished-job store keeps the last `max_jobs` finished jobs for `GET /v1/jobs/{id}` (default "
        "10,000), so memory grows until it is full and then stays flat; the soak sets 500 so the store fills "
        "during the warm-up and the growth measured afterwards is what would leak.",
    ]
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "soak.md").write_text("\n".join(lines) + "\n")
