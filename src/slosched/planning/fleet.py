"""``slosched sweep --search``: the cheapest fleet (GPU type x tensor parallelism x instance count) that
carries a rate at a target attainment, for one scenario's workload, model and policy.

Like Vidur's configuration search, fleets are homogeneous: one instance type (GPU, TP) repeated. The
scenario's first instance group is the template (model, engine limits, software stack); its GPU and TP
vary, and KV memory is derived for each GPU. The SLO stays the scenario's: scaled deadlines refer to the
fastest instance of the scenario's own cluster (``SimOptions.slo_reference``), so a fleet of slow GPUs is
not judged against deadlines its slowness loosened.

The roofline bounds the search (``fleet_types``), ``planning/fleet_counts.py`` runs it:

- **Fit.** A type whose KV cache beside the weights holds fewer tokens than ``max_model_len`` is
  skipped (vLLM refuses to start there).
- **Floor.** Every token a job computes (its calls' uncached prompt tokens, the shared prefix assumed
  cached, and its output tokens) costs at least the dense projections' compute per token on the GPU; so
  one instance carries at most ``roofline_rps`` jobs/s and fewer than ``ceil(rate / roofline_rps)``
  instances cannot carry the rate. A type's count search starts at that count, not at 1.
- **Cheapest first.** One search over all types probes the cheapest open count first; nothing costing more
  than the cheapest fleet found is run (``pruned``, ``dearer``).

Each count's verdict is ``planning/probe.py``'s (more than half of the seeds pass; runs sized for the rate,
cut short once their misses decide them). The cheapest fleets found (``measure``, default 3) then get their
SLO capacity from the same runs, so a fleet that carries the rate has a capacity of at least it. The answer
is the cheapest fleet (ties: the larger capacity).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from slosched.core.errors import ConfigError
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.perf.hardware import gpu_names, model_facts
from slosched.perf.roofline import CALIBRATION, RooflineModel
from slosched.planning.fleet_counts import FleetProbe, measure_capacity, search_counts
from slosched.planning.fleet_mixes import search_mixes
from slosched.planning.fleet_rows import FleetRow, FleetSearch, FleetType, MixRow
from slosched.planning.prices import Prices
from slosched.planning.sweep import SweepSettings
from slosched.planning.workload import ScenarioJobs, candidates_of, instances_with_counts
from slosched.scenario.config import Scenario

TP_CHOICES = (1, 2, 4, 8)
# A per-token floor far past any step size: the dense projections' compute per token, nothing amortised.
_FLOOR_TOKENS = 1 << 20


def tokens_per_job(jobs: Sequence[JobSpec]) -> float:
    """Mean tokens a job makes its instance compute at the least: each call's prompt past its shared prefix
    (at least one token) and its output."""
    if not jobs:
        return 1.0
    total = 0
    for job in jobs:
        for stage in job.stages:
            for call in stage.calls:
                total += max(1, call.input_tokens - call.prefix_tokens) + call.output_tokens
    return max(1.0, total / len(jobs))


def fleet_types(
    template: InstanceSpec, gpus: Sequence[str], tps: Sequence[int] | None, prices: Prices, job_tokens: float
) -> list[FleetType]:
    """Every (GPU, TP) the model shards onto. Without ``tps``: per GPU, the smallest TP that fits and twice
    it (more rarely pays for its GPUs; ``--tp`` asks for others)."""
    heads = model_facts(template.model).heads
    out: list[FleetType] = []
    for gpu in gpus:
        kinds = []
        for tp in tps or TP_CHOICES:
            if heads % tp:
                continue
            roofline = RooflineModel.build(gpu, template.model, tp, template.stack)
            blocks = roofline.num_kv_blocks(template.gpu_memory_utilization, template.block_size)
            per_token_s = roofline.linear_time_s(_FLOOR_TOKENS) / _FLOOR_TOKENS
            fits = blocks * template.block_size >= template.max_model_len
            kinds.append(FleetType(gpu, tp, prices.per_gpu_hour(gpu), 1.0 / (job_tokens * per_token_s), fits))
        if tps is None:
            first = next((k.tp for k in kinds if k.fits), None)
            kinds = [k for k in kinds if first is None or k.tp in (first, 2 * first)][:2]
        out.extend(kinds)
    return out


def calibrated_gpus(stack: str) -> list[str]:
    """The default candidates: GPUs with fitted efficiencies of their own, or with ``stack``'s own scales
    fitted to steps measured on them (H200 on ``vllm-v1``). The others (B200, L4, MI300X; H200 on the older
    stacks) borrow another GPU's (``efficiency_like``), an assumption a purchase should not rest on unasked:
    ``--gpus`` names them explicitly."""
    profile = CALIBRATION.stacks.get(stack)
    measured = profile.memory_scale if profile is not None else {}
    return [name for name in gpu_names() if name in CALIBRATION.gpus or name in measured]


def search_fleet(
    scenario: Scenario,
    rate: float,
    target: float,
    policy: str,
    settings: SweepSettings,
    prices: Prices,
    gpus: Sequence[str] | None = None,
    tps: Sequence[int] | None = None,
    measure: int = 3,
    mixes: bool = True,
) -> FleetSearch:
    """The cheapest fleet, of one instance type or (``mixes``) of two GPU types, that carries ``rate``
    jobs/s at ``target`` (module docstring); the SLO capacity of the ``measure`` cheapest fleets found."""
    if not rate > 0:
        raise ConfigError("--rate", f"must be > 0 jobs/s, got {rate}")
    if measure < 0:
        raise ConfigError("--measure", f"must be >= 0, got {measure}")
    reference = tuple(instances_with_counts(scenario, {}))
    template = reference[0]
    jobs = ScenarioJobs(scenario)(settings.num_jobs, settings.seeds[0])
    kinds = fleet_types(template, gpus or calibrated_gpus(template.stack), tps, prices, tokens_per_job(jobs))
    rows = [FleetRow(kind, kind.floor(rate)) for kind in kinds]
    for row in rows:
        if not row.type.fits:
            row.status = "no fit"
        elif row.type.price_per_gpu_hour is None:
            row.status = "no price"
    found = FleetSearch(rate, target, policy, template.model, rows)
    searched = [row for row in rows if row.status == "pending"]
    if not searched:
        return found
    (candidate,) = candidates_of(scenario, [policy])
    probe_of = FleetProbe(scenario, (), candidate, settings, reference, settings.seeds[0], rate, target)
    carried: list[tuple[FleetRow | MixRow, dict[int, float]]] = [
        (row, known) for row, known in zip(searched, search_counts(searched, probe_of), strict=True) if known
    ]
    if mixes:
        best = min((row.cost_per_hour or 0.0 for row, _ in carried), default=math.inf)
        found.mixes, known, found.warnings = search_mixes(kinds, best, probe_of)
        carried += [(row, known) for row in found.mixes if row.status == "carries"]
    # Capacity searches cost several count searches' worth of runs: the cheapest few fleets only.
    carried.sort(key=lambda item: item[0].cost_per_hour or 0.0)
    measure_capacity(carried[:measure], probe_of)
    return found
