"""``slosched bench relserve``: RelServe vs vLLM, Sarathi and vLLM-SP on synthetic relQuery traces.

Settings: OPT-13B on 1x A100-40G, Qwen2.5-32B on 2x A100-40G (TP2), Llama-2-70B on 4x A100-40G (TP4,
``gpu_memory_utilization`` 0.95: at 0.9 bf16 weights leave no KV cache), each with the four datasets
(``relquery`` generator, query types mixed, 1-100 rows, Poisson arrivals). Loads are fractions of the
relQuery rate ``fcfs`` (the slowest baseline) sustains, its saturation throughput measured by a burst
run; the highest load is that rate. Frameworks: ``fcfs`` (vLLM), ``chunked-fcfs`` (Sarathi),
``static-priority`` + job policy ``static-sum`` (vLLM-SP), ``relserve``; at the highest load also
``relserve-pp``/``relserve-dp`` and
``relserve`` with separate prefill/decode steps. Overhead: DPU + ABA wall time (perf_counter inside the
policies) over the simulated end-to-end time, and per engine iteration. ``--quick``: OPT-13B, two
datasets, two loads, 60 relQueries per trace; the full run writes ``docs/results/relserve.md``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from slosched.bench.common import saturation_throughput
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.metrics.breakdown import relquery_breakdown
from slosched.policies.engine.relserve_overhead import OverheadMeter
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams, simulate
from slosched.workloads.generators import make_workload

MODELS = (("OPT-13B", 1, 0.9), ("Qwen2.5-32B", 2, 0.9), ("Llama-2-70B", 4, 0.95))
DATASETS = ("amazon", "rotten", "beer", "pdmx")
FRAMEWORKS = {"fcfs": "deadline", "chunked-fcfs": "deadline", "static-priority": "static-sum", "relserve": "deadline"}
EXTRAS = {"relserve-pp": {}, "relserve-dp": {}, "relserve-sep": {"mixed_prefill": False}}
SEED = 11
RESULTS_DIR = Path("docs/results")


@dataclass(slots=True)
class Setting:
    model: str
    tp: int
    dataset: str
    capacity_rps: float = 0.0
    loads: list[dict[str, Any]] = field(default_factory=list)
    at_max: dict[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        return f"{self.model} x{self.tp} / {self.dataset}"


def instance(model: str, tp: int, memory_utilization: float) -> InstanceSpec:
    return InstanceSpec(
        name=f"{model}-tp{tp}",
        gpu="A100-40G",
        model=model,
        tp=tp,
        max_running=256,
        max_batched_tokens=2048,
        max_model_len=4096,
        gpu_memory_utilization=memory_utilization,
    )


def _run(
    spec: InstanceSpec, jobs: list[JobSpec], engine: str, extra: dict[str, Any] | None = None
) -> tuple[RunResult, OverheadMeter]:
    meter = OverheadMeter()
    preset = "relserve" if engine == "relserve-sep" else engine
    job_policy = FRAMEWORKS.get(engine, "deadline")
    params = dict(extra or {})
    if preset.startswith("relserve"):
        params["overhead_meter"] = meter
    result = simulate(
        [spec],
        jobs,
        PolicyPair.parse(f"round-robin+{preset}"),
        SEED,
        SimOptions(noise_sigma=0.05),
        PolicyParams(engine={preset: params}),
        job_policy=job_policy,
    )
    return result, meter


def _mean_latency(result: RunResult) -> float:
    latencies = [job.latency_s for job in result.jobs if job.outcome == "completed"]
    if len(latencies) < len(result.jobs):
        return math.inf
    return sum(latencies) / len(latencies)


def run_setting(
    setting: Setting, memory_utilization: float, fractions: tuple[float, ...], num_jobs: int
) -> tuple[OverheadMeter, float]:
    """Fills ``setting``; returns relserve's overhead meter and simulated seconds over all its runs."""
    spec = instance(setting.model, setting.tp, memory_utilization)
    params = {"dataset": setting.dataset}
    probe = make_workload("relquery", {"process": "poisson", "rate": 1.0}, num_jobs, params, seed=SEED)
    setting.capacity_rps = saturation_throughput([spec], probe, "round-robin+fcfs", seed=SEED)
    total = OverheadMeter()
    simulated_s = 0.0
    for fraction in fractions:
        rate = fraction * setting.capacity_rps
        jobs = make_workload("relquery", {"process": "poisson", "rate": rate}, num_jobs, params, seed=SEED)
        latency: dict[str, float] = {}
        results: dict[str, RunResult] = {}
        for engine in FRAMEWORKS:
            result, meter = _run(spec, jobs, engine)
            latency[engine] = _mean_latency(result)
            results[engine] = result
            if engine == "relserve":
                _accumulate(total, meter)
                simulated_s += result.end_s
        setting.loads.append({"load": fraction, "rate_rps": rate, "mean_latency_s": latency})
        if fraction == fractions[-1]:
            setting.at_max = _at_max(spec, jobs, results, latency)
    setting.at_max["overhead_share"] = total.total_s / simulated_s if simulated_s else 0.0
    setting.at_max["us_per_iteration"] = total.us_per_iteration()
    return total, simulated_s


def _at_max(
    spec: InstanceSpec, jobs: list[JobSpec], results: dict[str, RunResult], latency: dict[str, float]
) -> dict[str, Any]:
    ablation = {"relserve": latency["relserve"]}
    for engine, extra in EXTRAS.items():
        ablation[engine] = _mean_latency(_run(spec, jobs, engine, extra)[0])
    return {
        "ratio_vs_fcfs": latency["fcfs"] / latency["relserve"],
        "ratio_vs_static_priority": latency["static-priority"] / latency["relserve"],
        "breakdown": {
            name: relquery_breakdown(results[name]).to_json_dict() for name in ("static-priority", "relserve")
        },
        "ablation_mean_latency_s": ablation,
    }


def _accumulate(total: OverheadMeter, meter: OverheadMeter) -> None:
    total.dpu_s += meter.dpu_s
    total.aba_s += meter.aba_s
    total.num_dpu_updates += meter.num_dpu_updates
    total.num_iterations += meter.num_iterations


def _stats(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "avg": sum(values) / len(values), "max": max(values)}


def run(quick: bool) -> dict[str, Any]:
    models = MODELS[:1] if quick else MODELS
    datasets = ("amazon", "pdmx") if quick else DATASETS
    fractions = (0.5, 1.0) if quick else (0.4, 0.7, 1.0)
    num_jobs = 60 if quick else 100
    settings: list[Setting] = []
    total = OverheadMeter()
    simulated_s = 0.0
    for model, tp, memory_utilization in models:
        for dataset in datasets:
            setting = Setting(model, tp, dataset)
            meter, seconds = run_setting(setting, memory_utilization, fractions, num_jobs)
            _accumulate(total, meter)
            simulated_s += seconds
            settings.append(setting)
    figures = {
        "settings": [_setting_json(setting) for setting in settings],
        "ratio_vs_fcfs_at_max_load": _stats([s.at_max["ratio_vs_fcfs"] for s in settings]),
        "ratio_vs_static_priority_at_max_load": _stats([s.at_max["ratio_vs_static_priority"] for s in settings]),
        "overhead_share": total.total_s / simulated_s if simulated_s else 0.0,
        "us_per_iteration": total.us_per_iteration(),
    }
    _print(settings, figures)
    if not quick:
        from slosched.bench.relserve_report import write_report

        write_report(RESULTS_DIR, settings, figures)
    return figures


def _setting_json(setting: Setting) -> dict[str, Any]:
    return {
        "model": setting.model,
        "gpus": f"{setting.tp}x A100-40G",
        "dataset": setting.dataset,
        "fcfs_capacity_rps": setting.capacity_rps,
        "loads": setting.loads,
        "at_max_load": setting.at_max,
    }


def _print(settings: list[Setting], figures: dict[str, Any]) -> None:
    console = Console(stderr=True)
    table = Table(title="relserve: mean relQuery latency (s) per load (fraction of fcfs capacity)")
    for column in ("setting", "load", *FRAMEWORKS, "fcfs/rs", "sp/rs"):
        table.add_column(column, justify="right")
    for setting in settings:
        for load in setting.loads:
            lat = load["mean_latency_s"]
            table.add_row(
                setting.label,
                f"{load['load']:.1f}",
                *(f"{lat[name]:.2f}" for name in FRAMEWORKS),
                f"{lat['fcfs'] / lat['relserve']:.2f}",
                f"{lat['static-priority'] / lat['relserve']:.2f}",
            )
    console.print(table)
    console.print(
        f"ratio vs fcfs at max load {figures['ratio_vs_fcfs_at_max_load']}, vs static-priority "
        f"{figures['ratio_vs_static_priority_at_max_load']}, overhead share {figures['overhead_share']:.4%}, "
        f"{figures['us_per_iteration']:.1f} us/iteration"
    )
