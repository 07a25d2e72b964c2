"""``slosched bench ordering-keys``: what keeping the stack's queue keys between passes, its calls' flips
between asks, and ending an admission pass where only held-back calls are left saves; and that it changes
nothing.

The stack's ordering (``least-slack``) has keys that move only with the belief step-time model and at the
instant a call turns best effort, so its queue keeps them between passes (``ExpiringKeys`` in
``policies/engine/queue.py``) instead of re-keying and re-sorting every waiting call at every pass; and the
instant a call turns best effort (``flip_s``, three step-time predictions) moves only with the belief, so the
ordering and the ``triage`` admission keep it per call (``FlipMemo``) instead of computing it at every ask.
Under overload the queue holds thousands of calls: the stack's oracle at 3x capacity on the code workload
spent 81% of a run re-keying (py-spy, 2026-12-07); with the keys kept, half of the rest went to the ``triage``
admission pass asking each best-effort call about its flip, and walking all of them to admit none once their
share was full (the pass now ends there when no call that can still count is left behind:
``TriageAdmission.pass_closed``). The stack's overload runs took 5-15 min each.

The bench runs the stack and its oracle on the code workload past capacity (self-tuned on the window
before, as the stack bench runs them) twice in this process: as shipped, and as before (the queue re-keying
at every pass, every flip computed at every ask, every best-effort call walked). It reports the CPU seconds
of each (``time.process_time``, which other work on the machine disturbs less than wall time), their ratio,
and whether the records of the two are identical (a digest of every request and job record): they must be,
or the bench fails.
"""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
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

WORKLOAD = "code"
QUICK_JOBS, QUICK_RATE = 1_000, 100.0
FULL_JOBS, FULL_RATE = 2_500, 160.0  # about 3x the strongest baseline's capacity on code (54 jobs/s)


@runtime_checkable
class _NoOrderingKeepsKeys(Protocol):
    """Stands in for ``ExpiringKeys`` in the re-keying twin: no ordering has this method."""

    def _never_implemented_by_any_ordering(self) -> None: ...


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


def _timed(run: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    result = run()
    return time.process_time() - start, result


def measure(quick: bool) -> dict[str, Any]:
    jobs_count, rate = (QUICK_JOBS, QUICK_RATE) if quick else (FULL_JOBS, FULL_RATE)
    bench = replace(setup.workload(WORKLOAD).workbench(quick).sized(jobs_count), work_tolerance=None)
    rows: dict[str, Any] = {}
    for candidate in setup.stack_candidates():
        jobs, history = bench.workload(rate, 1)
        tuned = bench.self_tuned(candidate, rate, 1, history)
        simulate = functools.partial(bench.run_fn, tuned, bench.instances, jobs, bench.options, 1, history)
        kept_s, kept = _timed(simulate)
        with as_before():
            before_s, before = _timed(simulate)
        rows[candidate.label] = {
            "cpu_s_kept": round(kept_s, 2),
            "cpu_s_as_before": round(before_s, 2),
            "speedup": round(before_s / kept_s, 2) if kept_s > 0 else None,
            "identical": records_digest(kept) == records_digest(before),
            "requests": len(kept.requests),
        }
        print(
            f"{candidate.label}: {before_s:.1f} s CPU as before (every key, flip and best-effort call at every "
            f"pass) -> {kept_s:.1f} s as shipped, "
            f"records identical: {rows[candidate.label]['identical']}",
            file=sys.stderr,
        )
    return {"workload": WORKLOAD, "jobs": jobs_count, "rate_jobs_per_s": rate, "runs": rows}


def run(quick: bool) -> dict[str, Any]:
    figures = measure(quick)
    differing = [label for label, row in figures["runs"].items() if not row["identical"]]
    if differing:
        raise BenchmarkFailed(f"records changed by keeping the queue's keys: {', '.join(differing)}", figures)
    return figures


BENCHMARK = Benchmark(
    name="ordering-keys",
    summary="the stack's queue keys and flips kept between passes: CPU saved under overload, records unchanged",
    run=run,
)
