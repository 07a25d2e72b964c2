"""The strongest-baseline search's rounds: engine sweep, past its edge, router sweep, refinement of the near rows."""

from __future__ import annotations

from slosched.evaluation.baseline_plan import (
    BASELINE_ROUNDS,
    BaselinePlan,
    baseline_candidates,
    best_settings,
    engine_edges,
    lacks_a_round,
    refinement,
    refinement_edges,
)
from slosched.evaluation.board import CapacityResult, Scoreboard
from slosched.evaluation.capacity import Spread
from slosched.evaluation.steady import SteadyCapacity
from slosched.evaluation.workbench import Candidate

PLAN = BaselinePlan(token_budgets=(128, 512), caps=(8, 64), routers=("least-tokens", "least-loaded", "prism"))


def test_engine_sweep_then_every_router_with_the_best_settings() -> None:
    plan = BaselinePlan(token_budgets=(256, 512), caps=(8,), routers=("least-tokens", "prism"))
    sweep = [candidate.label for candidate in baseline_candidates(plan, None, None)]
    assert sweep == [
        "least-tokens+chunked-fcfs[token_budget=256]",
        "least-tokens+chunked-fcfs[token_budget=512]",
        "least-tokens+static-concurrency[cap=8]",
    ]
    routers = [candidate.label for candidate in baseline_candidates(plan, 512, 8)]
    assert routers == ["prism+chunked-fcfs[token_budget=512]", "prism+static-concurrency[cap=8]"]
    # A quick plan's step 2 (``best_engine_only``): the routers with the better engine setting only.
    assert [candidate.label for candidate in baseline_candidates(plan, 512, None)] == [routers[0]]
    assert [candidate.label for candidate in baseline_candidates(plan, None, 8)] == [routers[1]]


def _board(first_seed: dict[str, float]) -> Scoreboard:
    """A board whose baselines carried ``first_seed`` (label -> jobs/s) on their one searched seed."""
    board = Scoreboard("test", 100, (1,))
    _add(board, first_seed)
    return board


def _add(board: Scoreboard, first_seed: dict[str, float]) -> None:
    for label, capacity in first_seed.items():
        policy, _, rest = label.partition("[")
        key, _, value = rest.rstrip("]").partition("=")
        candidate = Candidate.of(policy, {key: int(value)})
        assert candidate.label == label
        search = SteadyCapacity({0.9: capacity, 0.95: capacity}, 100, 100, 100, 1.0, 3)
        spreads = {target: Spread.of([capacity]) for target in (0.9, 0.95)}
        board.baselines[label] = CapacityResult(candidate, spreads, (search,))


def _new(board: Scoreboard, candidates: list[Candidate]) -> list[str]:
    return [candidate.label for candidate in candidates if candidate.label not in board.baselines]


def _engine_sweep_and_routers(prism_chunked: float, least_loaded_capped: float) -> Scoreboard:
    return _board(
        {
            "least-tokens+chunked-fcfs[token_budget=128]": 42.0,
            "least-tokens+chunked-fcfs[token_budget=512]": 31.0,
            "least-tokens+static-concurrency[cap=8]": 20.0,
            "least-tokens+static-concurrency[cap=64]": 34.0,
            "least-loaded+chunked-fcfs[token_budget=128]": 30.0,
            "least-loaded+static-concurrency[cap=64]": least_loaded_capped,
            "prism+chunked-fcfs[token_budget=128]": prism_chunked,
            "prism+static-concurrency[cap=64]": 30.0,
        }
    )


def test_a_router_near_the_best_gets_every_setting_of_its_better_engine() -> None:
    """NexusSched's case: prism at the reference router's best budget carried 0.88 of the best, and far more
    at another budget; it is swept over the budgets, least-loaded (its best row a third below) is not."""
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    assert best_settings(board, PLAN) == (128, 64)
    refined = _new(board, refinement(board, PLAN))
    assert refined == ["prism+chunked-fcfs[token_budget=512]"]


def test_each_near_row_gets_its_own_engines_grid() -> None:
    board = _engine_sweep_and_routers(prism_chunked=25.0, least_loaded_capped=40.0)
    refined = _new(board, refinement(board, PLAN))
    assert refined == ["least-loaded+static-concurrency[cap=8]"]  # prism's best (30) is too far below 42
    # NexusSched's case: prism's cap row a hair above its budget row; both are near, both grids run.
    _add(board, {"prism+static-concurrency[cap=64]": 37.6, "prism+chunked-fcfs[token_budget=128]": 37.0})
    assert set(_new(board, refinement(board, PLAN))) == {
        "least-loaded+static-concurrency[cap=8]",
        "prism+static-concurrency[cap=8]",
        "prism+chunked-fcfs[token_budget=512]",
    }


def test_the_margin_sets_how_far_below_the_best_a_router_may_be() -> None:
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    everyone = BaselinePlan(PLAN.token_budgets, PLAN.caps, PLAN.routers, refine_margin=1.0)
    refined = set(_new(board, refinement(board, everyone)))
    assert refined == {
        "prism+chunked-fcfs[token_budget=512]",
        "prism+static-concurrency[cap=8]",
        "least-loaded+chunked-fcfs[token_budget=512]",
        "least-loaded+static-concurrency[cap=8]",
    }
    nobody = BaselinePlan(PLAN.token_budgets, PLAN.caps, PLAN.routers, refine_margin=-1.0)
    assert refinement(board, nobody) == []


def test_a_plan_with_the_reference_router_only_has_nothing_to_refine() -> None:
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    alone = BaselinePlan(PLAN.token_budgets, PLAN.caps, ("least-tokens",))
    assert refinement(board, alone) == []


def test_a_best_setting_on_the_grid_edge_is_tried_one_step_beyond() -> None:
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    # Behind the reference router the best budget (128) and cap (64) are the grid's smallest and largest.
    assert _new(board, engine_edges(board, PLAN)) == [
        "least-tokens+chunked-fcfs[token_budget=64]",
        "least-tokens+static-concurrency[cap=128]",
    ]
    assert engine_edges(board, BaselinePlan(PLAN.token_budgets, PLAN.caps, PLAN.routers, past_edges=False)) == []
    _add(board, {"least-tokens+chunked-fcfs[token_budget=64]": 45.0, "least-tokens+static-concurrency[cap=128]": 1.0})
    assert best_settings(board, PLAN) == (64, 64)  # the step past the edge is better: the routers run it


def test_the_walk_past_the_edge_goes_on_while_the_step_beyond_is_best() -> None:
    plan = BaselinePlan(token_budgets=(256, 512), caps=(64,), routers=("least-tokens",))
    board = _board(
        {
            "least-tokens+chunked-fcfs[token_budget=256]": 10.0,
            "least-tokens+chunked-fcfs[token_budget=512]": 8.0,
            "least-tokens+static-concurrency[cap=64]": 5.0,
        }
    )
    # A grid of one value is both its edges: the smaller side is tried.
    assert _new(board, engine_edges(board, plan)) == [
        "least-tokens+chunked-fcfs[token_budget=128]",
        "least-tokens+static-concurrency[cap=32]",
    ]
    _add(board, {"least-tokens+chunked-fcfs[token_budget=128]": 12.0, "least-tokens+static-concurrency[cap=32]": 4})
    # The budget walks on (128 is the best); the cap's smaller side lost, so its larger side is tried.
    assert _new(board, engine_edges(board, plan)) == [
        "least-tokens+chunked-fcfs[token_budget=64]",
        "least-tokens+static-concurrency[cap=128]",
    ]
    _add(board, {"least-tokens+chunked-fcfs[token_budget=64]": 13.0, "least-tokens+static-concurrency[cap=128]": 4})
    assert _new(board, engine_edges(board, plan)) == []  # 32 tokens is past ``LIMITS``


def test_a_refined_router_on_the_edge_is_tried_one_step_beyond() -> None:
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    assert _new(board, refinement_edges(board, PLAN)) == ["prism+chunked-fcfs[token_budget=64]"]
    _add(board, {"prism+chunked-fcfs[token_budget=512]": 74.5})
    assert _new(board, refinement_edges(board, PLAN)) == ["prism+chunked-fcfs[token_budget=1024]"]


def test_the_rounds_end_when_the_board_holds_what_they_ask_for() -> None:
    """Filling in every round's missing candidates (as weak rows) ends: each round asks for a bounded set."""
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    assert lacks_a_round(board, PLAN)
    for _ in range(len(BASELINE_ROUNDS)):
        for run in BASELINE_ROUNDS:
            _add(board, {label: 1.0 for label in _new(board, run(board, PLAN))})
    assert not lacks_a_round(board, PLAN)
