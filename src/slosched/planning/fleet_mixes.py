"""Fleets of two GPU types for ``sweep --search``: can a mix carry the rate for less than the cheapest
fleet of one type?

A few instances of a fast GPU and one of a cheap one can cost less than one more fast instance. After the
count search has found the cheapest one-type fleet (``planning/fleet_counts.py``), every fleet of two
different GPUs (any TP each, at least one instance of each) that costs less and whose summed roofline bound
reaches the rate is a candidate. Candidates are probed cheapest first with ``planning/probe.py``'s verdict
(the same runs and rule as a count), so the first that carries is the cheapest mix, and the search stops
there. A candidate with no more instances of each type than a mix that failed is not run: it fails too
(attainment grows with the instances, as the count search assumes). At most ``MAX_MIXES`` candidates are
probed; where more exist and none of those carried, a warning says so.

The router spreads jobs over the mix as it does over any heterogeneous cluster (the demo's is one), and the
SLO stays the scenario's (``SimOptions.slo_reference``), as for one-type fleets.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from slosched.planning.fleet_counts import FleetProbe, fleet_probe
from slosched.planning.fleet_rows import FleetType, MixRow, Parts, parts_cost
from slosched.planning.probe import Probe, lower_median, seeds_verdict
from slosched.planning.speculate import speculate

MAX_MIXES = 24
MixUnit = tuple[int, int]  # (candidate index, seed)
_EPSILON = 1e-9


def mix_candidates(kinds: Sequence[FleetType], rate: float, below: float) -> list[Parts]:
    """Every two-GPU fleet costing less than ``below`` whose roofline bound reaches ``rate``, cheapest first
    (ties: fewer instances, then the order of ``kinds``)."""
    priced = [kind for kind in kinds if kind.fits and (kind.price_per_gpu_hour or 0.0) > 0]
    if not math.isfinite(below):
        return []
    found: list[tuple[float, int, int, Parts]] = []
    for i, first in enumerate(priced):
        for second in priced[i + 1 :]:
            if first.gpu == second.gpu:
                continue
            for a in range(1, _most(first, below - _unit(second)) + 1):
                for b in range(1, _most(second, below - a * _unit(first)) + 1):
                    if a * first.roofline_rps + b * second.roofline_rps >= rate - _EPSILON:
                        parts = ((first, a), (second, b))
                        found.append((parts_cost(parts) or 0.0, a + b, len(found), parts))
    return [parts for *_, parts in sorted(found, key=lambda item: item[:3])]


def _unit(kind: FleetType) -> float:
    return kind.tp * (kind.price_per_gpu_hour or 0.0)


def _most(kind: FleetType, budget: float) -> int:
    """The most instances of ``kind`` costing less than ``budget``."""
    return max(0, math.ceil(budget / _unit(kind) - _EPSILON) - 1) if budget > 0 else 0


def _within(parts: Parts, larger: Parts) -> bool:
    """Whether ``parts`` has the types of ``larger`` and no more instances of any."""
    return [kind for kind, _ in parts] == [kind for kind, _ in larger] and all(
        count <= other for (_, count), (_, other) in zip(parts, larger, strict=True)
    )


@dataclass(slots=True, frozen=True)
class MixSearch:
    mixes: tuple[Parts, ...]
    seeds: tuple[int, ...]
    target: float

    def plan(self, results: Mapping[MixUnit, Probe]) -> MixUnit | None:
        return self.replay(results)[1]

    def replay(self, results: Mapping[MixUnit, Probe]) -> tuple[dict[int, tuple[bool, Probe]], MixUnit | None]:
        """Each probed candidate's (verdict, figure) by index, and the run needed next (None: done)."""
        probed: dict[int, tuple[bool, Probe]] = {}
        for index, parts in enumerate(self.mixes):
            if any(_within(parts, self.mixes[other]) for other, (ok, _) in probed.items() if not ok):
                continue  # a larger fleet of the same types failed
            runs: list[Probe] = []
            verdict = None
            for seed in self.seeds:
                if (index, seed) not in results:
                    return probed, (index, seed)
                runs.append(results[index, seed])
                verdict = seeds_verdict(runs, len(self.seeds), self.target)
                if verdict is not None:
                    break
            probed[index] = (bool(verdict), lower_median(runs))
            if verdict:  # the cheapest mix that carries: every later candidate costs more
                break
        return probed, None


def search_mixes(
    kinds: Sequence[FleetType], below: float, probe_of: FleetProbe
) -> tuple[list[MixRow], dict[int, float], list[str]]:
    """The two-type fleets probed (cheapest first, until one carries), the figures by seed of the one that
    carries (for its capacity search), and warnings."""
    candidates = mix_candidates(kinds, probe_of.rate, below)
    settings = probe_of.settings
    search = MixSearch(tuple(candidates[:MAX_MIXES]), settings.seeds, probe_of.target)

    def task_of(unit: MixUnit) -> FleetProbe:
        return replace(probe_of, parts=search.mixes[unit[0]], seed=unit[1])

    failing = Probe(0.0, exact=False)
    where = settings.ray_address
    results = speculate(search.plan, task_of, fleet_probe, failing, settings.workers, where, "fleet mixes")
    probed, _ = search.replay(results)
    rows = [
        MixRow(search.mixes[index], "carries" if ok else "not carried", figure.value, not figure.exact)
        for index, (ok, figure) in probed.items()
    ]
    known = {}
    for index, (ok, _) in probed.items():
        if ok:
            known = {seed: results[index, seed].value for seed in settings.seeds if (index, seed) in results}
    warnings = []
    if len(candidates) > MAX_MIXES and not any(row.status == "carries" for row in rows):
        warnings.append(
            f"fleet search: {len(candidates) - MAX_MIXES} two-type fleets costing less than the answer were "
            f"not tried (the {MAX_MIXES} cheapest were)"
        )
    return rows, known, warnings
