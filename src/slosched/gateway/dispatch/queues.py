"""The gateway's per-instance queues: engine-layer ordering and admission on top of stock vLLM.

Each backend gets an ``InstanceQueue``: requests routed to it wait here until the engine policy's
ordering puts them first and its admission lets them in, and a concurrency *window* (``max_running`` of
the backend spec, vLLM's ``max_num_seqs``) bounds how many sequences are forwarded and unfinished at once. A
call takes one window slot per sequence it makes vLLM run (``LiveSeq.sequences``: its prompts times ``n``, as
vLLM fans them out): counted as one, a list of 16 prompts with ``n=16`` took one slot and sent 256 sequences,
past the engine's own limit, where vLLM's queue, not the policy's order, decided who ran first. A call wider
than the free slots waits for them (strict order: no call behind it overtakes, as in vLLM's own queue), unless
nothing runs: a call wider than the whole window is then sent alone. The queue implements
``core.views.EngineView`` so the registry's ordering/admission objects run unchanged:
``now_s`` is the gateway's event-loop clock, ``running_seqs`` the forwarded requests with generated-token
counts taken from their streams, KV figures come from the backend's scraped ``kv_cache_usage_perc``.

Ordering, key caching and the admission pass are the shared ``PolicyQueue`` (``policies/engine/queue.py``),
the one the simulator and the vLLM plugin use: the window's free slots are the pass's ``free_slots``; the
gateway has no token budget of its own (vLLM budgets tokens), so the pass's room is the window's free
sequence slots. When requests wait and the policy depends on
time, the queue pumps itself again at the policy's ``next_wake_s``, but at most every ``min_wake_s``.

Invariants: a sequence is in exactly one of waiting / running / neither (finished); ``running_sequences``
is the sum of the running calls' ``sequences`` and ``<= window`` except when the window shrinks below it or
a call wider than the window runs alone; admission runs only inside
``pump`` (one pass in ordering order, admitted ones leave ``waiting`` after the pass, as in vLLM and the
simulator, so ``num_running`` excludes the pass's own admissions).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from slosched.core.belief import StepPredictor
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.gateway.dispatch.prefix_index import PrefixIndex
from slosched.policies.engine.base import EnginePolicy
from slosched.policies.engine.queue import PolicyQueue
from slosched.policies.fairness.places import FairPlaces
from slosched.policies.fairness.spec import FairShareSpec


class QueueFullError(Exception):
    """The instance's bounded queue holds ``max_queue`` requests already."""


class DisplacedError(QueueFullError):
    """A queued call gave its place to a tenant under its fair share (``policies/fairness/places.py``)."""


@dataclass(slots=True, eq=False)
class LiveSeq:
    """A request at one instance queue (implements ``core.views.SeqView``). Progress fields are updated by
    the dispatcher from the backend's stream; ``admitted`` resolves when the queue admits it."""

    request: Request
    num_prompt_tokens: int
    enqueue_s: float
    admitted: asyncio.Future[None]
    num_computed_tokens: int = 0
    num_output_tokens: int = 0  # one sequence's (``Call.sequences`` decode side by side)
    first_token_s: float | None = None
    num_preemptions: int = 0
    sort_key: Any = None
    running: bool = False
    sequences: int = 1  # the call's prompts times ``n``: each decodes ``request``'s output


@dataclass(slots=True)
class _Kv:
    """KV figures from scraping: free blocks = total * (1 - usage)."""

    num_kv_blocks: int
    usage: float = 0.0


async def wait_admitted(seq: LiveSeq, timeout_s: float) -> None:
    """Until the queue admits ``seq`` (TimeoutError after ``timeout_s``; DisplacedError when displaced). A
    cancellation is never lost: ``asyncio.wait_for`` (Python 3.11) returns the result instead when admission and
    cancellation land in the same loop step, which forwarded calls whose clients had left."""
    if seq.admitted.done():  # admitted on enqueue (the common case): no timer needed
        seq.admitted.result()
        return
    async with asyncio.timeout(timeout_s):
        await seq.admitted


class InstanceQueue:
    """Waiting + running sets of one backend, ordered and gated by an ``EnginePolicy``."""

    def __init__(
        self,
        index: int,
        spec: InstanceSpec,
        engine: EnginePolicy,
        predictor: StepPredictor,
        clock: Callable[[], float],
        max_queue: int,
        min_wake_s: float = 0.0,
    ) -> None:
        self.index = index
        self._spec = spec
        self.engine = engine
        self._predictor = predictor
        self._clock = clock
        self.max_queue = max_queue
        self.window = spec.max_running
        self._queue: PolicyQueue[LiveSeq] = PolicyQueue(engine)
        self._waiting = self._queue.waiting  # one list for the queue's lifetime
        self.min_wake_s = min_wake_s
        self._wake: asyncio.TimerHandle | None = None
        self._running: list[LiveSeq] = []
        self._running_sequences = 0
        self._held_for_slots = False  # the last pass stopped at a call wider than the free slots
        self._kv = _Kv(spec.num_kv_blocks or 1)
        self.waiting_prefill_tokens = 0
        self.num_admitted_total = 0
        self.prefixes = PrefixIndex()  # what this backend was sent recently: its prefix cache, approximately
        # Fair sharing: places held per tenant, and whom a full queue displaces (None: first come, first served).
        fair = engine.fair_share
        self.places = FairPlaces(fair.spec) if fair is not None else None

    # --- EngineView -------------------------------------------------------------------------------------
    @property
    def now_s(self) -> float:
        return self._clock()

    @property
    def spec(self) -> InstanceSpec:
        return self._spec

    @property
    def num_running(self) -> int:
        return len(self._running)

    @property
    def running_seqs(self) -> Sequence[LiveSeq]:
        return tuple(self._running)

    @property
    def running_sequences(self) -> int:
        """Sequences the running calls make the backend run (what the window bounds)."""
        return self._running_sequences

    @property
    def free_window(self) -> int:
        """Window slots (sequences) free now."""
        return max(self.window - self._running_sequences, 0)

    @property
    def waiting(self) -> Sequence[LiveSeq]:
        return self._waiting

    @property
    def num_free_kv_blocks(self) -> int:
        return round(self._kv.num_kv_blocks * (1.0 - self._kv.usage))

    @property
    def num_kv_blocks(self) -> int:
        return self._kv.num_kv_blocks

    @property
    def step_predictor(self) -> StepPredictor:
        return self._predictor

    def cached_prefix_tokens(self, request: Request) -> int:
        return self.prefixes.matched_tokens(request)

    # --- mechanism ----------------------------------------------------------------------------------------
    def set_kv_usage(self, usage: float) -> None:
        self._kv.usage = usage

    def enqueue(self, request: Request, prompt_tokens: int, sequences: int = 1) -> LiveSeq:
        """Add a request (``prompt_tokens``: every prompt of the call; ``sequences``: ``Call.sequences``);
        raises QueueFullError when the bounded queue is full. Pumps once."""
        places = self.places
        if len(self._waiting) >= self.max_queue and not self._starts_now(sequences):
            victim = None if places is None else places.victim(request.tenant, self.max_queue)
            if victim is None:
                raise QueueFullError(self._spec.name)
            self._displace(victim, request.tenant)
        loop = asyncio.get_running_loop()
        seq = LiveSeq(request, prompt_tokens, self._clock(), loop.create_future(), sequences=sequences)
        self.prefixes.record(request, self._kv.num_kv_blocks * self._spec.block_size)
        self._queue.push(seq, self)
        self.waiting_prefill_tokens += prompt_tokens
        if places is not None:
            places.joined(request.tenant)
        self.pump()
        return seq

    def share_fairly(self, spec: FairShareSpec | None) -> None:
        """Fair sharing under ``spec`` from now on (None: off), slots and places alike (a config reload); the
        calls held now are counted where this queue did not share before. Pumps (a new share may admit)."""
        self._queue.share_fairly(spec)
        if spec is None:
            self.places = None
        elif self.places is not None:
            self.places.spec = spec
        else:
            tenants = [seq.request.tenant for seq in self._waiting], [seq.request.tenant for seq in self._running]
            self.places = FairPlaces.counted(spec, *tenants)
        self.pump()

    def _displace(self, tenant: str, arriving: str) -> None:
        """Give the newest queued call of ``tenant`` a clear refusal (its waiter raises) and free its place."""
        newest: LiveSeq | None = None
        for seq in self._waiting:
            if seq.request.tenant == tenant and (newest is None or seq.enqueue_s >= newest.enqueue_s):
                newest = seq
        assert newest is not None and self.places is not None
        self._queue.remove([newest])
        self.waiting_prefill_tokens -= newest.num_prompt_tokens
        self.places.left_waiting(tenant)
        if not newest.admitted.done():
            message = f"queue of {self._spec.name} is full: tenant {tenant!r} is over its fair share, {arriving!r} not"
            newest.admitted.set_exception(DisplacedError(message))

    def withdraw(self, seq: LiveSeq) -> None:
        """Remove ``seq`` wherever it is (timeout, client gone, finished); idempotent. Pumps. The waiter
        owns ``seq.admitted`` (``asyncio.wait_for`` cancels it on timeout), so it is never touched here."""
        places = self.places
        if seq.running:
            self._running.remove(seq)
            self._running_sequences -= seq.sequences
            seq.running = False
            if places is not None:
                places.left_running(seq.request.tenant)
        elif seq in self._waiting:
            self._queue.remove([seq])
            self.waiting_prefill_tokens -= seq.num_prompt_tokens
            if places is not None:
                places.left_waiting(seq.request.tenant)
        self.pump()

    def leave(self, seq: LiveSeq) -> None:
        """``seq``'s client left: withdraw it if it still waits (a running one unwinds through its waiter)."""
        if not seq.running and seq in self._waiting:
            self.withdraw(seq)

    def pump(self) -> int:
        """One admission pass in ordering order while the window has room; returns how many were admitted."""
        free = self.window - self._running_sequences
        if not self._waiting or free <= 0:
            return 0
        self._held_for_slots = False
        queue = self._queue
        queue.order(self)
        admitted = queue.admission_pass(self, free, free, self._take_slots)
        queue.remove(admitted)
        places = self.places
        for seq in admitted:
            if places is not None:
                places.started(seq.request.tenant)
            self.waiting_prefill_tokens -= seq.num_prompt_tokens
            self._running.append(seq)
            self._running_sequences += seq.sequences
            seq.running = True
            self.num_admitted_total += 1
            if not seq.admitted.done():
                seq.admitted.set_result(None)
        if self._waiting:
            self._schedule_wake()
        return len(admitted)

    def _starts_now(self, sequences: int) -> bool:
        """Whether a call of ``sequences`` would find its window slots free (or the window idle) and no call
        already waits for slots (it would go behind that one)."""
        if self._held_for_slots and self._waiting:
            return False
        return sequences <= self.free_window or self._running_sequences == 0

    def _take_slots(self, seq: LiveSeq, room: int) -> int | None:
        """The pass's charge: a call takes one slot per sequence; one wider than the room stops the pass (it
        waits for slots, nobody behind it overtakes) unless the window is idle (``room`` is all of it)."""
        if seq.sequences <= room or room >= self.window:
            return seq.sequences
        self._held_for_slots = True
        return None

    def _schedule_wake(self) -> None:
        """Pump again when the policy's decision can change with time alone (never if it cannot)."""
        wake = self._queue.next_wake_s(self)
        if wake is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no event loop (a synchronous caller): nothing to wake
        delay = max(wake - self._clock(), self.min_wake_s)
        if self._wake is not None and self._wake.when() <= loop.time() + delay:
            return  # an earlier wake-up is already due
        if self._wake is not None:
            self._wake.cancel()
        self._wake = loop.call_later(delay, self._on_wake)

    def _on_wake(self) -> None:
        self._wake = None
        self.pump()

    @property
    def waiting_requests(self) -> list[Request]:
        return [seq.request for seq in self._waiting]

    def export_state(self) -> dict[str, float]:
        return dict(self.engine.export_state(self))
