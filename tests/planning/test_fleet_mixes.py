"""Two-type fleets (``planning/fleet_mixes.py``): the candidates, the search's order and skips, and a mix
found where it is the cheapest fleet."""

from __future__ import annotations

import pytest
from tests.planning.test_fleet import GPUS, TINY
from tests.planning.test_sweep import SMALL

from slosched.planning.fleet import search_fleet
from slosched.planning.fleet_mixes import MixSearch, MixUnit, mix_candidates
from slosched.planning.fleet_rows import FleetType, MixRow, parts_cost
from slosched.planning.prices import Prices
from slosched.planning.probe import Probe
from slosched.scenario.config import parse_scenario

FAST = FleetType("A100-40G", 1, 1.3, roofline_rps=13.0, fits=True)
CHEAP = FleetType("A40", 1, 0.7, roofline_rps=6.0, fits=True)
CHEAP_TP2 = FleetType("A40", 2, 0.7, roofline_rps=12.0, fits=True)
NO_FIT = FleetType("A6000", 1, 0.8, roofline_rps=4.0, fits=False)


def test_candidates_are_two_gpus_cheaper_than_the_bound_and_fast_enough_by_the_roofline() -> None:
    found = mix_candidates([FAST, CHEAP, CHEAP_TP2, NO_FIT], rate=10.0, below=2.6)
    costs = [parts_cost(parts) or 0.0 for parts in found]
    assert costs == sorted(costs) and all(cost < 2.6 for cost in costs)
    for parts in found:
        (first, a), (second, b) = parts
        assert first.gpu != second.gpu and NO_FIT not in (first, second) and a >= 1 and b >= 1
        assert a * first.roofline_rps + b * second.roofline_rps >= 10.0
    # 1 A100 + 1 A40 ($2.00, 19 jobs/s by the roofline) is in; 1 A100 + 2 A40 would cost $2.70: out.
    assert ((FAST, 1), (CHEAP, 1)) in found and ((FAST, 1), (CHEAP, 2)) not in found
    assert mix_candidates([FAST, CHEAP], rate=10.0, below=float("inf")) == []  # no one-type answer: no bound


def test_the_search_stops_at_the_first_mix_that_carries_and_skips_mixes_a_failure_implies() -> None:
    mixes = (((CHEAP, 2), (FAST, 1)), ((CHEAP, 1), (FAST, 1)), ((CHEAP, 3), (FAST, 1)), ((CHEAP, 4), (FAST, 1)))
    carries_from = 3  # A40s beside the A100

    def verdict(unit: MixUnit) -> Probe:
        return Probe(0.95) if mixes[unit[0]][0][1] >= carries_from else Probe(0.5)

    search = MixSearch(mixes, (0, 1), 0.9)
    results: dict[MixUnit, Probe] = {}
    while (unit := search.plan(results)) is not None:
        results[unit] = verdict(unit)
    probed, _ = search.replay(results)
    # (1, 1) is skipped (2 A40s + 1 A100 failed), (3, 1) carries, (4, 1) is never run.
    assert {index: ok for index, (ok, _) in probed.items()} == {0: False, 2: True}
    assert {unit[0] for unit in results} == {0, 2}


@pytest.mark.parametrize("mixes", [True, False])
def test_a_mix_cheaper_than_every_one_type_fleet_is_the_answer(mixes: bool) -> None:
    """On the small scenario at 3 jobs/s, one A100-80G and one A6000 ($2.60) carry it, one H100 ($2.99)
    is the cheapest fleet of one type."""
    scenario = parse_scenario(SMALL)
    found = search_fleet(scenario, 3.0, 0.9, "least-tokens+chunked-fcfs", TINY, Prices(), GPUS, [1], 1, mixes)
    assert found.answer is not None and found.answer.capacity is not None
    assert found.answer.capacity.median >= 3.0
    if mixes:
        assert isinstance(found.answer, MixRow)
        assert [(kind.gpu, count) for kind, count in found.answer.parts] == [("A100-80G", 1), ("A6000", 1)]
    else:
        assert not found.mixes and [(kind.gpu, count) for kind, count in found.answer.parts] == [("H100", 1)]
