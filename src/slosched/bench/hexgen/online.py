"""Online alpha tuning inside a simulated run, as the gateway does it live (``serve/tuning.py``).

The run starts at alpha = 0. One window after each ``window_s`` window closed (so late finishers land in
it), the jobs that arrived in it and finished are recorded (realized stages, the deadline the run judged
them by, per-stage finish times for the backlog of later windows) and fed to ``AlphaController``: the first
window is tuned; every later one is compared with the previous window by the one-sided t-test and retuned
when p < 0.01. The new alpha is set on the router between two routing decisions.

``drift_trace`` makes the traffic change mid-run (natural CHESS traces, then hard ones with up to ten
revision rounds), the situation the t-test exists for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from functools import partial

import slosched.bench.hexgen.setup as setup
from slosched.core.instance import InstanceSpec
from slosched.core.job import JobSpec
from slosched.core.records import RunResult
from slosched.core.request import Outcome
from slosched.sim.cluster import ClusterSim
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyPair, PolicyParams
from slosched.tuning.alpha import AlphaTuner
from slosched.tuning.window import AlphaController, Window, WindowRecorder
from slosched.workloads.generators import make_workload

POLICY = "workload-balanced+urgency"


@dataclass(slots=True, frozen=True)
class WindowStep:
    """One closed window: its start, jobs, mean latency, the t-test's p (None for the first), the alpha
    in force afterwards, whether it was retuned, and the backlog size the replay started from."""

    start_s: float
    num_jobs: int
    mean_latency_s: float
    p_value: float | None
    alpha: float
    retuned: bool
    num_backlog: int


@dataclass(slots=True)
class OnlineRun:
    result: RunResult
    steps: list[WindowStep] = field(default_factory=list)

    @property
    def num_retunes(self) -> int:
        return sum(step.retuned for step in self.steps)


def drift_trace(rate: float, num_jobs: int, seed: int) -> list[JobSpec]:
    """Poisson CHESS jobs at ``rate``: the first half natural, the second half hard (ids stay unique)."""
    arrivals = {"process": "poisson", "rate": rate}
    natural = make_workload("text2sql-chess", arrivals, num_jobs, setup.TRACES["natural"], seed=seed)
    hard_params = {**setup.TRACES["hard"], "id_prefix": "hard"}
    hard = make_workload("text2sql-chess", arrivals, num_jobs, hard_params, seed=seed)
    switch_s = natural[num_jobs // 2].arrival_s
    return [job for job in natural if job.arrival_s < switch_s] + [job for job in hard if job.arrival_s >= switch_s]


def finished_window(sim: ClusterSim, index: int, window_s: float) -> Window:
    """Window ``index`` as a live recorder would hold it now (only jobs that finished so far)."""
    # The bench reads the simulator's records mid-run; the gateway records jobs as they finish.
    stage_finish: dict[str, dict[str, float]] = {}
    for call in sim._requests:
        if call.outcome is Outcome.COMPLETED:
            stages = stage_finish.setdefault(call.job_id, {})
            stages[call.stage] = max(stages.get(call.stage, 0.0), call.finish_s)
    recorder = WindowRecorder(window_s)
    for state in sim._jobs:
        record = state.record
        if not state.done or record.outcome is not Outcome.COMPLETED:
            continue
        slo = record.slo_s if math.isfinite(record.slo_s) else None
        recorder.record(replace(state.spec, slo_s=slo), record.latency_s, stage_finish.get(record.id, {}))
    windows = {round(window.start_s / window_s): window for window in recorder.windows()}
    return windows.get(index, Window(index * window_s))


def run_online(
    instances: Sequence[InstanceSpec],
    jobs: Sequence[JobSpec],
    options: SimOptions,
    tuner: AlphaTuner,
    window_s: float = 100.0,
    seed: int = 0,
    history: Sequence[JobSpec] | None = None,
) -> OnlineRun:
    """``workload-balanced+urgency`` with alpha tuned online (first window, then on t-test drift);
    ``history``: past traffic for the leak-free deadlines."""
    params = PolicyParams(router={"workload-balanced": {"alpha": 0.0}})
    pair = PolicyPair.parse(POLICY)
    sim = setup.build_sim(instances, jobs, pair, seed, options, params, "stage-budget", False, history)
    controller = AlphaController(tuner)
    steps: list[WindowStep] = []

    def close(index: int, _: object = None) -> None:
        window = finished_window(sim, index, window_s)
        step = controller.on_window_closed(window)
        sim.router.alpha = step.alpha  # type: ignore[attr-defined]
        latency = sum(window.latencies_s) / len(window.latencies_s) if window.latencies_s else math.nan
        steps.append(
            WindowStep(
                window.start_s,
                len(window.jobs),
                latency,
                step.p_value,
                step.alpha,
                step.retuned is not None,
                len(window.backlog),
            )
        )

    last_arrival = max(job.arrival_s for job in jobs)
    for index in range(math.floor(last_arrival / window_s) + 1):
        sim.kernel.schedule((index + 2) * window_s, partial(close, index))
    result = sim.run(jobs)
    result.seed = seed
    return OnlineRun(result, steps)
