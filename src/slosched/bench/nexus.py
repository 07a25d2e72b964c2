"""``slosched bench nexus``: NexusSched (LENS + PRISM) reproduced in the simulator.

* **Homogeneous** 8x H100 (Llama-3-8B): per workload, a load sweep (fractions of the burst saturation
  throughput of chunked prefill) over the ablation ``{round-robin, prism} x {chunked, lens}`` and the
  baselines (``fcfs`` = vLLM prefill-first, ``chunked-fcfs`` with 512 and 2048-token budgets).
* **Heterogeneous** H100 + A100-80G + A6000 TP2 + A6000: ``lens`` under each router, with per-instance
  request shares.
* **Zero-config**: an unprofiled H100 joins a loaded 3x H100 cluster (``nexus_experiments``).
* **Model accuracy**: held-out R^2 of the online structural model against the truth, per hardware.

JSON (last line with ``--json``): ``slo_attainment_gain_avg`` (prism+lens minus round-robin+fcfs at the
highest load, percentage points, mean over workloads), ``summarization_goodput_ratio`` (max over the
sweep of SLO-meeting jobs/s, prism+lens over the best baseline without lens or prism),
``hetero_p50_reduction`` (1 - P50 latency of prism over the best other router), ``model_r2`` per
hardware, ``zero_config_converge_s`` and ``settings``. The full run writes docs/results/nexus.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from slosched.bench.common import print_figures
from slosched.bench.nexus_experiments import HARDWARE, model_accuracy, zero_config
from slosched.bench.nexus_setup import (
    HETERO_ROUTERS,
    VARIANTS,
    WORKLOADS,
    Variant,
    capacity,
    finite_mean,
    heterogeneous_cluster,
    homogeneous_cluster,
    parallel_map,
    run_variant,
)

RESULTS_DIR = Path("docs/results")  # relative to the working directory, like the other benches
HETERO_WORKLOADS = ("sharegpt", "flowgpt")


def _sweep_task(item: tuple[str, str, float, int, str]) -> dict[str, Any]:
    cluster_kind, workload_label, rate, num_jobs, variant_label = item
    instances = homogeneous_cluster() if cluster_kind == "homogeneous" else heterogeneous_cluster()
    workload = next(w for w in WORKLOADS if w.label == workload_label)
    variant = _variant(variant_label)
    jobs = workload.jobs(rate, num_jobs, seed=11)
    return run_variant(instances, jobs, variant)


def _variant(label: str) -> Variant:
    for variant in VARIANTS:
        if variant.label == label:
            return variant
    router = label.removesuffix("+lens")
    return Variant(label, f"{router}+lens", {})


def _capacity_task(item: tuple[str, str]) -> float:
    cluster_kind, workload_label = item
    instances = homogeneous_cluster() if cluster_kind == "homogeneous" else heterogeneous_cluster()
    return capacity(instances, next(w for w in WORKLOADS if w.label == workload_label))


def _accuracy_task(item: tuple[tuple[str, int], bool]) -> dict[str, Any]:
    return model_accuracy(*item)


def homogeneous(quick: bool) -> dict[str, Any]:
    """{workload: {"capacity", "loads": [{"load", "rate", "results": {variant: figures}}]}}."""
    workloads = [w for w in WORKLOADS if not quick or w.label != "flowgpt-uniform"]
    loads = (0.9,) if quick else (0.3, 0.5, 0.7, 0.9, 1.0)
    num_jobs = 400 if quick else 2500
    caps = parallel_map(_capacity_task, [("homogeneous", w.label) for w in workloads])
    items = [
        ("homogeneous", w.label, load * cap, num_jobs, v.label)
        for w, cap in zip(workloads, caps, strict=True)
        for load in loads
        for v in VARIANTS
    ]
    results = iter(parallel_map(_sweep_task, items))
    table: dict[str, Any] = {}
    for w, cap in zip(workloads, caps, strict=True):
        rows = []
        for load in loads:
            rows.append({"load": load, "rate": load * cap, "results": {v.label: next(results) for v in VARIANTS}})
        table[w.label] = {"capacity": cap, "loads": rows}
    return table


def heterogeneous(quick: bool) -> dict[str, Any]:
    load = 0.8
    num_jobs = 400 if quick else 2500
    names = HETERO_WORKLOADS[:1] if quick else HETERO_WORKLOADS
    labels = [f"{router}+lens" for router in HETERO_ROUTERS]
    caps = parallel_map(_capacity_task, [("heterogeneous", name) for name in names])
    items = [
        ("heterogeneous", name, load * cap, num_jobs, label)
        for name, cap in zip(names, caps, strict=True)
        for label in labels
    ]
    results = iter(parallel_map(_sweep_task, items))
    return {
        name: {"load": load, "rate": load * cap, "results": {label: next(results) for label in labels}}
        for name, cap in zip(names, caps, strict=True)
    }


def headline(homo: dict[str, Any], hetero: dict[str, Any]) -> dict[str, Any]:
    gains = []
    for data in homo.values():
        top = data["loads"][-1]["results"]
        gains.append(100.0 * (top["prism+lens"]["slo_attainment"] - top["round-robin+fcfs"]["slo_attainment"]))
    summ = homo["summarization"]["loads"]
    ours = max(row["rate"] * row["results"]["prism+lens"]["slo_attainment"] for row in summ)
    best = max(row["rate"] * row["results"][v.label]["slo_attainment"] for row in summ for v in VARIANTS if v.baseline)
    reductions = []
    for data in hetero.values():
        p50 = {label: figures["p50_latency_s"] for label, figures in data["results"].items()}
        others = min(value for label, value in p50.items() if label != "prism+lens")
        reductions.append(1.0 - p50["prism+lens"] / others)
    return {
        "slo_attainment_gain_avg": finite_mean(gains),
        "summarization_goodput_ratio": ours / best if best > 0 else float("inf"),
        "hetero_p50_reduction": finite_mean(reductions),
    }


def run(quick: bool) -> dict[str, Any]:
    timings: dict[str, float] = {}
    start = time.perf_counter()
    homo = homogeneous(quick)
    timings["homogeneous_s"] = time.perf_counter() - start
    hetero = heterogeneous(quick)
    timings["heterogeneous_s"] = time.perf_counter() - start - sum(timings.values())
    accuracy = parallel_map(_accuracy_task, [(hw, quick) for hw in HARDWARE])
    timings["accuracy_s"] = time.perf_counter() - start - sum(timings.values())
    zero = zero_config(quick)
    timings["zero_config_s"] = time.perf_counter() - start - sum(timings.values())
    figures: dict[str, Any] = headline(homo, hetero)
    figures["model_r2"] = {row["hardware"]: row["r2"] for row in accuracy}
    figures["zero_config_converge_s"] = zero["converge_s"]
    figures["settings"] = [
        "homogeneous 8x H100, heterogeneous H100 + A100-80G + A6000 TP2 + A6000; Llama-3-8B, vidur stack",
        f"workloads {', '.join(homo)}; loads {[row['load'] for row in next(iter(homo.values()))['loads']]}"
        " x burst saturation of round-robin+chunked-fcfs",
        "SLOs: flowgpt TPOT 12 ms; summarization TTFT 2 s; coding, sharegpt, azure-conv TTFT 1 s + TPOT 30 ms",
        f"{'quick' if quick else 'full'} run; noise 5%; model refit every 0.25 s of simulated time",
    ]
    summary = {key: value for key, value in figures.items() if key != "settings"}
    summary.update({f"wall_{key}": value for key, value in timings.items()})
    summary["model_r2"] = ", ".join(f"{hw} {r2:.3f}" for hw, r2 in figures["model_r2"].items())
    print_figures("nexus", summary)
    if not quick:
        from slosched.bench.nexus_report import write_report

        write_report(RESULTS_DIR, homo, hetero, accuracy, zero, figures)
    return figures
