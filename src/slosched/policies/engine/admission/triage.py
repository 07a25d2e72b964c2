"""Admission ``triage``: calls that can still meet their deadline join the batch eagerly; best-effort calls
(demoted by the ``least-slack`` ordering's rule: their job is hopeless, or the call cannot finish before its
job's deadline any more) join only while the batch, with this pass's admissions, holds fewer than
``best_effort_share`` x the instance's max running requests; and a call whose whole job the job layer
relegated (``Request.best_effort``) joins only a batch without any call that can still count.

Why: under overload a continuous-batching engine admits whatever fits, so late calls share every step with
calls that can still count and slow them all down (the baselines' collapse at 2x load). Holding late
calls to part of the batch keeps them served (never dropped; an idle engine takes them up to the share)
while the feasible calls keep the capacity. The ordering puts every feasible call first, so a pass reaches
a best-effort call only after the feasible ones ahead were admitted or stopped by capacity.

Why the stricter rule for relegated jobs: the job layer relegates whole jobs under overload (job-level
admission), many more calls than the per-call rule demotes, and a relegated workflow's later stages keep
arriving. Sharing the batch with them (up to the share) slowed the feasible calls enough that the job
layer relegated them too, mid-way: on Text-to-SQL at 2x the stack's capacity, with the backlog
judgement, 1,354 of 1,503 jobs ended relegated and goodput fell to 0.17 jobs/s from 0.65 at 1x; running
relegated calls only beside no feasible call kept 0.64 (one seed, that bench's Text-to-SQL set-up). They are
still served, never dropped: on any instance with nothing that can still count, and once load falls.

Why the strict rule engages only past ``relegated_strict_from``: that cascade needs relegated work to crowd
the instance. While an instance's calls of relegated jobs (running and waiting) number no more than its calls
that can still count, they take the best-effort share like any demoted call, and the job layer's pessimism
costs less. ``slosched bench attainment`` (jobs met, 4x the stack bench's run length, seeds 1-3 pooled), strict
always / shared always / engaging past 1.0: mixed 0.911 / 0.933 / 0.933 at its strongest baseline's capacity and
0.838 / 0.886 / 0.886 at 1.5x it (the batch tenant's relQueries 0.78 -> 0.96); Text-to-SQL 0.930 / 0.947 / 0.944
at 1x and 0.475 / 0.138 / 0.449 at 2x, where sharing always collapses.

With ``max_concurrency``, no call joins once that many run (a static cap like vLLM's ``max_num_seqs``,
below the instance's own: on a KV-limited GPU fewer running calls preempt less; the stack's self-tuner
searches it). With ``prefix_wait``, a call also waits while another call computes the shareable prefix it lacks
(``prefix_wait.py``: SGLang's in-batch prefix caching), so a relQuery's rows compute a template longer than
one chunk once.

Decisions depend on time through the tier rule, so the part is not time-invariant.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from slosched.core.errors import ConfigError
from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.admission.admission_pass import AdmissionPass
from slosched.policies.engine.admission.prefix_wait import PrefixWait
from slosched.policies.engine.admission.tpot_guard import TpotGuard
from slosched.policies.engine.base import ADMISSIONS
from slosched.policies.engine.ordering.least_slack import FlipMemo
from slosched.policies.registry import PolicyContext, setting


@dataclass(frozen=True, slots=True)
class TriageParams:
    best_effort_share: float = setting(0.25, "share of the max running requests best-effort calls may hold, in [0, 1]")
    relegated_alone: bool = setting(True, "a call whose job the job layer relegated joins only a batch of such calls")
    relegated_strict_from: float | None = setting(
        1.0,
        "relegated_alone engages once the instance's relegated calls exceed this many per call that can still "
        "count (running and waiting, >= 0); none: always",
    )
    prefix_wait: bool = setting(False, "a call waits while another computes the prefix it lacks (prefix-wait's rule)")
    max_concurrency: int | None = setting(None, "most calls running at once (>= 1); none: the instance's max running")
    tpot_guard: float | None = setting(
        None, "a call joins only while the decode step stays within this share of the batch's tightest TPOT SLO"
    )
    deadline_guard: bool = setting(
        False, "with tpot_guard: running workflow stages' budgets bound the decode step too (slack per remaining token)"
    )

    def __post_init__(self) -> None:
        if not 0.0 <= self.best_effort_share <= 1.0:
            raise ConfigError("triage.best_effort_share", f"must be in [0, 1], got {self.best_effort_share}")
        if self.tpot_guard is not None and not self.tpot_guard > 0:
            raise ConfigError("triage.tpot_guard", f"must be > 0 or none, got {self.tpot_guard}")
        if self.deadline_guard and self.tpot_guard is None:
            raise ConfigError("triage.deadline_guard", "needs tpot_guard (the share of the bound a step may use)")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ConfigError("triage.max_concurrency", f"must be >= 1 or none, got {self.max_concurrency}")
        if self.relegated_strict_from is not None and not self.relegated_strict_from >= 0:
            raise ConfigError("triage.relegated_strict_from", f"must be >= 0 or none, got {self.relegated_strict_from}")


class TriageAdmission:
    time_invariant = False

    def __init__(
        self,
        best_effort_share: float,
        relegated_alone: bool = True,
        prefix_wait: bool = False,
        max_concurrency: int | None = None,
        tpot_guard: float | None = None,
        relegated_strict_from: float | None = 1.0,
        deadline_guard: bool = False,
    ) -> None:
        self.best_effort_share = best_effort_share
        self.relegated_alone = relegated_alone
        self.relegated_strict_from = relegated_strict_from
        self.max_concurrency = max_concurrency
        self.tpot_guard = None if tpot_guard is None else TpotGuard(tpot_guard, deadline_guard)
        self.prefix_wait = PrefixWait() if prefix_wait else None
        self._pass = AdmissionPass()
        self._flips = FlipMemo()  # the least-slack rule's flips, asked again at every pass (``FlipMemo``)
        self._feasible_running = False  # a call that can still count runs, or joined in this pass
        # Whether this pass holds calls of relegated jobs to the strict tier; None: not yet asked (counting the
        # queue costs a walk of it, so only a pass that meets such a call pays it).
        self._strict: bool | None = None
        # For ``pass_closed``: calls of jobs not relegated that this pass asked about, and (None: not counted yet)
        # how many the queue holds.
        self._unrelegated_asked = 0
        self._unrelegated_waiting: int | None = None
        # And once this pass found the best-effort share full: calls that can still count it asked about, those
        # it asked about before their tier was read, and how many the queue holds (None: not counted yet).
        self._share_full = False
        self._feasible_asked = 0
        self._untiered: list[SeqView] = []
        self._feasible_waiting: int | None = None

    def admit(self, seq: SeqView, engine: EngineView) -> bool:
        state = self._pass
        if state.begin_if_new(seq, engine):
            self._feasible_running = any(not running.request.best_effort for running in engine.running_seqs)
            self._strict = None
            self._unrelegated_asked, self._unrelegated_waiting = 0, None
            self._share_full, self._feasible_asked, self._feasible_waiting = False, 0, None
            self._untiered.clear()
            if self.tpot_guard is not None:
                self.tpot_guard.begin(engine)
        if not seq.request.best_effort:
            self._unrelegated_asked += 1
        if not self._ready(seq, engine):
            self._untiered.append(seq)
            return False
        if self._flips.is_best_effort(seq, engine):
            if seq.request.best_effort and self._feasible_running and self._strict_now(engine):
                return False
            limit = self.best_effort_share * engine.spec.max_running
            if engine.num_running + state.admitted >= limit:
                self._share_full = True
                return False
        else:
            self._feasible_asked += 1
            self._feasible_running = True
        if self.tpot_guard is not None:
            self.tpot_guard.joined(seq)
        state.admitted += 1
        return True

    def _ready(self, seq: SeqView, engine: EngineView) -> bool:
        """The checks before the tier: the prefix it lacks, the concurrency cap, the TPOT guard."""
        if self.prefix_wait is not None and self.prefix_wait.holds(seq, engine):
            return False
        if self.max_concurrency is not None and engine.num_running + self._pass.admitted >= self.max_concurrency:
            return False
        return self.tpot_guard is None or self.tpot_guard.admits(seq, engine)

    def pass_closed(self, engine: EngineView) -> bool:
        """No later call of this pass can join (``queue.ClosesPass``): ``max_concurrency`` calls run or joined; the
        TPOT guard found the batch full for every call (until a call joins, which a full batch stops); the
        best-effort share is full and every call not yet asked about is best effort; or the strict tier holds
        calls of relegated jobs back and every call left in the queue is one (under overload the job layer
        relegates most jobs, and a pass walked hundreds of their calls to admit none)."""
        if self.max_concurrency is not None and engine.num_running + self._pass.admitted >= self.max_concurrency:
            return True
        if self.tpot_guard is not None and self.tpot_guard.full is True:
            return True
        if self._share_full and self._only_best_effort_left(engine):
            return True
        if not (self._strict and self._feasible_running):
            return False  # (both only turn on within a pass, so the strict tier holds for the rest of it)
        if self._unrelegated_waiting is None:
            self._unrelegated_waiting = sum(1 for seq in engine.waiting if not seq.request.best_effort)
        return self._unrelegated_asked >= self._unrelegated_waiting

    def _only_best_effort_left(self, engine: EngineView) -> bool:
        """Whether every call this pass has not asked about is best effort: with the share full (it stays full
        for the rest of the pass: admissions only add) each would be held back. The ``least-slack`` ordering puts
        them all behind the calls that can still count, so under overload a pass walked thousands of them to admit
        none (half of the stack's run at 3x capacity on the code workload, 2026-12-07)."""
        if self._feasible_waiting is None:
            counted = self._flips.count_feasible(engine.waiting, engine)
            if counted is None:
                return False  # the belief is due a refit: asked again at the next deferral
            self._feasible_waiting = counted
        if self._untiered:
            # Their tiers read now, without side effects (the count found no refit due).
            self._feasible_asked += sum(1 for seq in self._untiered if not self._flips.is_best_effort(seq, engine))
            self._untiered.clear()
        return self._feasible_asked >= self._feasible_waiting

    def _strict_now(self, engine: EngineView) -> bool:
        if self._strict is None:
            self._strict = self.relegated_alone and self._crowded(engine)
        return self._strict

    def _crowded(self, engine: EngineView) -> bool:
        """Whether the instance's calls of relegated jobs (running and waiting) exceed ``relegated_strict_from``
        per call that can still count: the crowding the strict tier is for (module doc)."""
        if self.relegated_strict_from is None:
            return True
        relegated = feasible = 0
        for seq in itertools.chain(engine.running_seqs, engine.waiting):
            if seq.request.best_effort:
                relegated += 1
            else:
                feasible += 1
        return relegated > self.relegated_strict_from * feasible


@ADMISSIONS.register("triage", params=TriageParams)
def build(params: TriageParams, context: PolicyContext) -> TriageAdmission:
    return TriageAdmission(
        params.best_effort_share,
        params.relegated_alone,
        params.prefix_wait,
        params.max_concurrency,
        params.tpot_guard,
        params.relegated_strict_from,
        params.deadline_guard,
    )
