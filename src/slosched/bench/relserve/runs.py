"""``slosched bench relserve``: RelServe on the scoreboard (DESIGN section 9) and the paper's latency view.

For each setting (``setup``: OPT-13B and Llama-2-70B, one engine each as in the paper),
relQuery traces of a fixed number of jobs (``relquery`` generator, mixed query types, 1-100 rows, Poisson
arrivals, a discarded warm-up prefix so learned state is warm, leak-free deadlines at ``SLO_SCALE`` x the
client's estimate) give:

- **SLO capacity** (90% and 95% of relQueries within their SLO, bisection to 2%, median over seeds with
  the min-max spread) of the strongest baseline (``scoreboard.evaluate``: static token budgets and static
  max concurrencies searched in rounds, every router on multi-engine clusters), of RelServe (``least-tokens+relserve``),
  of the paper's baselines (vLLM ``fcfs``, Sarathi ``chunked-fcfs``, vLLM-SP ``static-priority``) and, in
  full runs, of the predicted-OL variant and the labelled ORACLE (true output lengths).
- **Goodput under overload** at 0.5x-2x the strongest baseline's capacity.
- **The paper's metric**: mean relQuery latency of the paper's frameworks at those loads (first seed), the
  waiting / core / tail breakdown and the ABA ablation (``relserve-pp``, ``relserve-dp``, separate
  prefill/decode steps) at 1.5x, and the DPU + ABA overhead.

``--quick``: the first setting, 2 seeds, 60 relQueries per run (10 warm-up); full: 5 seeds, 100
relQueries (10 warm-up), and ``docs/results/relserve.md`` with plots is written from the run.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

import slosched.bench.relserve.setup as setup
from slosched.core.records import RunResult
from slosched.evaluation.scoreboard import LOADS, Scoreboard, evaluate
from slosched.evaluation.scoreboard_report import print_serving
from slosched.evaluation.sizing import work_rule_name, work_tolerance
from slosched.evaluation.workbench import WARMUP_PREFIX, Candidate, Workbench, measured_only
from slosched.metrics.breakdown import relquery_breakdown
from slosched.metrics.summary import json_safe, serving_of
from slosched.policies.engine.ordering.relserve_overhead import OverheadMeter
from slosched.sim.runner import PolicyParams

RESULTS_DIR = Path("docs/results")
ABLATION_LOAD = 1.5
EXTRAS = {"relserve-pp": {}, "relserve-dp": {}, "relserve-sep": {"mixed_prefill": False}}


@dataclass(slots=True, frozen=True)
class RunPlan:
    seeds: tuple[int, ...]
    num_jobs: int
    num_warmup_jobs: int
    settings: tuple[setup.Setting, ...]
    quick: bool

    @classmethod
    def of(cls, quick: bool) -> RunPlan:
        if quick:
            return cls((1, 2), 60, 10, setup.QUICK_SETTINGS, True)
        return cls((1, 2, 3, 4, 5), 100, 10, setup.FULL_SETTINGS, False)


@dataclass(slots=True)
class SettingResult:
    setting: setup.Setting
    board: Scoreboard
    latency: list[dict[str, Any]] = field(default_factory=list)
    at_ablation_load: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return self.setting.label

    def paper_ratios(self) -> dict[str, float]:
        """RelServe's 90% capacity over each paper baseline's."""
        return {
            engine: self.board.ratio(setup.PAPER_POLICY, f"{setup.REFERENCE_ROUTER}+{engine}")
            for engine in setup.PAPER_BASELINES
        }


def run_setting(plan: RunPlan, setting: setup.Setting) -> SettingResult:
    bench = setup.workbench(setting, plan.num_jobs, plan.num_warmup_jobs, work_tolerance(plan.quick))
    # The predicted-OL variant and the oracle on the headline setting of full runs only (run time).
    others = setup.paper_candidates(not plan.quick and setting == plan.settings[0])
    chosen = [candidate.label for candidate in others[:4]]
    board = evaluate(
        bench,
        plan.seeds,
        others,
        setup.baseline_plan(setting, plan.quick),
        guess=0.3 * setting.num_engines,
        loads=LOADS,
        overload_labels=chosen,
        converge_labels=[setup.PAPER_POLICY],
    )
    result = SettingResult(setting, board)
    paper_latency(result, bench, others[:4], plan.seeds[0])
    return result


def _run(bench: Workbench, candidate: Candidate, rate: float, seed: int) -> RunResult:
    jobs, history = bench.workload(rate, seed)
    return bench.run_fn(candidate, bench.instances, jobs, bench.options, seed, history)


def _measured(result: RunResult) -> RunResult:
    """``result`` without its warm-up prefix."""
    return replace(result, jobs=[job for job in result.jobs if not job.id.startswith(WARMUP_PREFIX)])


def _measured_mean_latency(result: RunResult) -> float:
    jobs = _measured(result).jobs
    if any(job.outcome != "completed" for job in jobs):
        return math.inf
    return statistics.fmean(job.latency_s for job in jobs)


def paper_latency(result: SettingResult, bench: Workbench, frameworks: list[Candidate], seed: int) -> None:
    """Mean relQuery latency of the paper's frameworks at ``LOADS`` x the strongest baseline's capacity;
    breakdown, ABA ablation and overhead at ``ABLATION_LOAD``."""
    base_rate = result.board.capacity_of(result.board.strongest)
    meter = OverheadMeter()
    simulated_s = 0.0
    for load in LOADS:
        rate = load * base_rate
        latency: dict[str, float] = {}
        runs: dict[str, RunResult] = {}
        for candidate in frameworks:
            run_as = candidate
            if candidate.label == setup.PAPER_POLICY:
                run_as = _with_engine_params(candidate, "relserve", {"overhead_meter": meter})
            runs[candidate.label] = _run(bench, run_as, rate, seed)
            latency[candidate.label] = _measured_mean_latency(runs[candidate.label])
        simulated_s += runs[setup.PAPER_POLICY].end_s
        serving = {label: serving_of(measured_only(run)).to_json_dict() for label, run in runs.items()}
        result.latency.append({"load": load, "rate_rps": rate, "mean_latency_s": latency, "serving": serving})
        if load == ABLATION_LOAD:
            result.at_ablation_load = _ablation(bench, runs, latency, rate, seed)
    result.at_ablation_load["overhead_share"] = meter.total_s / simulated_s if simulated_s else 0.0
    result.at_ablation_load["us_per_iteration"] = meter.us_per_iteration()


def _with_engine_params(candidate: Candidate, engine: str, extra: dict[str, Any]) -> Candidate:
    params = PolicyParams(engine={engine: {**candidate.params.engine.get(engine, {}), **extra}})
    return Candidate(candidate.label, candidate.policy, params, candidate.job_policy, candidate.oracle)


def _ablation(
    bench: Workbench, runs: dict[str, RunResult], latency: dict[str, float], rate: float, seed: int
) -> dict[str, Any]:
    ours = setup.PAPER_POLICY
    static = f"{setup.REFERENCE_ROUTER}+static-priority"
    ablation = {"relserve": latency[ours]}
    for name, extra in EXTRAS.items():
        preset = "relserve" if name == "relserve-sep" else name
        candidate = Candidate.of(f"{setup.REFERENCE_ROUTER}+{preset}", extra or None)
        ablation[name] = _measured_mean_latency(_run(bench, candidate, rate, seed))
    return {
        "load": ABLATION_LOAD,
        "ratio_vs_fcfs": latency[f"{setup.REFERENCE_ROUTER}+fcfs"] / latency[ours],
        "ratio_vs_static_priority": latency[static] / latency[ours],
        "breakdown": {
            "static-priority": relquery_breakdown(_measured(runs[static])).to_json_dict(),
            "relserve": relquery_breakdown(_measured(runs[ours])).to_json_dict(),
        },
        "ablation_mean_latency_s": ablation,
    }


def _stats(values: list[float]) -> dict[str, float]:
    finite = [value for value in values if math.isfinite(value)] or [math.nan]
    return {"min": min(finite), "median": statistics.median(finite), "max": max(finite)}


def figures_of(plan: RunPlan, results: list[SettingResult]) -> dict[str, Any]:
    """The ``--json`` figures: the headline setting's scoreboard fields at top level, every setting below."""
    head = results[0]
    figures: dict[str, Any] = {
        **head.board.as_json(setup.PAPER_POLICY, setup.PAPER_BASELINE),
        "headline_setting": head.label,
        "num_jobs": plan.num_jobs,
        "work_rule": work_rule_name(work_tolerance(plan.quick)),
        "num_warmup_jobs": plan.num_warmup_jobs,
        "seeds": list(plan.seeds),
        "slo_scale": setup.SLO_SCALE,
        "ratio_vs_paper_baselines": head.paper_ratios(),
        "ratio_vs_strongest_by_setting": {r.label: r.board.ratio(setup.PAPER_POLICY) for r in results},
        "ratio_vs_paper_baseline_by_setting": {
            r.label: r.board.ratio(setup.PAPER_POLICY, setup.PAPER_BASELINE) for r in results
        },
        "ratio_vs_fcfs_at_1.5x": _stats([r.at_ablation_load["ratio_vs_fcfs"] for r in results]),
        "ratio_vs_static_priority_at_1.5x": _stats([r.at_ablation_load["ratio_vs_static_priority"] for r in results]),
        "overhead_share": statistics.fmean(r.at_ablation_load["overhead_share"] for r in results),
        "us_per_iteration": statistics.fmean(r.at_ablation_load["us_per_iteration"] for r in results),
        "settings": [setting_json(r) for r in results],
    }
    return figures


def setting_json(result: SettingResult) -> dict[str, Any]:
    setting = result.setting
    return {
        "setting": result.label,
        "model": setting.model,
        "gpus": setting.gpus,
        "dataset": setting.dataset,
        "scoreboard": result.board.as_json(setup.PAPER_POLICY, setup.PAPER_BASELINE),
        "ratio_vs_paper_baselines": result.paper_ratios(),
        "mean_latency_by_load": result.latency,
        "at_1.5x": result.at_ablation_load,
    }


def run(quick: bool) -> dict[str, Any]:
    plan = RunPlan.of(quick)
    results = [run_setting(plan, setting) for setting in plan.settings]
    figures = figures_of(plan, results)
    print_results(results, figures)
    if not quick:
        from slosched.bench.relserve.report import write_report

        write_report(RESULTS_DIR, json_safe(figures))
    return figures


def print_results(results: list[SettingResult], figures: dict[str, Any]) -> None:
    print_serving([result.board for result in results])
    console = Console(stderr=True, width=150)
    for result in results:
        board = result.board
        table = Table(title=f"relserve: {result.label} - SLO capacity (relQuery/s), median [min-max]")
        for column in ("policy", "90%", "95%", "vs strongest"):
            table.add_column(column, justify="right")
        for label, capacity in {**board.baselines, **board.others}.items():
            mark = " (strongest)" if label == board.strongest else ""
            table.add_row(
                escape(label) + mark,
                capacity.capacity[0.90].text(),
                capacity.capacity[0.95].text(),
                f"{board.ratio(label):.2f}",
            )
        console.print(table)
    console.print(
        f"headline {figures['headline_setting']}: RelServe / strongest ({figures['strongest_baseline']}) "
        f"{figures['ratio_vs_strongest']:.2f}, / vLLM fcfs {figures['ratio_vs_paper_baseline']:.2f}; "
        f"by setting vs strongest {_rounded(figures['ratio_vs_strongest_by_setting'])}; overhead "
        f"{figures['overhead_share']:.4%}, {figures['us_per_iteration']:.1f} us/iteration"
    )


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {key: round(value, 2) for key, value in values.items()}
