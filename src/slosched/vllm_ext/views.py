"""``SeqView`` / ``EngineView`` over vLLM's scheduler state, so slosched's policy objects decide unchanged.

Duck-typed over vLLM's ``Request`` (``request_id``, ``num_prompt_tokens``, ``num_tokens``,
``num_computed_tokens``, ``num_output_tokens``, ``num_preemptions``, ``arrival_time``) so this module
imports no vLLM and tests can drive it with fakes. Times are Unix seconds (``time.time()``), the clock
vLLM stamps ``arrival_time`` with and the one client deadlines use.

Invariant: one ``VllmSeq`` per live request id (policies compare views by identity, e.g. "is this the
head of the queue"); ``prefill_target`` is the request's ``num_tokens`` when it last waited, i.e. the prompt
plus the output a recompute preemption must prefill again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from slosched.core.belief import StepPredictor
from slosched.core.instance import InstanceSpec
from slosched.core.request import Request
from slosched.vllm_ext.metadata import MetadataProblems, XargsTrust, request_metadata


class VllmSeq:
    """One vLLM request as a ``SeqView``."""

    __slots__ = ("first_token_s", "prefill_target", "raw", "relquery_size", "request", "sort_key")

    def __init__(self, raw: Any, problems: MetadataProblems, trust: XargsTrust) -> None:
        self.raw = raw
        params = getattr(raw, "sampling_params", None)
        extra = getattr(params, "extra_args", None)
        meta = request_metadata(
            str(raw.request_id),
            float(raw.arrival_time),
            int(raw.num_prompt_tokens),
            int(getattr(raw, "max_tokens", 1) or 1),
            float(getattr(raw, "priority", 0) or 0),
            extra if isinstance(extra, dict) else None,
            problems,
            trust,
        )
        self.request: Request = meta.request
        self.relquery_size = meta.relquery_size
        self.prefill_target = int(raw.num_prompt_tokens)
        self.first_token_s: float | None = None
        self.sort_key: Any = None  # the ordering key, kept by the plugin's PolicyQueue

    @property
    def num_prompt_tokens(self) -> int:
        return self.prefill_target

    @property
    def num_computed_tokens(self) -> int:
        return int(self.raw.num_computed_tokens)

    @property
    def num_output_tokens(self) -> int:
        return int(self.raw.num_output_tokens)

    @property
    def enqueue_s(self) -> float:
        return self.request.arrival_s

    @property
    def num_preemptions(self) -> int:
        return int(getattr(self.raw, "num_preemptions", 0))


class SeqCache:
    """``VllmSeq`` per request id, created on first sight (metadata parsed once), pruned when finished."""

    __slots__ = ("problems", "seqs", "trust")

    def __init__(self, trust: XargsTrust | None = None) -> None:
        self.seqs: dict[str, VllmSeq] = {}
        self.problems = MetadataProblems()
        self.trust = XargsTrust.from_env() if trust is None else trust  # read once: the plugin's start

    def get(self, raw: Any) -> VllmSeq:
        seq = self.seqs.get(raw.request_id)
        if seq is None or seq.raw is not raw:
            seq = VllmSeq(raw, self.problems, self.trust)
            self.seqs[raw.request_id] = seq
        return seq

    def waiting(self, raws: Iterable[Any]) -> list[VllmSeq]:
        cache = self.seqs
        seqs = []
        for raw in raws:  # one pass: this runs every step over the whole queue
            seq = cache.get(raw.request_id)
            if seq is None or seq.raw is not raw:
                seq = cache[raw.request_id] = VllmSeq(raw, self.problems, self.trust)
            seq.prefill_target = raw.num_tokens  # prompt + output to recompute after a preemption
            seqs.append(seq)
        return seqs

    def running(self, raws: Iterable[Any], now_s: float) -> list[VllmSeq]:
        seqs = [self.get(raw) for raw in raws]
        for seq in seqs:
            if seq.first_token_s is None and seq.raw.num_output_tokens > 0:
                seq.first_token_s = now_s  # first seen with output: within one step of the truth
        return seqs

    def prune(self, live_ids: Callable[[str], bool]) -> None:
        for request_id in [rid for rid in self.seqs if not live_ids(rid)]:
            del self.seqs[request_id]


class VllmEngineView:
    """The ``EngineView`` of one step; ``refresh`` re-points it at the scheduler's current state."""

    __slots__ = (
        "_cache",
        "_lookup",
        "_raw_by_id",
        "now_s",
        "num_free_kv_blocks",
        "num_kv_blocks",
        "running_seqs",
        "spec",
        "step_predictor",
        "waiting",
    )

    def __init__(self, spec: InstanceSpec, predictor: StepPredictor, lookup: Callable[[Any], int]) -> None:
        self.spec = spec
        self.step_predictor = predictor
        self.num_kv_blocks = spec.num_kv_blocks or 0
        self._lookup = lookup
        self._cache: dict[str, int] = {}
        self._raw_by_id: dict[str, Any] = {}
        self.now_s = 0.0
        self.running_seqs: Sequence[VllmSeq] = ()
        self.waiting: Sequence[VllmSeq] = ()
        self.num_free_kv_blocks = 0

    def refresh(self, now_s: float, running: Sequence[VllmSeq], waiting: Sequence[VllmSeq], free_blocks: int) -> None:
        self.now_s = now_s
        self.running_seqs = running
        self.waiting = waiting
        self.num_free_kv_blocks = free_blocks
        self._cache.clear()
        self._raw_by_id.clear()  # built on the first prefix-cache lookup of the step

    @property
    def num_running(self) -> int:
        return len(self.running_seqs)

    def cached_prefix_tokens(self, request: Request) -> int:
        """Prompt tokens the prefix cache holds for a waiting request (read-only lookup, cached per step)."""
        hit = self._cache.get(request.id)
        if hit is None:
            if not self._raw_by_id:
                self._raw_by_id.update((seq.request.id, seq.raw) for seq in self.waiting)
            raw = self._raw_by_id.get(request.id)
            hit = self._lookup(raw) if raw is not None and raw.num_computed_tokens == 0 else 0
            self._cache[request.id] = hit
        return hit
