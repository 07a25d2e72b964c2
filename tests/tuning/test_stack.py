"""The stack's self-tuner: coordinate descent over its knobs, scored by replays under load; same answer on
every executor; the chosen settings are always a candidate and the best-scored one."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.errors import ConfigError
from slosched.core.job import JobSpec
from slosched.sim.options import SimOptions
from slosched.sim.runner import PolicyParams
from slosched.tuning.executors import ProcessExecutor, SerialExecutor
from slosched.tuning.stack import (
    STACK,
    StackScore,
    StackTuneConfig,
    StackTuner,
    settings_of,
    tuned_params,
)
from tests.conftest import make_instance, make_jobs

INSTANCES = (make_instance("a100", "A100-80G"), make_instance("a6000", "A6000"))
OPTIONS = SimOptions(slo_scale=3.0)
KNOBS = (("token_budget", (2048, 256)), ("best_effort_share", (0.25, 0.5)))
CONFIG = StackTuneConfig(INSTANCES, options=OPTIONS, knobs=KNOBS, load_factors=(1.0, 2.0))


def _window(num_jobs: int = 24) -> list[JobSpec]:
    return make_jobs(num_jobs=num_jobs, rate=6.0, seed=5, mean_in=1200, mean_out=120)


def test_retune_picks_the_best_scored_candidate_of_each_knob() -> None:
    tuner = StackTuner(CONFIG, SerialExecutor())
    result = tuner.retune(_window())
    # Coordinate descent: 2 values of the first knob, then 1 new value of the second (one was scored).
    assert result.num_candidates == 3
    assert set(result.settings) == {"token_budget", "best_effort_share"}
    chosen = settings_of(result.settings)
    assert chosen in result.scores
    budget_candidates = [settings_of({"token_budget": b, "best_effort_share": 0.25}) for b in (2048, 256)]
    best_budget = min(budget_candidates, key=lambda c: result.scores[c].key())
    assert result.settings["token_budget"] == dict(best_budget)["token_budget"]
    for score in result.scores.values():
        assert len(score.attainment) == 2
        assert all(0.0 <= a <= 1.0 for a in score.attainment)


def test_load_factors_compress_arrivals_and_lower_attainment() -> None:
    """A window replayed at 4x its rate meets no more deadlines than at 1x."""
    config = replace(CONFIG, load_factors=(1.0, 4.0))
    scores = StackTuner(config).evaluate(_window(), [settings_of({"token_budget": 2048})])
    (score,) = scores.values()
    assert score.attainment[1] <= score.attainment[0]
    assert score.attainment[1] < 1.0


def test_local_processes_give_the_serial_answer() -> None:
    window = _window(12)
    candidates = [settings_of({"token_budget": b}) for b in (2048, 512)]
    serial = StackTuner(CONFIG, SerialExecutor()).evaluate(window, candidates)
    pool = ProcessExecutor(max_workers=2)
    try:
        assert StackTuner(CONFIG, pool).evaluate(window, candidates) == serial
    finally:
        pool.close()


def test_tuned_params_keep_the_base_block_and_cold_start_keeps_defaults() -> None:
    params = PolicyParams(stack={STACK: {"triage": False}})
    tuned, result = tuned_params(params, INSTANCES, _window(12), OPTIONS, seed=1)
    assert result is not None
    block = tuned.stack[STACK]
    assert block["triage"] is False  # the base block stays; the searched knobs are added
    assert {"token_budget", "prefix_wait", "best_effort_share"} <= set(block)
    same, none = tuned_params(params, INSTANCES, [], OPTIONS, seed=1)
    assert same is params and none is None


def test_empty_window_and_bad_config_fail_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"tune\.window"):
        StackTuner(CONFIG).retune([])
    with pytest.raises(ConfigError, match=r"tune\.load_factors"):
        StackTuneConfig(INSTANCES, load_factors=(0.0,))
    with pytest.raises(ConfigError, match=r"tune\.knobs"):
        StackTuneConfig(INSTANCES, knobs=(("token_budget", ()),))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.lists(st.floats(0, 1), min_size=1, max_size=3), st.floats(0.1, 100)), min_size=1, max_size=6)
)
def test_score_order_prefers_attainment_then_latency(raw: list[tuple[list[float], float]]) -> None:
    scores = [StackScore(tuple(att), lat) for att, lat in raw]
    best = min(scores, key=lambda s: s.key())
    top = max(round(s.mean_attainment, 9) for s in scores)
    assert round(best.mean_attainment, 9) == top
    assert best.mean_latency_s == min(s.mean_latency_s for s in scores if round(s.mean_attainment, 9) == top)
