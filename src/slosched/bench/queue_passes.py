"""``slosched bench queue-passes``: what the engine queue's cheaper passes save under overload, and that they
change nothing.

Under overload an instance's queue holds thousands of calls, and every pass of the engine policy (each step)
walked all of them. Four changes cut that, each exact:

- The stack's ordering (``least-slack``) has keys that move only with the belief step-time model and at the
  instant a call turns best effort, so its queue keeps them between passes (``ExpiringKeys`` in
  ``policies/engine/queue.py``) instead of re-keying and re-sorting every waiting call at every pass: the
  stack's oracle at 3x capacity on the code workload spent 81% of a run there (py-spy, 2026-12-07).
- That instant (``flip_s``, three step-time predictions) moves only with the belief, so the ordering and the
  ``triage`` admission keep it per call (``FlipMemo``) instead of computing it at every ask.
- A ``triage`` pass ends once the best-effort share is full and no call that can still count is left behind
  (``TriageAdmission.pass_closed``): it walked every best-effort call to admit none.
- A ``static-concurrency`` pass ends at the cap (``StaticConcurrencyAdmission.pass_closed``): the capped
  baselines walked every waiting call to admit none, and their screening runs at 2x-3x capacity on code took
  minutes each in the stack bench's code part.

The bench runs the stack, its oracle and a capped baseline on the code workload past capacity (the stack
self-tuned on the window before, as the stack bench runs it) twice in this process: as shipped, and as before
(the stack: every key, flip and best-effort call at every pass; the baseline: no ``ClosesPass`` at all, which
also hides ``triage``'s older closures, unused by it). It reports the CPU seconds of each
(``time.process_time``, which other work on the machine disturbs less than wall time), their ratio, and
whether the records of the two are identical (a digest of every request and job record): they must be, or the
bench fails.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import replace
from typing import Any, Protocol, runtime_checkable
from unittest import mock

import slosched.policies.engine.admission.triage as triage
import slosched.policies.engine.ordering.least_slack as least_slack
import slosched.policies.engine.queue as queue_module
from slosched.bench.base import Benchmark, BenchmarkFailed
from slosched.bench.sim_speed import records_digest
from slosched.bench.stack import setup
from slosched.core.views import EngineView, SeqView
from slosched.evaluation.workbench import Candidate

WORKLOAD = "code"
QUICK_JOBS, QUICK_RATE = 1_000, 100.0
FULL_JOBS, FULL_RATE = 2_500, 160.0  # about 3x the strongest baseline's capacity on code (54 jobs/s)


@runtime_checkable
class _NoOrderingKeepsKeys(Protocol):
    """Stands in for ``ExpiringKeys`` or ``ClosesPass`` in the twin run as before: no part has this method."""

    def _never_implemented_by_any_part(self) -> None: ...


def _flip_computed(memo: least_slack.FlipMemo, seq: SeqView, engine: EngineView) -> float:
    return least_slack.flip_s(seq, engine)


def _never(admission: triage.TriageAdmission, engine: EngineView) -> bool:
    return False


@contextmanager
def as_before() -> Iterator[None]:
    """Queues built inside re-key every waiting call at every pass (as before ``ExpiringKeys``), every flip is
    computed when asked (as before ``FlipMemo``), and a ``triage`` pass walks every best-effort call even with
    their share full (as before its ``_only_best_effort_left``)."""
    with (
        mock.patch.object(queue_module, "ExpiringKeys", _NoOrderingKeepsKeys),
        mock.patch.object(least_slack.FlipMemo, "flip_s", _flip_computed),
        mock.patch.object(triage.TriageAdmission, "_only_best_effort_left", _never),
    ):
        yield


@contextmanager
def no_pass_closes() -> Iterator[None]:
    """Queues built inside ask every waiting call at every pass (no admission part's ``pass_closed``)."""
    with mock.patch.object(queue_module, "ClosesPass", _NoOrderingKeepsKeys):
        yield


def _timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    result = run()
    return time.process_time() - start, result


CAPPED_BASELINE = Candidate.of("least-tokens+static-concurrency", {"cap": 16})


def _row(label: str, simulate: Callable[[], Any], before: Callable[[], AbstractContextManager[None]]) -> dict[str, Any]:
    kept_s, kept = _timed(simulate)
    with before():
        before_s, earlier = _timed(simulate)
    row = {
        "cpu_s_as_shipped": round(kept_s, 2),
        "cpu_s_as_before": round(before_s, 2),
        "speedup": round(before_s / kept_s, 2) if kept_s > 0 else None,
        "identical": records_digest(kept) == records_digest(earlier),
        "requests": len(kept.requests),
    }
    print(
        f"{label}: {before_s:.1f} s CPU as before -> {kept_s:.1f} s as shipped, records identical: {row['identical']}",
        file=sys.stderr,
    )
    return row


def measure(quick: bool) -> dict[str, Any]:
    jobs_count, rate = (QUICK_JOBS, QUICK_RATE) if quick else (FULL_JOBS, FULL_RATE)
    bench = replace(setup.workload(WORKLOAD).workbench(quick).sized(jobs_count), work_tolerance=None)
    rows: dict[str, Any] = {}
    jobs, history = bench.workload(rate, 1)
    for candidate in setup.stack_candidates():
        tuned = bench.self_tuned(candidate, rate, 1, history)
        simulate = functools.partial(bench.run_fn, tuned, bench.instances, jobs, bench.options, 1, history)
        rows[candidate.label] = _row(candidate.label, simulate, as_before)
    label = CAPPED_BASELINE.label
    simulate = functools.partial(bench.run_fn, CAPPED_BASELINE, bench.instances, jobs, bench.options, 1, history)
    rows[label] = _row(label, simulate, no_pass_closes)
    return {"workload": WORKLOAD, "jobs": jobs_count, "rate_jobs_per_s": rate, "runs": rows}


def run(quick: bool) -> dict[str, Any]:
    figures = measure(quick)
    differing = [label for label, row in figures["runs"].items() if not row["identical"]]
    if differing:
        raise BenchmarkFailed(f"records changed by the cheaper queue passes: {', '.join(differing)}", figures)
    return figures


BENCHMARK = Benchmark(
    name="queue-passes",
    summary="the engine queue's passes under overload (the stack's kept keys and flips, closing passes): CPU saved, "
    "records unchanged",
    run=run,
)
