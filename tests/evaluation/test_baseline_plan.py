"""The strongest-baseline search's candidates: engine sweep, router sweep, refinement of the near routers."""

from __future__ import annotations

from slosched.evaluation.baseline_plan import BaselinePlan, baseline_candidates, best_settings, refined_candidates
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
    for label, capacity in first_seed.items():
        policy, _, rest = label.partition("[")
        key, _, value = rest.rstrip("]").partition("=")
        candidate = Candidate.of(policy, {key: int(value)})
        assert candidate.label == label
        search = SteadyCapacity({0.9: capacity, 0.95: capacity}, 100, 100, 100, 1.0, 3)
        spreads = {target: Spread.of([capacity]) for target in (0.9, 0.95)}
        board.baselines[label] = CapacityResult(candidate, spreads, (search,))
    return board


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
    refined = [candidate.label for candidate in refined_candidates(board, PLAN, 128, 64)]
    assert refined == ["prism+chunked-fcfs[token_budget=512]"]


def test_the_engine_refined_is_the_one_the_router_did_best_with() -> None:
    board = _engine_sweep_and_routers(prism_chunked=25.0, least_loaded_capped=40.0)
    refined = [candidate.label for candidate in refined_candidates(board, PLAN, 128, 64)]
    assert refined == ["least-loaded+static-concurrency[cap=8]"]  # prism's best (30) is too far below 42


def test_the_margin_sets_how_far_below_the_best_a_router_may_be() -> None:
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    everyone = BaselinePlan(PLAN.token_budgets, PLAN.caps, PLAN.routers, refine_margin=1.0)
    refined = {candidate.label for candidate in refined_candidates(board, everyone, 128, 64)}
    assert refined == {"prism+chunked-fcfs[token_budget=512]", "least-loaded+chunked-fcfs[token_budget=512]"}
    nobody = BaselinePlan(PLAN.token_budgets, PLAN.caps, PLAN.routers, refine_margin=-1.0)
    assert refined_candidates(board, nobody, 128, 64) == []


def test_a_plan_with_the_reference_router_only_has_nothing_to_refine() -> None:
    board = _engine_sweep_and_routers(prism_chunked=37.0, least_loaded_capped=28.0)
    alone = BaselinePlan(PLAN.token_budgets, PLAN.caps, ("least-tokens",))
    assert refined_candidates(board, alone, 128, 64) == []
