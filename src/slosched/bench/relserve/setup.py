"""RelServe bench set-up: settings, workbenches and the candidates it scores (the oracle runs on the shared path).

Settings follow the paper (OPT-13B on 1x A100-40G and Llama-2-70B on 4x A100-40G TP4, one engine each;
``MORE_SETTINGS``: Qwen2.5-32B TP2, and a two-engine OPT-13B cluster where the router matters). On one engine
every router makes the same (only) choice, so there the router sweep collapses to the reference router and
the engine sweep (static token budgets and max concurrencies, one step past the grid's edge where the best
lies on it) is the whole baseline search.

Candidates beside the scoreboard's baselines, all behind ``least-tokens`` (the reference router, so the
engine is the only difference): RelServe's engine ``relserve`` (the paper policy), the paper's own
baselines ``fcfs`` (vLLM, prefill-first), ``chunked-fcfs`` at the engine's default budget (Sarathi) and
``static-priority`` with job policy ``static-sum`` (vLLM-SP), the arranger with the predicted output
instead of the output limit, and an ORACLE ``relserve`` whose output-length predictor reads true lengths.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace

from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.evaluation.baseline_plan import REFERENCE_ROUTER, BaselinePlan
from slosched.evaluation.workbench import Candidate, Workbench, simulate_candidate
from slosched.sim.options import SimOptions
from slosched.workloads.generators import make_workload

# A paper reproduction: the 2023 vLLM engine the paper measured on (Splitwise's fit), named in its report.
PAPER_STACK = "splitwise"

# SLO = scale x the client's estimate of the relQuery's no-contention latency (sim/deadlines.py: its
# longest row with the history's mean output of its template). A relQuery's rows share the engine, so even
# alone a 100-row relQuery takes ~10x that estimate: the scale leaves room for it.
SLO_SCALE = 15.0
PAPER_POLICY = f"{REFERENCE_ROUTER}+relserve"
PAPER_BASELINES = {
    "fcfs": "vLLM (fcfs)",
    "chunked-fcfs": "Sarathi (chunked-fcfs)",
    "static-priority": "vLLM-SP (static-priority)",
}
PAPER_BASELINE = f"{REFERENCE_ROUTER}+fcfs"  # the paper's headline comparison (vLLM)
PREDICTED_OL = f"{PAPER_POLICY}[output_length=predicted]"
ORACLE = f"{PAPER_POLICY} (oracle)"


@dataclass(slots=True, frozen=True)
class Setting:
    """One model on one or more engines, with one relQuery dataset (``mixed``: drawn per relQuery)."""

    model: str
    tp: int
    dataset: str
    num_engines: int = 1
    memory_utilization: float = 0.9

    @property
    def label(self) -> str:
        engines = f"{self.num_engines}x " if self.num_engines > 1 else ""
        return f"{engines}{self.model} TP{self.tp} / {self.dataset}"

    @property
    def gpus(self) -> str:
        per_engine = f"{self.tp}x A100-40G" + (f" (TP{self.tp})" if self.tp > 1 else "")
        return f"{self.num_engines} engines of {per_engine}" if self.num_engines > 1 else per_engine


FULL_SETTINGS = (
    Setting("OPT-13B", 1, "amazon"),
    Setting("Llama-2-70B", 4, "mixed", memory_utilization=0.95),  # at 0.9 bf16 weights leave no KV cache
)
QUICK_SETTINGS = FULL_SETTINGS[:1]
# Not in the default runs (time): the middle model, and a two-engine cluster where routers differ.
MORE_SETTINGS = (Setting("Qwen2.5-32B", 2, "mixed"), Setting("OPT-13B", 1, "mixed", num_engines=2))


def instances(setting: Setting) -> tuple[InstanceSpec, ...]:
    base = InstanceSpec(
        name="",
        gpu="A100-40G",
        model=setting.model,
        stack=PAPER_STACK,
        tp=setting.tp,
        max_running=256,
        max_batched_tokens=2048,
        max_model_len=4096,
        gpu_memory_utilization=setting.memory_utilization,
    )
    return tuple(replace(base, name=f"{setting.model}-tp{setting.tp}-{i}") for i in range(setting.num_engines))


def relquery_jobs(dataset: str, num_jobs: int, seed: int) -> list[JobSpec]:
    """``num_jobs`` relQueries at rate 1.0 (mixed query types, 1-100 rows, Poisson arrivals)."""
    return make_workload("relquery", {"process": "poisson", "rate": 1.0}, num_jobs, {"dataset": dataset}, seed=seed)


def workbench(setting: Setting, num_jobs: int, num_warmup_jobs: int, work_tolerance: float | None = None) -> Workbench:
    """``work_tolerance``: the work rule's (``evaluation/sizing.py``), on in the full form."""
    return Workbench(
        name=setting.label,
        instances=instances(setting),
        jobs=functools.partial(relquery_jobs, setting.dataset),
        num_jobs=num_jobs,
        options=SimOptions(noise_sigma=0.05, slo_scale=SLO_SCALE),
        num_warmup_jobs=num_warmup_jobs,
        run_fn=run_candidate,
        work_tolerance=work_tolerance,
    )


def baseline_plan(setting: Setting, quick: bool) -> BaselinePlan:
    """The module's sweep; one engine: the reference router only; several: every router with a shorter
    budget and cap sweep (each router runs twice, so the full sweep would double the run time)."""
    if setting.num_engines == 1:
        return replace(BaselinePlan.quick() if quick else BaselinePlan(), routers=(REFERENCE_ROUTER,))
    return BaselinePlan.quick() if quick else BaselinePlan(token_budgets=(512, 1024, 2048), caps=(32, 128))


def paper_candidates(extended: bool) -> list[Candidate]:
    """RelServe, the paper's baselines, and (``extended``) the predicted-OL variant and the oracle."""
    found = [Candidate.of(PAPER_POLICY)]
    for engine in PAPER_BASELINES:
        job_policy = "static-sum" if engine == "static-priority" else "deadline"
        found.append(Candidate.of(f"{REFERENCE_ROUTER}+{engine}", job_policy=job_policy))
    if extended:
        found.append(Candidate.of(PAPER_POLICY, {"output_length": "predicted"}))
        found.append(replace(Candidate.of(PAPER_POLICY), label=ORACLE, oracle=True))
    return found


# The workbench's shared run path (an oracle candidate gets the predictor of true lengths); kept under this
# name for the benches that import it from here.
run_candidate = simulate_candidate
