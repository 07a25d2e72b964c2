"""The fairness benchmark's page, ``docs/results/fairness.md``, written from the figures of a full run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from slosched.bench.fairness.setup import (
    LIVE_BACKENDS,
    LIVE_CALLS_PER_WAVE,
    LIVE_FLOOD_ROWS,
    LIVE_WAVE_INTERVAL_S,
    LIVE_WAVES,
)


def _pct(figures: dict[str, Any], name: str) -> str:
    low, high = figures[f"{name}_spread"]
    return f"{100 * figures[name]:.1f}% [{100 * low:.1f}, {100 * high:.1f}]"


def _points(figures: dict[str, Any], name: str) -> str:
    low, high = figures[f"{name}_spread"]
    return f"{figures[name]:.1f} [{low:.1f}, {high:.1f}]"


def _row(label: str, figures: dict[str, Any], mode: str) -> str:
    cells = [_pct(figures, f"calm_{mode}"), _pct(figures, f"flood_{mode}"), _points(figures, f"drop_{mode}_points")]
    return f"| {label} | {' | '.join(cells)} | {_pct(figures, f'flooder_{mode}')} |"


def page(figures: dict[str, Any]) -> str:
    sim, live = figures["sim"], figures["live"]
    verdict = "met" if figures["passed"] else "MISSED"
    return "\n".join(
        [
            "# Fair sharing under a flooding tenant (`slosched bench fairness`)",
            "",
            f"Tenant `interactive`'s attainment without and with a {LIVE_FLOOD_ROWS:,}-row relQuery of tenant `batch`,",
            "with fair sharing (interactive in band 0, batch in band 1, weights 20 : 1) and without (first come,",
            "first served); median [min, max] over the runs. The drop is in points of attainment (calm minus flood).",
            "The done-when,",
            f"at most {figures['max_drop_points']:.0f} points with fair sharing in every run: **{verdict}**.",
            "",
            "| run | calm | flood | drop (points) | flooder's own |",
            "|---|---|---|---|---|",
            _row(f"simulated, fair sharing ({sim['runs']} seeds)", sim, "fair"),
            _row("simulated, first come first served", sim, "fcfs"),
            _row(f"live, fair sharing ({live['runs']} runs)", live, "fair"),
            _row("live, first come first served", live, "fcfs"),
            "",
            "Simulated: `examples/flooding-tenant.yaml` (2x A100-80G, Llama-3-8B; 300 interactive jobs, 80% chat and",
            f"20% Text-to-SQL workflows, at 2 jobs/s; the relQuery at t = 20 s), seeds {sim['seeds']}. Live:",
            f"`slosched serve` in front of {LIVE_BACKENDS} stub backends; interactive sends {LIVE_WAVES} waves of",
            f"{LIVE_CALLS_PER_WAVE} calls and one two-stage workflow, {LIVE_WAVE_INTERVAL_S:g} s apart, calm and right",
            "after the relQuery was submitted;",
            "a 429 counts as a miss. The flooder's own figure: its jobs meeting their SLO (simulated), its rows",
            "answered (live).",
            "",
        ]
    )


def write_report(figures: dict[str, Any], results_dir: Path) -> None:
    results_dir.mkdir(parents=True, exist_ok=True)
    (results_dir / "fairness.md").write_text(page(figures))
