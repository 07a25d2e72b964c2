"""``docs/results/admission.md`` and its plot, from the figures of one ``slosched bench admission`` run
(every number on the page is the run's; nothing is typed in)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from slosched.bench.admission.setup import PLAIN
from slosched.evaluation.formatting import fixed

COMMAND = "slosched bench admission --json"
PLOT = "admission_goodput.png"


def command(mode: str) -> str:
    """The command that writes the page in ``mode`` (``quick`` runs write it with ``SLOSCHED_ADMISSION_REPORT``)."""
    return COMMAND if mode == "full" else COMMAND.replace(" --json", " --quick --json")


def write_report(directory: Path, figures: dict[str, Any]) -> Path:
    """``directory/admission.md`` and ``directory/admission/admission_goodput.png``."""
    plots = directory / "admission"
    plots.mkdir(parents=True, exist_ok=True)
    plot_goodput(figures, plots / PLOT)
    lines = [
        "# Job-level admission under overload",
        "",
        f"Written by `{command(figures['mode'])}` (seeds {figures['seeds']}). Loads are multiples of the plain",
        "stack's (`stack`: without job-level admission, `backlog: false`) steady-state SLO capacity @90% on the",
        "same seeds; goodput is jobs meeting their deadline per second (median over seeds), and `vs 1x` divides",
        "it by the plain stack's goodput at 1x: at least 1 at 2x and 3x means overload does not collapse",
        "(`holds`). What each variant turns on: docs/stack.md.",
        "",
        f"![goodput per load](admission/{PLOT})",
        "",
    ]
    for name, row in figures["workloads"].items():
        lines += _workload(name, row)
    path = directory / "admission.md"
    path.write_text("\n".join(lines) + "\n")
    return path


def _workload(name: str, row: dict[str, Any]) -> list[str]:
    loads = list(row["goodput"][PLAIN.label])
    lines = [
        f"## {name}",
        "",
        f"{row['description']}. Plain stack's capacity: {fixed(row['capacity_rps'], 3)} jobs/s.",
        "",
        "| variant | "
        + " | ".join(f"goodput {load} (vs 1x)" for load in loads)
        + " | attainment "
        + loads[-1]
        + " | holds |",
        "|---|" + "---:|" * (len(loads) + 1) + "---|",
    ]
    for label in row["goodput"]:  # the variants that ran on this workload
        cells = [
            f"{fixed(row['goodput'][label][load], 3)} ({fixed(row['goodput_vs_capacity'][label][load], 2)})"
            for load in loads
        ]
        attainment = fixed(row["attainment"][label][loads[-1]], 2)
        lines.append(
            f"| {label} | " + " | ".join(cells) + f" | {attainment} | {'yes' if row['holds'][label] else 'no'} |"
        )
    return [*lines, "", *_tenants(row)]


def _tenants(row: dict[str, Any]) -> list[str]:
    """Each tenant's attainment per variant and load, where the workload has several tenants."""
    per_variant = row.get("attainment_by_tenant", {})
    tenants = sorted({tenant for loads in per_variant.values() for medians in loads.values() for tenant in medians})
    if len(tenants) < 2:
        return []
    loads = list(row["goodput"][PLAIN.label])
    header = " | ".join(f"{tenant} {load}" for tenant in tenants for load in loads)
    lines = [
        "Attainment per tenant (median over seeds):",
        "",
        f"| variant | {header} |",
        "|---|" + "---:|" * (len(tenants) * len(loads)),
    ]
    for label, per_load in per_variant.items():
        cells = [fixed(per_load[load].get(tenant, float("nan")), 3) for tenant in tenants for load in loads]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return [*lines, ""]


def plot_goodput(figures: dict[str, Any], path: Path) -> None:
    """Goodput over load, one panel per workload, one line per variant."""
    rows = figures["workloads"]
    figure = Figure(figsize=(5.0 * len(rows), 3.6))
    FigureCanvasAgg(figure)
    for index, (name, row) in enumerate(rows.items()):
        axes = figure.add_subplot(1, len(rows), index + 1)
        for label, marker in zip(row["goodput"], "osD^vP", strict=False):
            goodput = row["goodput"][label]
            loads = [float(load.rstrip("x")) for load in goodput]
            axes.plot(loads, list(goodput.values()), marker=marker, label=label)
        axes.set_title(name)
        axes.set_xlabel("load (x the plain stack's capacity)")
        axes.set_ylabel("goodput (jobs/s on time)")
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
