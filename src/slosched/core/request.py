"""Requests (one LLM call each) as the serving system knows them: belief, never ground truth."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from slosched.core.job import step_name


class Outcome(StrEnum):
    """Terminal state of a request or job; every accepted one ends in exactly one."""

    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


@dataclass(slots=True, frozen=True)
class PrefixId:
    """Identity of a prompt's full KV blocks, for prefix caching.

    The first ``shared_blocks`` blocks are blocks 0.. of a prefix other prompts share (``shared_key``: a
    template, a session's earlier turns); the next ``group_blocks`` continue it for the prompts of one group
    only (``group_key``: the rows of a relQuery whose leading field holds the same value), so a prompt shares
    its first blocks with every prompt of its key and the next ones with its group; the last ``own_blocks``
    belong to this prompt (``own_key``), and can only be reused by the same request after a preemption.
    Keys are positive integers (``group_key`` 0 when there is no group).
    """

    shared_key: int
    shared_blocks: int
    own_key: int
    own_blocks: int
    group_key: int = 0
    group_blocks: int = 0

    @property
    def num_blocks(self) -> int:
        return self.shared_blocks + self.group_blocks + self.own_blocks

    @property
    def num_prefix_blocks(self) -> int:
        """Blocks other prompts may share: the key's, then the group's."""
        return self.shared_blocks + self.group_blocks


NO_PREFIX = PrefixId(0, 0, 0, 0)


@dataclass(slots=True)
class Request:
    """One LLM call. Holds only what a live system would know when the call is released.

    ``deadline_s`` is absolute (``math.inf`` when there is none); ``budget_s`` is the per-call share of the
    job's remaining time when a job-level policy apportions it; ``priority`` is a job-level priority
    (lower runs sooner) that engine orderings may use; ``ttft_slo_s``/``tpot_slo_s`` are per-token SLOs;
    ``best_effort`` is set by a job policy that found the call's job can no longer meet its deadline (still
    served, after every call that can). ``prompt_block_hashes``: where the prompt's text is known (the
    gateway), the chained hashes of its leading blocks, which key the gateway's approximate prefix index; the
    simulator describes sharing by ``prefix`` instead.
    """

    id: str
    job_id: str
    stage: str
    template: str
    prompt_tokens: int
    max_output_tokens: int
    arrival_s: float
    job_arrival_s: float
    deadline_s: float = math.inf
    tenant: str = "default"
    session_id: str | None = None
    prefix: PrefixId = NO_PREFIX
    predicted_output_tokens: float = 0.0
    budget_s: float | None = None
    priority: float = 0.0
    ttft_slo_s: float | None = None
    tpot_slo_s: float | None = None
    best_effort: bool = False
    prompt_block_hashes: tuple[int, ...] = ()

    @property
    def predictor_key(self) -> str:
        """Key under which output lengths are learned: template and step (``a#2`` learns as ``a``)."""
        return f"{self.template}/{step_name(self.stage)}"
