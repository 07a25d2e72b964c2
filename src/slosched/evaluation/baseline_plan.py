"""What the strongest-baseline search sweeps, and which candidates each of its rounds runs.

The scoreboard (``scoreboard.py``) chooses the strongest baseline after the fact from the candidates of five
rounds (``BASELINE_ROUNDS``), each a function of what the board holds so far:

1. **Engine sweep**: ``chunked-fcfs`` with each static token budget and ``static-concurrency`` with each cap,
   behind the reference router ``least-tokens``.
2. **Past the edge**: where the best budget (or cap) of round 1 is the grid's smallest or largest, the
   reference router runs one step beyond it (half the smallest, twice the largest), and another while the
   step beyond is the best, within ``LIMITS``. A best value on the edge says the grid stopped too early: on
   ``bench stack``'s Text-to-SQL, chat and mixed workloads the strongest baseline ran at the smallest budget
   of the grid (256); on chat ``prism`` at 128 then carried 13.6 jobs/s against 12.6 at 256.
3. **Router sweep**: every other baseline router with the best budget and the best cap of rounds 1-2.
4. **Refinement**: every row of round 3 (a router with the best budget, or with the best cap) that carried
   at least ``1 - refine_margin`` of the best baseline so far gets every other setting of its engine. Why:
   the best setting depends on the router. On NexusSched's ShareGPT workload round 1 chose a budget of 128
   behind ``least-tokens``; ``prism`` at 128 carried 37.0 jobs/s (0.88 of the best, 42.2), where ``prism``
   at 512 had carried 74.5 in an earlier table: the strongest baseline was never run. Per row, not per
   router: there ``prism`` with a cap of 64 carried 37.6, a hair above its budget row, and the budgets are
   where its gain lay. A full grid (every router x every setting) would triple the baselines' first-seed
   searches; the margin keeps the rows that could be near the best with another setting (a quarter below
   it by default) and drops the ones far below.
5. **Past the edge, refined**: round 2's rule for each refined row.

"On the first seed" throughout: every baseline is searched on the first seed, the contenders of each round
on all (``screening.py``). A saved board measured before a round existed gains that round's candidates by
running the rounds again (each runs only what the board lacks; ``bench/stack/refresh.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slosched.evaluation.board import TARGETS, Scoreboard
from slosched.evaluation.workbench import Candidate

BASELINE_ROUTERS = ("least-tokens", "least-loaded", "power-of-two", "cache-aware", "predicted-latency", "prism")
REFERENCE_ROUTER = "least-tokens"
CHUNKED, CAPPED = "chunked-fcfs", "static-concurrency"
KEYS = {CHUNKED: "token_budget", CAPPED: "cap"}
# How far past its grid an engine setting is extended (round 2): a budget under 64 tokens splits every prompt
# into tens of steps, and a cap over 1,024 is past every cluster's KV room; neither is a setting anyone runs.
LIMITS = {CHUNKED: (64, 16384), CAPPED: (1, 1024)}


@dataclass(slots=True, frozen=True)
class BaselinePlan:
    """What the strongest-baseline search sweeps: token budgets, caps, routers. ``best_engine_only`` (quick
    forms): round 3 runs every router with the better of the two engine settings of rounds 1-2 only (the best
    budget or the best cap, whichever carried more behind the reference router), not with both.
    ``refine_margin``: how far below the best baseline so far a round-3 row may be and still have its
    engine's grid swept by round 4 (0: only a row that is the best; negative: no round 4). ``past_edges``: rounds 2
    and 5 run."""

    token_budgets: tuple[int, ...] = (256, 512, 1024, 2048)
    caps: tuple[int, ...] = (16, 32, 64, 128, 256)
    routers: tuple[str, ...] = BASELINE_ROUTERS
    best_engine_only: bool = False
    refine_margin: float = 0.25
    past_edges: bool = True

    @classmethod
    def quick(cls) -> BaselinePlan:
        return cls(token_budgets=(512, 2048), caps=(32, 128))


def baseline_candidates(plan: BaselinePlan, best_budget: int | None, best_cap: int | None) -> list[Candidate]:
    """Round 1 (both ``best_*`` None: the engine sweep) or round 3 (every router with the best engine settings;
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


def _grid(plan: BaselinePlan, policy: str) -> tuple[str, tuple[int, ...]]:
    """(the engine's setting key, its grid in ``plan``) of a ``ROUTER+ENGINE`` baseline."""
    engine = policy.split("+", 1)[1]
    return KEYS[engine], plan.token_budgets if engine == CHUNKED else plan.caps


def _tried(board: Scoreboard, policy: str, key: str) -> dict[int, float]:
    """The settings of ``policy``'s engine the board holds (the grid and any past it) -> median capacity (the
    figure the strongest baseline is chosen by; a screened-out row's is its first seed's)."""
    engine = policy.split("+", 1)[1]
    return {
        result.candidate.params.engine[engine][key]: result.median_90
        for result in board.baselines.values()
        if result.candidate.policy == policy and engine in result.candidate.params.engine
    }


def past_edge(board: Scoreboard, plan: BaselinePlan, policies: Sequence[str]) -> list[Candidate]:
    """For each ``ROUTER+ENGINE`` whose best setting so far is the smallest (largest) it ran and no larger
    (smaller) than the grid's: one step beyond it (half, or twice), within ``LIMITS``."""
    beyond: list[Candidate] = []
    for policy in policies if plan.past_edges else ():
        key, values = _grid(plan, policy)
        tried = _tried(board, policy, key)
        if not tried:
            continue
        best = max(sorted(tried), key=lambda value: tried[value])
        low, high = LIMITS[policy.split("+", 1)[1]]
        # From the grid's edge, and on from a step beyond it while that step is the best (a walk, run to its
        # end by ``scoreboard.measure_baselines``, which repeats a round until it asks for nothing new).
        if best == min(tried) and best <= min(values) and best // 2 >= low:
            beyond.append(Candidate.of(policy, {key: best // 2}))
        elif best == max(tried) and best >= max(values) and best * 2 <= high:
            beyond.append(Candidate.of(policy, {key: best * 2}))
    return beyond


def engine_sweep(board: Scoreboard, plan: BaselinePlan) -> list[Candidate]:
    """Round 1."""
    return baseline_candidates(plan, None, None)


def engine_edges(board: Scoreboard, plan: BaselinePlan) -> list[Candidate]:
    """Round 2."""
    return past_edge(board, plan, [f"{REFERENCE_ROUTER}+{CHUNKED}", f"{REFERENCE_ROUTER}+{CAPPED}"])


def router_sweep(board: Scoreboard, plan: BaselinePlan) -> list[Candidate]:
    """Round 3."""
    return baseline_candidates(plan, *best_settings(board, plan))


def refinement(board: Scoreboard, plan: BaselinePlan) -> list[Candidate]:
    """Round 4: each refined row's router with every setting of its engine's grid."""
    refined: list[Candidate] = []
    for leader in _refined_leaders(board, plan):
        key, values = _grid(plan, leader.policy)
        refined += [Candidate.of(leader.policy, {key: value}) for value in values]
    return refined


def refinement_edges(board: Scoreboard, plan: BaselinePlan) -> list[Candidate]:
    """Round 5."""
    return past_edge(board, plan, [leader.policy for leader in _refined_leaders(board, plan)])


Round = Callable[[Scoreboard, BaselinePlan], list[Candidate]]
BASELINE_ROUNDS: tuple[Round, ...] = (engine_sweep, engine_edges, router_sweep, refinement, refinement_edges)


def lacks_a_round(board: Scoreboard, plan: BaselinePlan) -> bool:
    """Whether some round would run a candidate the board does not hold (a board saved before the round)."""
    return any(candidate.label not in board.baselines for run in BASELINE_ROUNDS for candidate in run(board, plan))


def _refined_leaders(board: Scoreboard, plan: BaselinePlan) -> list[Candidate]:
    """The round-3 rows that carried at least ``1 - plan.refine_margin`` of the best baseline of rounds 1-3 on
    the first seed (module doc, round 4): each is a router and an engine whose grid round 4 runs."""
    rows = router_sweep(board, plan)
    # The best of rounds 1-3 (every reference-router row, every round-3 row): what rounds 4-5 add moves no bar.
    every = [result.candidate for result in board.baselines.values()]
    reference = [candidate for candidate in every if _router(candidate) == REFERENCE_ROUTER]
    best = max((_first_seed(board, candidate) for candidate in [*reference, *rows]), default=0.0)
    return [row for row in rows if _first_seed(board, row) >= (1.0 - plan.refine_margin) * best]


def _router(candidate: Candidate) -> str:
    return candidate.policy.split("+", 1)[0]


def _first_seed(board: Scoreboard, candidate: Candidate) -> float:
    return board.baselines[candidate.label].searches[0].capacity[TARGETS[0]]


def best_settings(board: Scoreboard, plan: BaselinePlan) -> tuple[int | None, int | None]:
    """(best token budget, best cap) behind the reference router, among every setting the board holds for it
    (rounds 1-2), by median capacity; with ``plan.best_engine_only`` the weaker of the two is None, so round
    3 runs the routers with the stronger one only."""
    budget, budget_capacity = _best_setting(board, plan, CHUNKED)
    cap, cap_capacity = _best_setting(board, plan, CAPPED)
    if not plan.best_engine_only:
        return budget, cap
    return (budget, None) if budget_capacity >= cap_capacity else (None, cap)


def _best_setting(board: Scoreboard, plan: BaselinePlan, engine: str) -> tuple[int, float]:
    key, grid = _grid(plan, f"{REFERENCE_ROUTER}+{engine}")
    medians = _tried(board, f"{REFERENCE_ROUTER}+{engine}", key)
    best = max(grid, key=lambda value: medians[value])  # in the grid's order: ties go as they always went
    beyond = [value for value in medians if value not in grid and medians[value] > medians[best]]
    best = max(beyond, key=lambda value: medians[value]) if beyond else best
    return best, medians[best]
