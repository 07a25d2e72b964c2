"""Engine-side state of one request on one simulated instance."""

from __future__ import annotations

from typing import Any

from slosched.core.request import Request


class Seq:
    """Implements ``core.views.SeqView``; ``true_output_tokens`` is ground truth the views do not expose.

    While the request decodes in its instance's cohort (``finish_clock >= 0``) its token counts are kept
    relative to the cohort clock and are current only after ``DecodeCohort.materialize``.

    Invariants: ``num_computed_tokens`` counts tokens whose KV is held; the prefill is done when it reaches
    ``num_prompt_tokens``; that step samples the first output token; each decode step stores the KV of the
    latest token and samples the next one.

    A plain class with slots, compared by identity: compiled (slosched.native), a dataclass keeps the
    interpreted ``__init__`` the dataclasses module generates, an explicit one is compiled (one per request).
    """

    __slots__ = (
        "computed_offset",
        "enqueue_s",
        "finish_clock",
        "first_scheduled_s",
        "first_token_s",
        "num_cached_tokens",
        "num_computed_tokens",
        "num_output_tokens",
        "num_own_cached_blocks",
        "num_preemptions",
        "num_private_blocks",
        "num_prompt_tokens",
        "num_shared_blocks",
        "order",
        "output_offset",
        "request",
        "sort_key",
        "true_output_tokens",
    )

    def __init__(
        self,
        request: Request,
        true_output_tokens: int,
        enqueue_s: float,
        order: int,
        num_prompt_tokens: int,
        num_computed_tokens: int = 0,
        num_output_tokens: int = 0,
        num_private_blocks: int = 0,
        num_shared_blocks: int = 0,
        num_own_cached_blocks: int = 0,
        first_scheduled_s: float | None = None,
        first_token_s: float | None = None,
        num_preemptions: int = 0,
        num_cached_tokens: int = 0,
        sort_key: Any = None,
        computed_offset: int = 0,
        output_offset: int = 0,
        finish_clock: int = -1,
    ) -> None:
        self.request = request
        self.true_output_tokens = true_output_tokens
        self.enqueue_s = enqueue_s
        self.order = order
        self.num_prompt_tokens = num_prompt_tokens
        self.num_computed_tokens = num_computed_tokens
        self.num_output_tokens = num_output_tokens
        self.num_private_blocks = num_private_blocks
        self.num_shared_blocks = num_shared_blocks
        self.num_own_cached_blocks = num_own_cached_blocks
        self.first_scheduled_s = first_scheduled_s
        self.first_token_s = first_token_s
        self.num_preemptions = num_preemptions
        self.num_cached_tokens = num_cached_tokens
        self.sort_key = sort_key
        self.computed_offset = computed_offset
        self.output_offset = output_offset
        self.finish_clock = finish_clock

    @property
    def num_blocks(self) -> int:
        return self.num_private_blocks + self.num_shared_blocks + self.num_own_cached_blocks
