"""The router's book of TPOT SLOs per instance: entered when routed, struck off when reported finished,
lapsed when never reported."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from slosched.core.request import Request
from slosched.policies.cluster.residents import LINGER, TpotResidents


def _call(name: str, tpot: float | None, ttft: float | None = None, predicted: float = 100.0) -> Request:
    return Request(
        name,
        f"job-{name}",
        "s",
        "t",
        100,
        256,
        0.0,
        0.0,
        predicted_output_tokens=predicted,
        tpot_slo_s=tpot,
        ttft_slo_s=ttft,
    )


def test_tightest_is_the_smallest_tpot_slo_of_unfinished_calls_on_that_instance() -> None:
    book = TpotResidents()
    assert book.tightest_s(0, 0.0) == math.inf
    book.on_routed(_call("loose", 0.03), 0, 0.0)
    book.on_routed(_call("tight", 0.012), 0, 0.0)
    book.on_routed(_call("other", 0.005), 1, 0.0)
    book.on_routed(_call("none", None), 0, 0.0)  # no TPOT SLO: nothing to protect
    assert book.tightest_s(0, 1.0) == 0.012 and book.tightest_s(1, 1.0) == 0.005 and len(book) == 3
    book.on_finished(_call("tight", 0.012), 0)
    assert book.tightest_s(0, 1.0) == 0.03
    book.on_finished(_call("tight", 0.012), 0)  # a repeated report is harmless
    book.on_finished(_call("loose", 0.03), 0)
    assert book.tightest_s(0, 1.0) == math.inf


def test_an_unreported_call_lapses_after_linger_times_its_longest_slo_meeting_duration() -> None:
    book = TpotResidents()
    book.on_routed(_call("lost", 0.01, ttft=1.0, predicted=100.0), 2, 5.0)
    longest = 1.0 + 100 * 0.01
    assert book.tightest_s(2, 5.0 + LINGER * longest - 1e-6) == 0.01
    assert book.tightest_s(2, 5.0 + LINGER * longest + 1e-6) == math.inf
    assert len(book) == 0  # dropped from the book, not only skipped


@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.005, 0.012, 0.03]), st.booleans()), max_size=40))
def test_tightest_matches_the_calls_still_open(events: list[tuple[int, float, bool]]) -> None:
    book = TpotResidents()
    open_calls: dict[int, list[float]] = {}
    for number, (index, tpot, finishes) in enumerate(events):
        request = _call(f"r{number}", tpot)
        book.on_routed(request, index, 0.0)
        if finishes:
            book.on_finished(request, index)
        else:
            open_calls.setdefault(index, []).append(tpot)
    for index in range(4):
        assert book.tightest_s(index, 0.0) == min(open_calls.get(index, [math.inf]))
