"""The count search of ``sweep --search`` (``planning/fleet_counts.py``) on made-up verdicts, run as it is
run: through ``planning/speculate.py``, alone and on worker processes."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from slosched.planning.fleet_counts import CountSearch, Unit
from slosched.planning.fleet_rows import FleetType
from slosched.planning.probe import Probe
from slosched.planning.speculate import speculate

# Three types: the count from which each carries the rate, and its price per instance.
KINDS = (
    FleetType("A40", 1, 0.7, roofline_rps=5.0, fits=True),  # carries from 11 instances: $7.70
    FleetType("A100-40G", 1, 1.3, roofline_rps=10.0, fits=True),  # from 2: $2.60, the answer
    FleetType("H100", 1, 2.99, roofline_rps=20.0, fits=True),  # from 1: $2.99
)
CARRIES_FROM = {"A40": 11, "A100-40G": 2, "H100": 1}
SEEDS = (0, 1)


def _verdict(unit: Unit) -> Probe:
    """Made up: a count carries from its type's threshold on; seed 1 fails one count more (noise)."""
    index, count, seed = unit
    threshold = CARRIES_FROM[KINDS[index].gpu] + (1 if seed == 1 and KINDS[index].gpu == "A40" else 0)
    return Probe(0.95) if count >= threshold else Probe(0.5)


def _search() -> CountSearch:
    return CountSearch(KINDS, tuple(kind.floor(10.0) for kind in KINDS), SEEDS, 0.9)


@pytest.mark.parametrize("workers", [1, 2])
def test_the_cheapest_fleet_is_found_and_nothing_dearer_is_run(workers: int) -> None:
    search = _search()
    results = speculate(search.plan, lambda unit: unit, _verdict, Probe(0.0, exact=False), workers)
    states, following = search.replay(results)
    assert following is None
    assert [state.status for state in states] == ["dearer", "carries", "pruned"]
    assert states[1].pass_min == 2 and sorted(states[1].tried) == [1, 2]
    # Every count the search rests on costs no more than the answer ($2.60): no 11 x A40, no H100.
    consulted = {(index, count) for index, state in enumerate(states) for count in state.tried}
    assert all(KINDS[index].cost(count) <= 2.6 + 1e-9 for index, count in consulted)
    assert states[0].tried and max(states[0].tried) == 3  # A40 up to 3 ($2.10), never 4 ($2.80)
    assert not states[2].tried


def test_workers_change_the_wall_time_only() -> None:
    search = _search()
    alone = search.replay(speculate(search.plan, lambda unit: unit, _verdict, Probe(0.0, exact=False), 1))[0]
    many = search.replay(speculate(search.plan, lambda unit: unit, _verdict, Probe(0.0, exact=False), 2))[0]
    assert alone == many


def test_a_seed_that_fails_decides_a_two_seed_count() -> None:
    """A40 at 11: seed 0 passes, seed 1 fails; with two seeds both must pass (so the median capacity over
    the seeds is at least the rate), so 11 does not carry and 12 does."""
    search = CountSearch(KINDS[:1], (11,), SEEDS, 0.9)
    states, _ = search.replay(_complete(search))
    assert states[0].status == "carries" and states[0].pass_min == 12
    assert not states[0].tried[11].passes(0.9)


def _complete(search: CountSearch) -> Mapping[Unit, Probe]:
    results: dict[Unit, Probe] = {}
    while (unit := search.plan(results)) is not None:
        results[unit] = _verdict(unit)
    return results
