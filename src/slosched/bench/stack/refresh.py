"""Bringing a saved ``bench stack`` part (``parts.py``) up to date without measuring it all again.

A part holds hours of searches, most of them the baselines'. Three changes leave those valid:

- **The bench gained a load** (``missing_loads``): only the new load is measured, as the scoreboard measures
  every load (the stack, its oracle and the baselines, screened the same way, on the part's seeds and
  sizes). Those runs are sized for the highest new load, not for the highest of all: the loads measured
  before and after do not share one job count per seed.
- **The stack changed** (``SLOSCHED_STACK_REMEASURE=stack``): the baselines' code did not, so their capacity
  searches, 4x runs and overload runs are kept, and everything the stack's code decides is measured again: the
  stack's and its oracle's capacities (from the pilot's guess, searched again as ``evaluate`` searches it),
  their 4x runs and their overload runs. A baseline's overload run depends on its code, the seed and the
  strongest baseline's capacity (which sizes every load's runs), none of which changed; as the check, every
  baseline runs again on the first seed at the highest load and the strongest at every load, and where one
  run differs from the kept ones every baseline runs again (``overload.others_overload``). The figures are
  the ones a full run of the part would give (``scoreboard.measure_others``, the same steps). Keeping the
  baselines' runs saves most of the time: they took 2 h 20 min of the Text-to-SQL part's 4 h re-measure on two
  workers (2026-12-07), the stack's side 97 min.

- **The baseline search gained rounds** (``SLOSCHED_STACK_REMEASURE=baselines``, ``missing_baselines``; opt-in,
  since on the slow workloads it is hours of searches; the page says which parts lack a round; the rounds past the
  grid's edge and the refinement of ``baseline_plan.py`` came after the parts were saved): the rounds run again on
  the part's board, each searching only the candidates it lacks, screened against the part's first-seed bar as
  ``evaluate`` screens them (``scoreboard.measure_baselines``). A part may then hold more baselines than a fresh run
  (the rows of a round whose input changed stay), never fewer. Where one of them becomes the strongest baseline, its
  4x runs and every overload run are measured again (the loads are multiples of the strongest's capacity); otherwise
  the new ones get their overload runs beside the kept ones (the same job count per seed, as the strongest's
  capacity sets it).

In every case the time spent is added to the part's (``WorkloadRun.topped_up``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence

import slosched.bench.stack.parts as parts
import slosched.bench.stack.setup as setup
from slosched.bench.stack.figures import WorkloadRun, cpu_seconds
from slosched.bench.stack.setup import StackWorkload
from slosched.core.errors import ConfigError
from slosched.evaluation.baseline_plan import lacks_a_round
from slosched.evaluation.board import TARGETS
from slosched.evaluation.overload import overload_runs
from slosched.evaluation.scoreboard import Screen, convergence, measure_baselines, measure_others, pilot

REMEASURE_ENV = "SLOSCHED_STACK_REMEASURE"
REMEASURE_CHOICES = ("stack", "baselines")


def remeasure_asked() -> frozenset[str]:
    """What ``SLOSCHED_STACK_REMEASURE`` asks to measure again on saved parts: a comma-separated subset of
    ``stack`` (the stack's rows) and ``baselines`` (the baseline rounds a part lacks); unset or empty: nothing.
    Another value is a ``ConfigError`` naming the allowed ones."""
    text = os.environ.get(REMEASURE_ENV, "")
    asked = frozenset(name.strip() for name in text.split(",") if name.strip())
    unknown = sorted(asked - set(REMEASURE_CHOICES))
    if unknown:
        raise ConfigError(
            REMEASURE_ENV,
            f"got {', '.join(unknown)}; allowed: {', '.join(REMEASURE_CHOICES)}, comma-separated (or unset)",
        )
    return asked


def refuse_stale_parts(
    workloads: Sequence[StackWorkload], quick: bool, seeds: Sequence[int], remeasure: frozenset[str]
) -> None:
    """A run asked to top parts up (``remeasure``) fails before it measures anything when a saved part of
    ``workloads`` would not be reused: it would otherwise measure that part whole, hours where minutes were
    asked for. A workload with no saved part is measured whole, as without ``remeasure``."""
    directory = parts.parts_directory()
    if not remeasure or directory is None:
        return
    for workload in workloads:
        stale = parts.stale_part(directory, workload, quick, seeds)
        if stale:
            raise ConfigError(
                REMEASURE_ENV,
                f"the saved part {parts.part_path(directory, workload.name, quick)} cannot be topped up ({stale}); "
                f"delete it to measure {workload.name} whole, or leave it out with {parts.WORKLOADS_ENV}",
            )


def missing_loads(run: WorkloadRun, quick: bool, loads: Sequence[float]) -> list[float]:
    """The ``loads`` the part was not run at, measured now and recorded on its board (module doc); returns
    them (none for a part without overload runs)."""
    board = run.board
    missing = [load for load in loads if load not in board.overload.get(setup.STACK_LABEL, {})]
    if not missing or not board.overload:
        return []

    def measure() -> None:
        shown = [label for label in board.overload if label not in board.baselines]
        bench = run.workload.workbench(quick, run.sizes)
        found = overload_runs(bench, board, [*shown, *board.baselines], board.seeds, missing, screened=True)
        board.record_overload(found, [board.strongest, *shown])

    _timed(run, measure)
    return missing


def missing_baselines(run: WorkloadRun, quick: bool, loads: Sequence[float], overload: bool = True) -> list[str]:
    """The baselines the plan now sweeps that the part lacks, measured and recorded on its board (module
    doc; ``overload`` False: their overload runs are left to a remeasure that runs them all); returns their
    labels."""
    board, plan = run.board, setup.baseline_plan(quick)
    if not lacks_a_round(board, plan):
        return []
    added: list[str] = []

    def measure() -> None:
        bench = run.workload.workbench(quick, run.sizes)
        guess, _ = pilot(bench, plan, board.seeds, run.workload.guess, presized=quick)  # as ``evaluate`` starts
        bar = max(result.searches[0].capacity[TARGETS[0]] for result in board.baselines.values())
        was = board.strongest
        added.extend(measure_baselines(Screen(bench, board.seeds, guess, 2, quick, bar=bar), board, plan))
        shown = [label for label in board.overload if label not in board.baselines]  # the stack and its oracle
        if board.strongest != was:
            if not board.baselines[board.strongest].capacity_4x:
                convergence(bench, [board.baselines[board.strongest]], board.seeds)
            if overload:
                board.overload, board.overload_baselines, board.overload_serving = {}, {}, {}
                runs = overload_runs(bench, board, [*shown, *board.baselines], board.seeds, loads, screened=True)
                board.record_overload(runs, [board.strongest, *shown])
        elif overload:
            runs = overload_runs(bench, board, added, board.seeds, loads, screened=True)
            # The strongest's runs again (the same ones): ``record_overload`` counts a full run by them.
            board.record_overload(runs, [])

    _timed(run, measure)
    return added


def remeasure_stack(run: WorkloadRun, quick: bool, loads: Sequence[float]) -> None:
    """The stack's rows of the part measured again on its kept baselines (module doc)."""
    board = run.board

    def measure() -> None:
        bench = run.workload.workbench(quick, run.sizes)
        plan = setup.baseline_plan(quick)
        guess, _ = pilot(bench, plan, board.seeds, run.workload.guess, presized=quick)
        measure_others(bench, board, setup.stack_candidates(), guess, loads, presized=quick, keep_baseline_runs=True)

    _timed(run, measure)


def _timed(run: WorkloadRun, measure: Callable[[], None]) -> None:
    start, cpu_start = time.perf_counter(), cpu_seconds()
    measure()
    spent = (time.perf_counter() - start, cpu_seconds() - cpu_start)
    run.topped_up = (run.topped_up[0] + spent[0], run.topped_up[1] + spent[1])
    run.wall_s += spent[0]
    run.cpu_s += spent[1]
