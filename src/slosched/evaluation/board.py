"""What a scoreboard found (``scoreboard.py`` runs it): each candidate's SLO capacity, the strongest baseline,
the overload figures, and the JSON every benchmark carries.

Beside attainment and goodput, every figure at a load (each overload load, and each capacity, the rate its
search measured to pass) carries the runs' figures in vLLM's serving-benchmark terms (``metrics/serving.py``:
``request_throughput``, ``output_throughput``, ``request_goodput``, ``p99_ttft_ms``, ...): each key's median
over seeds, as the attainment and goodput figures are.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from slosched.evaluation.capacity import Spread
from slosched.evaluation.formatting import ratio
from slosched.evaluation.judgement import JUDGEMENT_NAME
from slosched.evaluation.steady import SteadyCapacity, converged
from slosched.evaluation.workbench import Candidate, RunFigures
from slosched.metrics.serving import ServingStats, median_over_runs

TARGETS = (0.90, 0.95)

LoadRuns = Mapping[str, Mapping[float, Sequence[RunFigures]]]
"""Runs at loads, by label: ``runs[label][load]`` holds one ``RunFigures`` per seed."""


def serving_median(stats: Sequence[ServingStats | None]) -> dict[str, float]:
    """Each serving figure's median over runs (one per seed), under vLLM's keys."""
    return median_over_runs(None if each is None else each.to_json_dict() for each in stats)


@dataclass(slots=True)
class CapacityResult:
    """One candidate's SLO capacity at 90% and 95% over seeds; ``searches``: each seed's steady-state search
    (its job count, attainment at capacity); ``capacity_4x``: the 90% capacity at 4x the run length
    (convergence; the 95% one is not searched at 4x, as nothing reads it)."""

    candidate: Candidate
    capacity: dict[float, Spread]
    searches: tuple[SteadyCapacity, ...] = ()
    capacity_4x: dict[float, Spread] = field(default_factory=dict)

    @property
    def median_90(self) -> float:
        return self.capacity[TARGETS[0]].median

    @property
    def median_90_4x(self) -> float:
        return self.capacity_4x[TARGETS[0]].median if self.capacity_4x else math.nan

    @property
    def steady_state(self) -> bool:
        """The 90% capacity agrees with its value at 4x the run length within 5%."""
        return converged(self.median_90, self.median_90_4x)

    def run_json(self) -> dict[str, Any]:
        """How the search ran: job counts per seed, whether they were long enough, attainment at capacity,
        and the serving figures of the run at capacity (median over seeds)."""
        return {
            "num_jobs": [search.num_jobs for search in self.searches],
            "sized": all(search.sized for search in self.searches),
            "attainment_all": Spread.of([search.attainment[0] for search in self.searches]).as_json(),
            "attainment_second_half": Spread.of([search.attainment[1] for search in self.searches]).as_json(),
            "attainment_judged": Spread.of([search.judged for search in self.searches]).as_json(),
            "serving_at_capacity": serving_median([search.serving for search in self.searches]),
            # A self-tuned stack's block in the run at capacity, per seed (what the replays chose there).
            **({"tuned_at_capacity": [dict(s.tuned) for s in self.searches]} if self.tuned else {}),
        }

    @property
    def tuned(self) -> bool:
        return any(search.tuned for search in self.searches)


@dataclass(slots=True)
class Scoreboard:
    """Results of one workbench: capacities, the strongest baseline, overload figures."""

    workbench: str
    num_jobs: int
    seeds: tuple[int, ...]
    truth: tuple[str, ...] = ()  # the software stack(s) of the cluster's ground-truth models
    baselines: dict[str, CapacityResult] = field(default_factory=dict)
    others: dict[str, CapacityResult] = field(default_factory=dict)
    strongest: str = ""
    overload: dict[str, dict[float, tuple[Spread, Spread]]] = field(default_factory=dict)
    # Every baseline at every load: the strongest baseline *at a load* is chosen after the fact among them.
    overload_baselines: dict[str, dict[float, tuple[Spread, Spread]]] = field(default_factory=dict)
    # The serving figures (median over seeds) of every label run at every load, baselines included.
    overload_serving: dict[str, dict[float, dict[str, float]]] = field(default_factory=dict)
    # Baselines searched on the first seed only (``screening.py``): never the strongest.
    screened_out: list[str] = field(default_factory=list)
    # The runs an unfinished overload step has made, by (label, load, seed): a bench saved part-way resumes
    # without making them again (``overload.overload_runs``); emptied once the step is recorded.
    overload_done: dict[tuple[str, float, int], RunFigures] = field(default_factory=dict)

    def __setstate__(self, state: tuple[Any, dict[str, Any]]) -> None:
        # Pickled as (None, {slot: value}); a board saved before ``overload_done`` existed (a saved ``bench
        # stack`` part) lacks that slot: it had no step unfinished.
        _, slots = state
        for name, value in {"overload_done": {}, **slots}.items():
            object.__setattr__(self, name, value)

    def record_overload(self, runs: LoadRuns, shown: Sequence[str] | None = None) -> None:
        """Add the runs at loads: (attainment, goodput) spreads of the ``shown`` labels (default: all) to
        ``overload``, of every baseline among them to ``overload_baselines``, and every label's serving
        figures to ``overload_serving``."""
        spreads = {label: {load: _load_spreads(seeds) for load, seeds in per.items()} for label, per in runs.items()}
        labels = list(runs) if shown is None else shown
        # Merged per label: runs at more loads (a saved board measured again at a new load) add to those kept.
        for label in labels:
            if label in spreads:
                self.overload.setdefault(label, {}).update(spreads[label])
        # The strongest at a load is chosen among the baselines run on every seed there (not screened out).
        full = max((len(seeds) for per in runs.values() for seeds in per.values()), default=0)
        for label in self.baselines:
            if label in spreads:
                kept = {load: spreads[label][load] for load, seeds in runs[label].items() if len(seeds) == full}
                self.overload_baselines.setdefault(label, {}).update(kept)
        for label, per_load in runs.items():
            serving = {load: serving_median([run.serving for run in seeds]) for load, seeds in per_load.items()}
            self.overload_serving.setdefault(label, {}).update(serving)

    def baselines_run_at(self, loads: Sequence[float]) -> bool:
        """Every baseline has its runs at every one of ``loads`` (at least on the first seed): a remeasure of the
        other rows may keep them (``overload.others_overload``)."""
        return bool(self.baselines) and all(
            load in self.overload_serving.get(label, {}) for label in self.baselines for load in loads
        )

    def runs_differ(self, label: str, runs: Mapping[float, Sequence[RunFigures]]) -> list[float]:
        """The loads where ``runs`` of ``label`` (one per seed) give other spreads than the board holds for it."""
        held = self.overload_baselines.get(label, {})
        return [load for load, seeds in runs.items() if held.get(load) != _load_spreads(seeds)]

    def kept_run_differs(self, label: str, load: float, run: RunFigures) -> bool:
        """Whether ``run`` (``label``'s on the first seed at ``load``) contradicts the figures the board holds of
        that run: its attainment and goodput where it ran on every seed, its serving figures where only there."""
        spreads = self.overload_baselines.get(label, {}).get(load)
        if spreads is not None:
            return (spreads[0].values[:1], spreads[1].values[:1]) != ((run.attainment,), (run.goodput_jobs_per_s,))
        held = self.overload_serving.get(label, {}).get(load, {})
        # JSON text compares NaN (a figure no request had) as equal to itself.
        return json.dumps(held, sort_keys=True) != json.dumps(serving_median([run.serving]), sort_keys=True)

    def forget_overload(self, keep: Sequence[str] = ()) -> None:
        """Drop the overload figures of every label but ``keep``'s (runs about to be measured again)."""
        self.overload = {label: per for label, per in self.overload.items() if label in keep}
        self.overload_baselines = {label: per for label, per in self.overload_baselines.items() if label in keep}
        self.overload_serving = {label: per for label, per in self.overload_serving.items() if label in keep}

    def strongest_at(self, load: float) -> tuple[str, float]:
        """(label, median goodput) of the baseline with the highest median goodput at ``load`` (the
        strongest-by-capacity one when the per-load runs are missing)."""
        runs = {label: per_load[load] for label, per_load in self.overload_baselines.items() if load in per_load}
        if not runs and self.strongest in self.overload and load in self.overload[self.strongest]:
            runs = {self.strongest: self.overload[self.strongest][load]}
        if not runs:
            return self.strongest, math.nan
        label = max(runs, key=lambda name: _finite_or_minus(runs[name][1].median))
        return label, runs[label][1].median

    def serving_at(self, label: str, load: float) -> dict[str, float]:
        """The serving figures of ``label`` at ``load`` (median over seeds; empty where it did not run)."""
        return self.overload_serving.get(label, {}).get(load, {})

    def converged(self) -> dict[str, CapacityResult]:
        """The results that carry a capacity at 4x the run length, by label."""
        return {label: result for label, result in {**self.baselines, **self.others}.items() if result.capacity_4x}

    @property
    def steady_state(self) -> bool:
        """Every capacity measured at 4x the run length agrees with it within 5% (False when none was)."""
        results = self.converged()
        return bool(results) and all(result.steady_state for result in results.values())

    def capacity_of(self, label: str) -> float:
        result = self.baselines.get(label) or self.others[label]
        return result.median_90

    def ratio(self, label: str, versus: str | None = None) -> float:
        """Median 90% capacity of ``label`` over ``versus`` (default: the strongest baseline)."""
        base = self.capacity_of(versus or self.strongest)
        return self.capacity_of(label) / base if base > 0 else math.nan

    def as_json(self, paper_policy: str | None = None, paper_baseline: str | None = None) -> dict[str, Any]:
        """The fields every benchmark's JSON carries (issue 13, item 4)."""
        every = {**self.baselines, **self.others}
        figures: dict[str, Any] = {
            "workbench": self.workbench,
            "num_jobs": self.num_jobs,
            "seeds": list(self.seeds),
            "baselines": {label: result.median_90 for label, result in self.baselines.items()},
            "screened_out": list(self.screened_out),
            "strongest_baseline": self.strongest,
            "capacity": {
                label: {f"slo_{round(100 * t)}": spread.as_json() for t, spread in result.capacity.items()}
                for label, result in every.items()
            },
            "capacity_4x": {label: result.median_90_4x for label, result in self.converged().items()},
            "steady_state_by_policy": {label: result.steady_state for label, result in self.converged().items()},
            "steady_state": self.steady_state,
            "runs": {label: result.run_json() for label, result in every.items()},
            "truth": list(self.truth),
            "judgement": JUDGEMENT_NAME,  # how each run's attainment was judged (``judgement.py``)
            "overload": {
                label: {f"{load}x": self._load_json(label, load, att, good) for load, (att, good) in per_load.items()}
                for label, per_load in self.overload.items()
            },
        }
        loads = sorted({load for per_load in self.overload.values() for load in per_load})
        figures["strongest_per_load"] = {f"{load}x": self._strongest_json(load) for load in loads}
        if paper_policy is not None:
            figures["paper_policy"] = paper_policy
            figures["ratio_vs_strongest"] = self.ratio(paper_policy)
            ours = self.overload.get(paper_policy, {})
            figures["goodput_ratio_vs_strongest_per_load"] = {
                f"{load}x": ratio(ours[load][1].median, self.strongest_at(load)[1]) for load in loads if load in ours
            }
        if paper_policy is not None and paper_baseline is not None:
            figures["paper_baseline"] = paper_baseline
            figures["ratio_vs_paper_baseline"] = self.ratio(paper_policy, paper_baseline)
        return figures

    def _load_json(self, label: str, load: float, attainment: Spread, goodput: Spread) -> dict[str, Any]:
        return {
            "attainment": attainment.as_json(),
            "goodput_jobs_per_s": goodput.as_json(),
            "serving": self.serving_at(label, load),
        }

    def _strongest_json(self, load: float) -> dict[str, Any]:
        label, goodput = self.strongest_at(load)
        return {"label": label, "goodput_jobs_per_s": goodput, "serving": self.serving_at(label, load)}


def _load_spreads(runs: Sequence[RunFigures]) -> tuple[Spread, Spread]:
    """(attainment, goodput) over the seeds' runs at one load."""
    return Spread.of([run.attainment for run in runs]), Spread.of([run.goodput_jobs_per_s for run in runs])


def _finite_or_minus(value: float) -> float:
    return value if math.isfinite(value) else -math.inf


Checkpoint = Callable[[Scoreboard], None]
"""Handed the board after each step of ``scoreboard.evaluate`` (a long bench saves it, to resume from it)."""
