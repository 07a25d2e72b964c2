"""``policies.engine.static_priority_order``: shortest estimated service first, the estimate fixed at first
sight (a static key), a job-level priority winning when set."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from slosched.core.errors import ConfigError
from slosched.core.request import Request
from slosched.perf.output_length import HistoryOutputPredictor
from slosched.policies.engine.base import ORDERINGS
from slosched.policies.engine.ordering.static_priority import StaticPriorityOrdering, estimated_service_s
from slosched.policies.registry import PolicyContext
from tests.conftest import make_instance


class LinearPredictor:
    """``c0 + per_prefill * prefill tokens + per_decode * decode seqs`` (context ignored)."""

    def __init__(self, per_prefill: float = 0.001, per_decode: float = 0.02, c0: float = 0.01) -> None:
        self.per_prefill, self.per_decode, self.c0 = per_prefill, per_decode, c0

    def predict_s(self, prefill: int, prefill_ctx: int, decodes: int, decode_ctx: int) -> float:
        return self.c0 + self.per_prefill * prefill + self.per_decode * decodes


def seq(rid: str, prompt: int, predicted: float, arrival: float = 0.0, priority: float = 0.0) -> Any:
    request = Request(
        rid, "j", "s", "t", prompt, 256, arrival, arrival, predicted_output_tokens=predicted, priority=priority
    )
    return SimpleNamespace(request=request)


def engine(predictor: LinearPredictor | None = None) -> Any:
    return SimpleNamespace(step_predictor=predictor or LinearPredictor())


def test_estimate_is_prefill_plus_the_remaining_decode_steps() -> None:
    # prefill: 0.01 + 0.001 * 1000; each decode step: 0.01 + 0.02; the first token comes with the prefill.
    assert estimated_service_s(seq("a", 1000, 11.0), engine()) == pytest.approx(1.01 + 10 * 0.03)
    assert estimated_service_s(seq("b", 1000, 0.5), engine()) == pytest.approx(1.01)


def test_shortest_first_ties_by_arrival_then_id() -> None:
    ordering = StaticPriorityOrdering()
    assert ordering.static_keys and ordering.time_invariant
    seqs = [seq("long", 2000, 100.0), seq("short", 10, 2.0), seq("b", 500, 5.0, 1.0), seq("a", 500, 5.0, 1.0)]
    ranked = sorted(seqs, key=lambda s: ordering.key(s, engine()))
    assert [s.request.id for s in ranked] == ["short", "a", "b", "long"]


def test_keys_are_fixed_at_first_sight() -> None:
    ordering = StaticPriorityOrdering()
    one = seq("r", 1000, 10.0)
    first = ordering.key(one, engine())
    assert ordering.key(one, engine(LinearPredictor(per_prefill=1.0))) == first  # a new belief changes nothing
    assert StaticPriorityOrdering().key(one, engine(LinearPredictor(per_prefill=1.0))) != first


def test_a_job_priority_wins_over_the_estimate() -> None:
    ordering = StaticPriorityOrdering()
    assert ordering.key(seq("p", 10_000, 500.0, priority=0.25), engine())[0] == 0.25
    assert ordering.key(seq("q", 10, 1.0, priority=0.0), engine())[0] == pytest.approx(0.02)


def test_build_is_registered_and_takes_no_parameters() -> None:
    context = PolicyContext((make_instance(),), np.random.default_rng(0), HistoryOutputPredictor())
    assert isinstance(ORDERINGS.build("static-priority", {}, context), StaticPriorityOrdering)
    with pytest.raises(ConfigError):
        ORDERINGS.build("static-priority", {"tie": "id"}, context)
