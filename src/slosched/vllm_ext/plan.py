"""Turning one step's policy decisions into temporary changes of vLLM's scheduler state, and undoing them.

Per step (``decide_step``): the waiting queue is put in the ordering's order and the admission policy is
asked, from the head, about as many requests as the step could admit (free running slots, token room), by
the shared ``PolicyQueue`` (the simulator's and the gateway's queue too: same key cache, same pass, same
stop rule; each admission charges its uncached prompt tokens to the room); the batch plan's mode decides
which running requests sit this step out:

- ``MIXED``: none (vLLM v1: decodes, then prefill chunks, then admissions in the remaining budget).
- ``DECODE_ONLY``: admit nothing; running requests still in a prefill chunk sit out.
- ``PREFILL_ONLY``: decoding requests sit out.
- ``PREFILL_FIRST``: decoding requests sit out whenever a prefill (a running chunk or an admission) exists.

Guards keep every step making progress: a plan that would leave nothing to run is relaxed to ``MIXED``,
and after a step that held requests back yet scheduled nothing (vLLM could not admit what we expected)
the next step holds nothing back. The token budget never drops below the number of decoding requests
(a decode batch is never split, as in the simulator) nor rises above the configured value.

Restoring (``restore_running``) is exact: running requests keep their original relative order with the
held-back ones back in their original slots, and requests the base call admitted follow at the end; the
running order decides vLLM's token budget order and its (FCFS) preemption victim, so it must not drift.
This module imports no vLLM (duck-typed requests: ``is_prefill_chunk``, ``num_tokens``,
``num_computed_tokens``), so its invariants are property-tested without an engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from slosched.core.views import StepMode, StepPlan
from slosched.policies.engine.queue import PolicyQueue
from slosched.vllm_ext.views import VllmEngineView, VllmSeq


@dataclass(slots=True)
class StepDecision:
    """What the base ``schedule()`` call sees this step. ``admitted`` are the waiting requests left in the
    queue (in order); ``held_waiting`` / ``held_running`` are hidden from the call and restored after it."""

    mode: StepMode
    token_budget: int
    max_active: int
    admitted: list[Any] = field(default_factory=list)
    held_waiting: list[Any] = field(default_factory=list)
    held_running: list[Any] = field(default_factory=list)
    relaxed: str = ""


def admission_pass(
    queue: PolicyQueue[VllmSeq], engine: VllmEngineView, free_slots: int, token_room: int
) -> list[VllmSeq]:
    """The queue's admission pass (``queue.waiting`` ordered) with vLLM's token accounting: an admission costs
    its uncached prompt tokens (at least one). Without a gate (``always``) every waiting request is handed to
    vLLM, whose own capacity checks apply the same stop rule, exactly as stock vLLM."""
    if not queue.gated and queue.fair is None:
        return list(queue.waiting)

    def charge(seq: VllmSeq, room: int) -> int:
        return max(1, seq.num_prompt_tokens - engine.cached_prefix_tokens(seq.request))

    return queue.admission_pass(engine, free_slots, token_room, charge)


def _split_running(running: Sequence[Any]) -> tuple[list[Any], list[Any]]:
    decoding = [raw for raw in running if not raw.is_prefill_chunk]
    chunks = [raw for raw in running if raw.is_prefill_chunk]
    return decoding, chunks


def decide_step(
    plan: StepPlan,
    running: Sequence[Any],
    ordered: Sequence[VllmSeq],
    admit: Callable[[int, int], list[VllmSeq]],
    limits: tuple[int, int],
    drain: bool = False,
    stalled: bool = False,
) -> StepDecision:
    """The step's decision. ``admit(free_slots, token_room)`` runs the admission pass; ``limits`` are the
    configured (max scheduled tokens, max active requests); ``stalled``: the previous step held requests
    back and scheduled nothing."""
    max_tokens, max_active_cfg = limits
    budget = max(1, min(plan.token_budget, max_tokens))
    max_active = max(0, min(plan.max_running, max_active_cfg))
    decoding, chunks = _split_running(running)
    mode = plan.mode
    relaxed = ""
    admitted: list[VllmSeq] = []
    if not drain and mode is not StepMode.DECODE_ONLY and ordered:
        room = budget - (len(decoding) if mode is StepMode.MIXED else 0)
        room -= sum(raw.num_tokens - raw.num_computed_tokens for raw in chunks)
        admitted = admit(max_active - len(running), max(room, 1))
    held_running: list[Any] = []
    if mode is StepMode.DECODE_ONLY:
        held_running = chunks
    elif mode is StepMode.PREFILL_ONLY or (mode is StepMode.PREFILL_FIRST and (chunks or admitted)):
        held_running = decoding
    if held_running and stalled:
        held_running, relaxed = [], "stalled"
    if running and len(held_running) == len(running) and not admitted:
        held_running, relaxed = [], "empty-step"
    if not running and not admitted and ordered and mode is StepMode.DECODE_ONLY and not drain:
        admitted, relaxed = admit(max_active, budget), "idle-decode-only"
    if relaxed:
        mode = StepMode.MIXED
    held_ids = {id(raw) for raw in held_running}
    num_decoding = sum(1 for raw in decoding if id(raw) not in held_ids)
    admitted_raw = [seq.raw for seq in admitted]
    admitted_ids = {id(raw) for raw in admitted_raw}
    held_waiting = [seq.raw for seq in ordered if id(seq.raw) not in admitted_ids]
    return StepDecision(
        mode=mode,
        token_budget=min(max(budget, num_decoding), max_tokens),
        max_active=max_active,
        admitted=admitted_raw,
        held_waiting=held_waiting,
        held_running=held_running,
        relaxed=relaxed,
    )


def restore_running(original: Sequence[Any], held: Sequence[Any], after: Sequence[Any]) -> list[Any]:
    """The running list after a step that hid ``held``: originals (held ones and the survivors of the base
    call, which only removes preempted requests and appends admitted ones) in their original order, then
    the newly admitted requests in admission order."""
    if not held:
        return list(after)
    original_ids = {id(raw) for raw in original}
    keep = {id(raw) for raw in held} | {id(raw) for raw in after}
    restored = [raw for raw in original if id(raw) in keep]
    restored.extend(raw for raw in after if id(raw) not in original_ids)
    return restored
