"""What the strongest-baseline search sweeps, and which candidates each of its steps runs.

The scoreboard (``scoreboard.py``) chooses the strongest baseline after the fact from three steps:

1. **Engine sweep**: ``chunked-fcfs`` with each static token budget and ``static-concurrency`` with each cap,
   behind the reference router ``least-tokens``.
2. **Router sweep**: every other baseline router with the best budget and the best cap of step 1.
3. **Refinement**: every router of step 2 whose best row there carried at least ``1 - refine_margin`` of
   the best baseline so far gets every other setting of the engine it did best with. Why: the best budget
   depends on the router. On NexusSched's ShareGPT workload step 1 chose a budget of 128 behind
   ``least-tokens``; ``prism`` at 128 carried 37.0 jobs/s (0.88 of the best, 42.2), where ``prism`` at 512
   had carried 74.5 in an earlier table: the strongest baseline was never run. A full grid (every router x
   every setting) would triple the baselines' first-seed searches; the margin keeps the routers that could
   be near the best with another setting (a quarter below it by default) and drops the ones far below.

Every step is screened the same way (``screening.py``: all candidates on the first seed, contenders on all).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from slosched.evaluation.board import TARGETS, Scoreboard
from slosched.evaluation.workbench import Candidate

BASELINE_ROUTERS = ("least-tokens", "least-loaded", "power-of-two", "cache-aware", "predicted-latency", "prism")
REFERENCE_ROUTER = "least-tokens"
CHUNKED, CAPPED = "chunked-fcfs", "static-concurrency"


@dataclass(slots=True, frozen=True)
class BaselinePlan:
    """What the strongest-baseline search sweeps: token budgets, caps, routers. ``best_engine_only`` (quick
    forms): step 2 runs every router with the better of the two engine settings of step 1 only (the best
    budget or the best cap, whichever carried more behind the reference router), not with both.
    ``refine_margin``: how far below the best baseline so far a router's best step-2 row may be and still
    be swept by step 3 (0: only a router that is the best; negative: no step 3)."""

    token_budgets: tuple[int, ...] = (256, 512, 1024, 2048)
    caps: tuple[int, ...] = (16, 32, 64, 128, 256)
    routers: tuple[str, ...] = BASELINE_ROUTERS
    best_engine_only: bool = False
    refine_margin: float = 0.25

    @classmethod
    def quick(cls) -> BaselinePlan:
        return cls(token_budgets=(512, 2048), caps=(32, 128))


def baseline_candidates(plan: BaselinePlan, best_budget: int | None, best_cap: int | None) -> list[Candidate]:
    """Step 1 (both ``best_*`` None: the engine sweep) or step 2 (every router with the best engine settings;
    one of them None: with the other only)."""
    if best_budget is None and best_cap is None:
        sweep = [Candidate.of(f"{REFERENCE_ROUTER}+{CHUNKED}", {"token_budget": b}) for b in plan.token_budgets]
        return sweep + [Candidate.of(f"{REFERENCE_ROUTER}+{CAPPED}", {"cap": cap}) for cap in plan.caps]
    routers = [router for router in plan.routers if router != REFERENCE_ROUTER]
    budgets = [] if best_budget is None else [best_budget]
    caps = [] if best_cap is None else [best_cap]
    return [Candidate.of(f"{router}+{CHUNKED}", {"token_budget": b}) for b in budgets for router in routers] + [
        Candidate.of(f"{router}+{CAPPED}", {"cap": cap}) for cap in caps for router in routers
    ]


def refined_candidates(
    board: Scoreboard, plan: BaselinePlan, best_budget: int | None, best_cap: int | None
) -> list[Candidate]:
    """Step 3: each router whose best step-2 row carried at least ``1 - plan.refine_margin`` of the best
    baseline so far on the first seed (the one seed every baseline is searched on), with every setting of
    that row's engine it has not run."""
    rows: dict[str, Candidate] = {}  # each router's best step-2 candidate
    for candidate in baseline_candidates(plan, best_budget, best_cap):
        router = candidate.policy.split("+", 1)[0]
        if router not in rows or _first_seed(board, candidate) > _first_seed(board, rows[router]):
            rows[router] = candidate
    best = max((result.searches[0].capacity[TARGETS[0]] for result in board.baselines.values()), default=0.0)
    refined: list[Candidate] = []
    for leader in rows.values():
        if _first_seed(board, leader) < (1.0 - plan.refine_margin) * best:
            continue
        chunked = leader.policy.endswith(f"+{CHUNKED}")
        key, values = ("token_budget", plan.token_budgets) if chunked else ("cap", plan.caps)
        refined += [Candidate.of(leader.policy, {key: value}) for value in values]
    return [candidate for candidate in refined if candidate.label not in board.baselines]


def _first_seed(board: Scoreboard, candidate: Candidate) -> float:
    return board.baselines[candidate.label].searches[0].capacity[TARGETS[0]]


def best_settings(board: Scoreboard, plan: BaselinePlan) -> tuple[int | None, int | None]:
    """(best token budget, best cap) of the engine sweep; with ``plan.best_engine_only`` the weaker of the
    two (behind the reference router) is None, so step 2 runs the routers with the stronger one only."""
    budget = _best_param(board, plan.token_budgets, CHUNKED, "token_budget")
    cap = _best_param(board, plan.caps, CAPPED, "cap")
    if not plan.best_engine_only:
        return budget, cap
    chunked = Candidate.of(f"{REFERENCE_ROUTER}+{CHUNKED}", {"token_budget": budget}).label
    capped = Candidate.of(f"{REFERENCE_ROUTER}+{CAPPED}", {"cap": cap}).label
    return (budget, None) if board.capacity_of(chunked) >= board.capacity_of(capped) else (None, cap)


def _best_param(board: Scoreboard, values: Sequence[int], engine: str, key: str) -> int:
    def capacity(value: int) -> float:
        label = Candidate.of(f"{REFERENCE_ROUTER}+{engine}", {key: value}).label
        return board.baselines[label].median_90

    return max(values, key=capacity)
