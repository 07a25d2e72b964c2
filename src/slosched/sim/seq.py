"""Engine-side state of one request on one simulated instance."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slosched.core.request import Request


@dataclass(slots=True, eq=False)
class Seq:
    """Implements ``core.views.SeqView``; ``true_output_tokens`` is ground truth the views do not expose.

    While the request decodes in its instance's cohort (``finish_clock >= 0``) its token counts are kept
    relative to the cohort clock and are current only after ``DecodeCohort.materialize``.

    Invariants: ``num_computed_tokens`` counts tokens whose KV is held; the prefill is done when it reaches
    ``num_prompt_tokens``; that step samples the first output token; each decode step stores the KV of the
    latest token and samples the next one.
    """

    request: Request
    true_output_tokens: int
    enqueue_s: float
    order: int
    num_prompt_tokens: int
    num_computed_tokens: int = 0
    num_output_tokens: int = 0
    num_private_blocks: int = 0
    num_shared_blocks: int = 0
    num_own_cached_blocks: int = 0
    first_scheduled_s: float | None = None
    first_token_s: float | None = None
    num_preemptions: int = 0
    num_cached_tokens: int = 0
    sort_key: Any = None
    computed_offset: int = 0
    output_offset: int = 0
    finish_clock: int = -1

    @property
    def num_blocks(self) -> int:
        return self.num_private_blocks + self.num_shared_blocks + self.num_own_cached_blocks
