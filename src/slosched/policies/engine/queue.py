"""``PolicyQueue``: an instance's waiting list with the engine policy inside it (like vLLM v1's request queue).

The simulator's instance, the gateway's per-backend queue and the vLLM plugin all order and admit waiting
requests through this class, so the three runtimes cannot drift apart (``tests/test_runtime_equivalence.py``
holds them together). The runtime keeps what only it knows: KV blocks, token budgets, windows.

Invariants:

- ``waiting`` is one list object for the queue's lifetime (runtimes may keep a reference to it); it holds
  the requests in the order of the latest pass, new ones at the end (or, for static keys, in key order).
- Key cache: an ordering with ``static_keys`` has its key computed once per wait, when the request joins
  (``push``, or the first ``sync`` that sees it waiting). A request that leaves and comes back (preempted by
  recompute) gets a fresh key: its prompt to prefill changed. Such a queue stays sorted on insertion
  (``bisect``, ties after equal keys), so ``order`` costs nothing. Other orderings get every key
  recomputed on ``order`` and a stable sort: ties keep their previous relative order; except that an
  ordering whose keys can say how long they hold (``ExpiringKeys``) has them kept between passes while they
  do, and only the requests pushed since the last pass keyed and put in their places (the same order).
- Admission pass (``admission_pass``): one pass in ordering order. **Stop rule**, the same in every
  runtime: the pass stops when ``free_slots`` requests are admitted, when the token room is spent
  (``<= 0``), or when the runtime's ``charge`` says its capacity is exhausted for the request at hand
  (strict order: nobody behind it overtakes). The admission policy deferring a request skips it, and ends
  the pass when it says no later request of the pass can join (``pass_closed``, optional). Admitted
  requests leave ``waiting`` only after the pass (``remove``), so the view's ``num_running`` excludes the
  pass's own admissions, as in vLLM.
- Fair sharing (the policy's ``fair_share``, optional): the pass walks ``waiting`` in the fair order (aged
  requests first, then bands, then tenants by weighted service; the ordering's order within a tenant) and
  charges each admitted request to its tenant. ``waiting`` itself keeps the ordering's order. Without it the
  pass walks ``waiting`` as is.
- Wake-up (``next_wake_s``): when nothing could be scheduled, the runtime asks again at this time. A policy
  whose parts are all ``time_invariant`` changes its mind only when the queues change: None (wait for
  that). A time-dependent part may say when its decision can next change (``next_change_s``, optional);
  one that cannot is asked again after ``DEFAULT_WAKE_S``.

Feasibility (``fits_model_len``): vLLM's own rule, shared by the simulator's cluster and the gateway.
"""

from __future__ import annotations

import bisect
import math
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from slosched.core.views import EngineView, SeqView
from slosched.policies.engine.admission.always import AlwaysAdmit
from slosched.policies.engine.base import AdmissionPolicy, EnginePolicy, OrderingPolicy
from slosched.policies.engine.ordering.fcfs import FcfsOrdering
from slosched.policies.fairness.share import FairShare
from slosched.policies.fairness.spec import FairShareSpec

DEFAULT_WAKE_S = 0.01
"""A time-dependent part that cannot say when its decision changes is asked again this much later (the
simulator's historical retry interval; runtimes may ask less often, e.g. the gateway's ``tick_s``)."""

UNLIMITED_TOKENS = sys.maxsize
"""Token room of a runtime that has no token budget of its own (the gateway: vLLM budgets tokens)."""


class QueuedSeq(SeqView, Protocol):
    """A waiting request as the queue holds it: a ``SeqView`` with a slot for its ordering key."""

    sort_key: Any


@runtime_checkable
class WakeHint(Protocol):
    """Optional for time-dependent parts: the earliest time their decision for ``engine`` can change."""

    def next_change_s(self, engine: EngineView) -> float | None: ...


@runtime_checkable
class ClosesPass(Protocol):
    """Optional for admission parts: asked after a deferral, whether no later request of this pass can join
    (a full batch defers every call alike). Why: under overload the queue is long and each pass asked every
    waiting call in vain: the stack on the stack bench's mixed workload at 9 jobs/s (2,000 jobs, seed 1) made
    2.96M admission asks for 13k admissions, and stopping at ``pass_closed`` took the run from 20.5 s to 17.0 s
    with the same records. The pass stops at the first such answer, so it must be exact: True only where every
    later request would be deferred, and the part may keep no state from the requests it was not asked."""

    def pass_closed(self, engine: EngineView) -> bool: ...


@runtime_checkable
class ExpiringKeys(Protocol):
    """Optional for orderings without static keys whose keys change only with a belief and at instants they
    can name (``least-slack``: a call turns best effort at its ``flip_s``). ``key_until`` gives the key and the
    last instant it holds; ``keys_state`` what else the keys read (the belief), equal at two passes only if
    every key computed at the first would be the same at the second, None where that cannot be said.

    Why: the stack's ordering re-keyed and re-sorted the whole queue at every pass; under overload the queue
    holds thousands of calls and that was 81% of a run's time (py-spy, the stack's oracle on the code
    workload at 3x capacity, 2026-12-07). Keys kept from the last pass are the keys the pass would compute, so
    the order and every record stay the same (``bench queue-passes`` measures it)."""

    def key_until(self, seq: SeqView, engine: EngineView) -> tuple[Any, float]: ...

    def keys_state(self, engine: EngineView) -> Any: ...


S = TypeVar("S", bound=QueuedSeq)
Charge = Callable[[S, int], "int | None"]
"""``charge(seq, token_room)``: the tokens admitting ``seq`` costs the room, or None when the runtime's
capacity (KV, an over-budget prompt) stops the pass at ``seq``. Called only for requests the policy admits."""


def fits_model_len(prompt_tokens: int, max_output_tokens: int | None, max_model_len: int) -> bool:
    """vLLM's rule (v1 input processing and its OpenAI server): the prompt plus the requested output fits the
    model length; without a requested limit at least one output token must fit (vLLM then caps the output at
    the rest of the context). So ``prompt + max_output <= max_model_len``, or ``prompt < max_model_len``.

    >>> fits_model_len(2047, 1, 2048), fits_model_len(2048, None, 2048), fits_model_len(1000, 1049, 2048)
    (True, False, False)
    """
    return prompt_tokens + (max_output_tokens if max_output_tokens is not None else 1) <= max_model_len


def _sort_key(seq: QueuedSeq) -> Any:
    return seq.sort_key


def _key_all(seqs: Iterable[QueuedSeq], expiring: ExpiringKeys, engine: EngineView, until: float) -> float:
    """Give each of ``seqs`` its key (``ExpiringKeys``); the earliest instant one of them, or ``until``, expires."""
    key_until = expiring.key_until
    for seq in seqs:
        seq.sort_key, seq_until = key_until(seq, engine)
        if seq_until < until:
            until = seq_until
    return until


class PolicyQueue(Generic[S]):
    """Waiting requests of one instance, ordered and admitted by an ``EnginePolicy`` (see module invariants).

    ``engine_fcfs``: the runtime's own list is FCFS already (vLLM's waiting deque, preempted requests
    first); an ``fcfs`` ordering then keeps it as it is, at no cost, as stock vLLM would.
    """

    __slots__ = (
        "_expiring",
        "_keys_state",
        "_keys_until",
        "_pass_closed",
        "_sorted",
        "_unkeyed",
        "admission",
        "engine_fcfs",
        "fair",
        "ordering",
        "policy",
        "waiting",
    )

    def __init__(self, policy: EnginePolicy, engine_fcfs: bool = False) -> None:
        self.policy = policy
        self.ordering: OrderingPolicy = policy.ordering
        self.admission: AdmissionPolicy = policy.admission
        # Asked once, not at every pass: ``isinstance`` against a runtime-checkable protocol walks the protocol's
        # members (~20 us here when the answer is no), and a gated admission part makes a pass a step (the bench
        # tests' stand-in stack, ``prism+urgency``, made 222,000 passes in one tiny ``bench stack`` run: ~4 s).
        self._pass_closed = policy.admission.pass_closed if isinstance(policy.admission, ClosesPass) else None
        self.engine_fcfs = engine_fcfs
        self.fair = policy.fair_share
        self.waiting: list[S] = []
        # Static keys: push keeps the list sorted; a sync (the runtime's own order) unsorts it.
        self._sorted = policy.ordering.static_keys
        # Expiring keys: the waiting calls but the last ``_unkeyed`` are in the order of keys that hold while the
        # ordering's ``keys_state`` equals ``_keys_state`` (None: no such promise) and the clock is at most
        # ``_keys_until``.
        self._expiring: ExpiringKeys | None = None
        if not policy.ordering.static_keys and isinstance(policy.ordering, ExpiringKeys):
            self._expiring = policy.ordering
        self._keys_state: Any = None
        self._keys_until = 0.0
        self._unkeyed = 0  # calls pushed since the last pass, at the end of ``waiting``, without a key yet

    def __len__(self) -> int:
        return len(self.waiting)

    @property
    def gated(self) -> bool:
        """Whether the admission part can hold a request back (``always`` cannot: capacity alone decides)."""
        return not isinstance(self.admission, AlwaysAdmit)

    def share_fairly(self, spec: FairShareSpec | None) -> None:
        """Share slots under ``spec`` from the next pass on (None: fair sharing off), for a runtime whose
        configuration changed (a gateway reload). A queue already sharing keeps its tenants' counters: they
        were earned under the old weights, and the lift rule (``share.py``) evens out what they over- or
        under-state within the tenants' next calls."""
        fair = self.policy.fair_share
        if spec is None:
            fair = None
        elif fair is None:
            fair = FairShare(spec)
        else:
            fair.spec = spec
        self.policy.fair_share = self.fair = fair

    # ---- the waiting list ---------------------------------------------------------------------------
    def push(self, seq: S, engine: EngineView) -> None:
        """A request starts waiting (arrival, or back after a preemption): static keys are computed now."""
        ordering = self.ordering
        if ordering.static_keys:
            seq.sort_key = ordering.key(seq, engine)
            if self._sorted:
                bisect.insort(self.waiting, seq, key=_sort_key)
            else:
                self.waiting.append(seq)  # a synced list: the next order() sorts it
        else:
            # At the end, as before the next pass: parts that read the list between passes (a batching plan)
            # see the order they always saw; the pass gives it a key (``_unkeyed``).
            self.waiting.append(seq)
            self._unkeyed += 1

    def _keys_hold(self, expiring: ExpiringKeys, engine: EngineView) -> bool:
        """Whether the keys of the last pass still hold (``ExpiringKeys``): no belief change, no key expired."""
        if self._keys_state is None or engine.now_s > self._keys_until:
            return False
        return bool(expiring.keys_state(engine) == self._keys_state)

    def remove(self, seqs: Sequence[S]) -> None:
        """Drop ``seqs`` (admitted after a pass, or withdrawn), keeping everyone else's order."""
        waiting = self.waiting
        if len(seqs) == len(waiting):
            waiting.clear()
        elif len(seqs) == 1:
            waiting.remove(seqs[0])
        elif seqs:
            chosen = {id(seq) for seq in seqs}
            waiting[:] = [seq for seq in waiting if id(seq) not in chosen]

    def sync(self, seqs: Sequence[S], engine: EngineView) -> None:
        """Adopt the runtime's own waiting list when the runtime owns it (vLLM's queue, in the order the
        last step left it). Requests not waiting at the previous ``sync`` get their static key now."""
        ordering = self.ordering
        if ordering.static_keys:
            known = {id(seq) for seq in self.waiting}  # alive (held by waiting), so ids are not reused
            key = ordering.key
            for seq in seqs:
                if id(seq) not in known:
                    seq.sort_key = key(seq, engine)
        self.waiting[:] = seqs
        self._sorted = False
        self._keys_state = None

    def order(self, engine: EngineView) -> list[S]:
        """Put ``waiting`` in the ordering's order (lowest key first, stable) and return it."""
        waiting = self.waiting
        if self._sorted or len(waiting) < 2:
            return waiting  # static keys kept sorted by push (the simulator and the gateway)
        ordering = self.ordering
        if ordering.static_keys:
            if not (self.engine_fcfs and isinstance(ordering, FcfsOrdering)):
                waiting.sort(key=_sort_key)
            self._sorted = True
            return waiting
        expiring = self._expiring
        if expiring is not None:
            if self._keys_hold(expiring, engine):
                self._key_newcomers(expiring, engine)
            else:
                self._rekey(expiring, engine)
            return waiting
        key = ordering.key
        for seq in waiting:
            seq.sort_key = key(seq, engine)
        waiting.sort(key=_sort_key)
        return waiting

    def _rekey(self, expiring: ExpiringKeys, engine: EngineView) -> None:
        """Every key afresh and the list sorted by them, noting how long they hold."""
        until = _key_all(self.waiting, expiring, engine, math.inf)
        self.waiting.sort(key=_sort_key)
        # Read after the keys: a refit their first prediction made is the belief they were computed with.
        self._keys_state = expiring.keys_state(engine)
        self._keys_until = until
        self._unkeyed = 0

    def _key_newcomers(self, expiring: ExpiringKeys, engine: EngineView) -> None:
        """The calls pushed since the last pass get their keys and their places among the others', whose keys
        hold: the order a full pass gives (its stable sort puts a newcomer after the calls of an equal key, and
        newcomers in the order they came, as ``insort`` does)."""
        waiting = self.waiting
        fresh = min(self._unkeyed, len(waiting))  # a withdrawal may have taken some: re-keying more is harmless
        self._unkeyed = 0
        if not fresh:
            return
        newcomers = waiting[-fresh:]
        del waiting[-fresh:]
        self._keys_until = _key_all(newcomers, expiring, engine, self._keys_until)
        for seq in newcomers:
            bisect.insort(waiting, seq, key=_sort_key)

    # ---- the admission pass ---------------------------------------------------------------------------
    def admission_pass(
        self, engine: EngineView, free_slots: int, token_room: int, charge: Charge[S] | None = None
    ) -> list[S]:
        """Requests admitted this pass, in order (``waiting`` must be ordered; they stay in it until
        ``remove``). Without ``charge`` each admission costs nothing and capacity never stops the pass."""
        admitted: list[S] = []
        admit = self.admission.admit
        fair = self.fair
        candidates: Iterable[S] = self.waiting
        # The fair order may reach the queue's head after other requests, and a request at the head starts a new
        # pass of the admission part's bookkeeping, so only the ordering's own walk stops at ``pass_closed``.
        closed = self._pass_closed if fair is None else None
        if fair is not None:  # the fair order, within each tenant's share of the instance's slots
            candidates = fair.picks(self.waiting, engine.now_s, engine.running_seqs, engine.spec.max_running)
        for seq in candidates:
            if len(admitted) >= free_slots or token_room <= 0:
                break
            if not admit(seq, engine):
                if closed is not None and closed(engine):
                    break
                continue
            if charge is not None:
                cost = charge(seq, token_room)
                if cost is None:
                    break
                token_room -= cost
            admitted.append(seq)
        if fair is not None:
            for seq in admitted:
                fair.charge(seq)
        return admitted

    # ---- waking up ------------------------------------------------------------------------------------
    def next_wake_s(self, engine: EngineView) -> float | None:
        """When the policy's decisions can next change with time alone; None: only when the queues change."""
        if self.policy.time_invariant:
            return None
        wake: float | None = None
        policy = self.policy
        for part in (policy.ordering, policy.admission, policy.batching):
            if part.time_invariant:
                continue
            if isinstance(part, WakeHint):
                hint = part.next_change_s(engine)
                if hint is None:
                    continue
            else:
                hint = engine.now_s + DEFAULT_WAKE_S
            wake = hint if wake is None or hint < wake else wake
        return wake
