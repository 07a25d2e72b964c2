"""The gateway's approximate prefix index of one backend: which prompt blocks it was sent recently.

The gateway cannot read vLLM's prefix cache, so without this every live view reported no cached prefix:
prefix affinity (the stack's router, ``cache-aware``) and the job layer's demand test, which credits the
prompt tokens a cache already holds, fell back to load signals. As llm-d's approximate prefix cache scorer
does, the gateway remembers the block hashes (``calls/prompt_blocks.py``) of the prompts it routed to each
backend, least recently routed forgotten first once they would fill the backend's KV cache, and reads a
call's cached prefix as the run of its leading blocks the backend was sent.

Recorded at routing, not at completion: a prompt queued at the gateway or prefilling in vLLM reaches the
cache before a call routed after it would (a burst of one template goes to one backend instead of being
spread before the first lands). A prompt's blocks are touched last to first, so its first blocks are the
most recent and an eviction cuts a prefix from its tail, as vLLM's own cache evicts (it frees a sequence's
blocks in reverse order); a cut in the middle would hide the blocks after it. The estimate errs where vLLM
evicted sooner than the index (other clients' traffic, preemption) or the gateway's characters-per-token
estimate is off; both only move a routing preference or a demand test's credit.

Each block keeps the id of the call that brought it: a call's own blocks are not its cache (it prefills them
itself), so a call queued at the gateway, or judged again by the job layer while it waits, is not credited
with the blocks its own routing recorded. Calls routed later that share them are.
"""

from __future__ import annotations

from slosched.core.request import Request
from slosched.gateway.calls.prompt_blocks import BLOCK_TOKENS


class PrefixIndex:
    """Block hashes routed to one backend -> the id of the call that brought each, in least-recently-routed
    order (a dict keeps insertion order, and a touched hash is re-inserted at the end)."""

    __slots__ = ("_blocks",)

    def __init__(self) -> None:
        self._blocks: dict[int, str] = {}

    def __len__(self) -> int:
        return len(self._blocks)

    def matched_tokens(self, request: Request) -> int:
        """Tokens of the call's leading blocks that other calls brought to this backend (at most its prompt)."""
        blocks = self._blocks
        matched = 0
        for block_hash in request.prompt_block_hashes:
            if blocks.get(block_hash, request.id) == request.id:
                break
            matched += 1
        return min(matched * BLOCK_TOKENS, request.prompt_tokens)

    def record(self, request: Request, capacity_tokens: int) -> None:
        """Remember the call's blocks as routed now; forget the least recently routed beyond
        ``capacity_tokens`` (the backend's KV cache)."""
        blocks = self._blocks
        for block_hash in reversed(request.prompt_block_hashes):
            blocks[block_hash] = blocks.pop(block_hash, request.id)
        capacity = max(capacity_tokens // BLOCK_TOKENS, 1)
        while len(blocks) > capacity:
            del blocks[next(iter(blocks))]
