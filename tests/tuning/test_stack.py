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


def test_retune_moves_a_knob_only_for_a_candidate_that_clears_the_margin() -> None:
    tuner = StackTuner(CONFIG, SerialExecutor())
    result = tuner.retune(_window())
    # Coordinate descent: 2 values of the first knob, then 1 new value of the second (one was scored).
    assert result.num_candidates == 3
    assert set(result.settings) == {"token_budget", "best_effort_share"}
    chosen = settings_of(result.settings)
    assert chosen in result.scores
    default, small = (settings_of({"token_budget": b, "best_effort_share": 0.25}) for b in (2048, 256))
    moved = result.scores[small].improves_on(result.scores[default])
    assert result.settings["token_budget"] == (256 if moved else 2048)
    for score in result.scores.values():
        assert len(score.attainment) == 2 and score.scored == 24
        assert all(0.0 <= a <= 1.0 for a in score.attainment)
        assert 0 <= score.met_jobs <= 48


def test_a_one_job_difference_keeps_the_default() -> None:
    """The mixed workload's case: every candidate within a job of the others, the default kept."""
    default = StackScore((59 / 60, 59 / 60, 58 / 60), 3.11, 60)
    noise = StackScore((59 / 60, 60 / 60, 58 / 60), 3.10, 60)  # one job more, 0.3% faster
    clear = StackScore((60 / 60, 60 / 60, 59 / 60), 3.11, 60)  # three more: below 2% of 180 (4 jobs)
    real = StackScore((60 / 60, 58 / 60, 56 / 60), 3.11, 30)  # four more of 90 pooled: above its margin (2)
    faster = StackScore((59 / 60, 59 / 60, 58 / 60), 2.70, 60)  # as many met, 13% faster at 1x
    assert not noise.improves_on(default)
    assert not clear.improves_on(default)
    assert StackScore((1.0, 1.0, 1.0), 3.11, 60).improves_on(default)  # 4 more of 180
    assert real.improves_on(StackScore((58 / 60, 57 / 60, 55 / 60), 3.11, 30))
    assert faster.improves_on(default) and not default.improves_on(faster)


class _Scripted(StackTuner):
    """A tuner whose replays return set scores (the margin rule, apart from the simulator)."""

    def __init__(self, table: dict[int, StackScore]) -> None:
        super().__init__(replace(CONFIG, knobs=(("token_budget", (2048, 1024, 256)),)))
        self.table = table

    def evaluate(self, jobs, candidates, backlog=(), start_s=None):  # type: ignore[no-untyped-def]
        return {c: self.table[dict(c)["token_budget"]] for c in candidates}


def test_retune_takes_the_best_candidate_that_clears_the_margin() -> None:
    base = StackScore((0.9, 0.8), 2.0, 50)  # 85 of 100 met
    table = {2048: base, 1024: StackScore((0.92, 0.8), 1.0, 50), 256: StackScore((0.96, 0.86), 2.0, 50)}
    # 1024: one job more but half the latency (clears by latency); 256: six more (clears by jobs) and wins.
    assert _Scripted(table).retune(_window(4)).settings == {"token_budget": 256}
    table[256] = StackScore((0.9, 0.82), 2.0, 50)  # one job more, no faster: only 1024 clears (by latency)
    assert _Scripted(table).retune(_window(4)).settings == {"token_budget": 1024}
    table[1024] = table[256] = StackScore((0.92, 0.8), 1.9, 50)
    assert _Scripted(table).retune(_window(4)).settings == {"token_budget": 2048}


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
    assert {"token_budget", "best_effort_share"} <= set(block)
    same, none = tuned_params(params, INSTANCES, [], OPTIONS, seed=1)
    assert same is params and none is None


def test_a_knob_the_base_block_sets_is_pinned_not_searched() -> None:
    """An operator's (or an ablation's) value holds: the tuner searches only the knobs left free."""
    pinned = replace(CONFIG, base=settings_of({"token_budget": 256}))
    result = StackTuner(pinned, SerialExecutor()).retune(_window(12))
    assert result.settings.keys() == {"best_effort_share"} and result.num_candidates == 2
    assert all(dict(candidate).keys() == {"best_effort_share"} for candidate in result.scores)
    params = PolicyParams(stack={STACK: {"yield_to_queue": False}})
    tuned, _ = tuned_params(params, INSTANCES, _window(12), OPTIONS, seed=1)
    assert tuned.stack[STACK]["yield_to_queue"] is False  # the shipped knobs search it unless pinned
    every = replace(CONFIG, base=settings_of({"token_budget": 512, "best_effort_share": 0.1}))
    nothing = StackTuner(every, SerialExecutor()).retune(_window(12))
    assert nothing.settings == {} and nothing.num_candidates == 0  # nothing left to search: no replay


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
