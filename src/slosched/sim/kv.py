"""KV cache in fixed-size blocks with an LRU prefix cache (vLLM's design, in compressed form).

A block is private to one sequence (partial blocks, generated tokens, full prompt blocks not yet scheduled)
or cached: a full prompt block is cached as soon as a step is scheduled to compute it, as vLLM v1 does (a
call admitted later in the same step reuses it). Shared-prefix blocks are cached one entry per block (key
``shared_key << 24 | index``, and ``group_key << 24 | index`` for the blocks of a prompt's group that follow
them) with a reference count; a prompt's own full blocks are cached as one *segment* entry (key
``-own_key``) holding a block count, with its last chunk, since only the same request (after a preemption)
can reuse them. Unreferenced entries stay cached but evictable, least recently released first, and count as
free capacity; a segment is evicted from its tail, block by block, as vLLM frees a request's blocks in
reverse order.
Invariant: ``num_private + referenced blocks + evictable blocks <= num_blocks``.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from slosched.core.request import PrefixId
from slosched.sim.seq import Seq

_SHIFT = 24


def prefix_keys(prefix: PrefixId, start: int, stop: int) -> Sequence[int]:
    """Cache keys of the shareable blocks ``start..stop-1`` of ``prefix``: the key's, then the group's."""
    split = prefix.shared_blocks
    base = prefix.shared_key << _SHIFT
    if stop <= split:
        return range(base + start, base + stop)
    group = prefix.group_key << _SHIFT
    if start >= split:
        return range(group + start, group + stop)
    return [*range(base + start, base + split), *range(group + split, group + stop)]


class KVCache:
    __slots__ = (
        "_evictable",
        "_num_evictable",
        "_num_referenced",
        "_referenced",
        "_segments",
        "block_size",
        "num_blocks",
        "num_private",
        "peak_used",
        "prefix_caching",
    )

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.num_private = 0
        self.peak_used = 0
        self._referenced: dict[int, int] = {}  # shared block key -> reference count
        self._segments: dict[int, int] = {}  # referenced own-block segment key -> block count
        self._evictable: OrderedDict[int, int] = OrderedDict()  # key -> block count, LRU first
        self._num_referenced = 0
        self._num_evictable = 0

    @property
    def num_free(self) -> int:
        """Blocks that can be handed out now (evictable cached blocks included)."""
        return self.num_blocks - self.num_private - self._num_referenced

    @property
    def num_used(self) -> int:
        """Blocks referenced by a sequence (the quantity bounded by capacity)."""
        return self.num_private + self._num_referenced

    @property
    def num_cached(self) -> int:
        return self._num_referenced + self._num_evictable

    def cached_prefix_blocks(self, prefix: PrefixId) -> int:
        """Leading blocks of ``prefix`` present in the cache; read-only."""
        if not self.prefix_caching:
            return 0
        referenced, evictable = self._referenced, self._evictable
        count = 0
        for key in prefix_keys(prefix, 0, prefix.shared_blocks + prefix.group_blocks):
            if key not in referenced and key not in evictable:
                return count
            count += 1
        if prefix.own_blocks:
            count += min(evictable.get(-prefix.own_key, 0), prefix.own_blocks)
        return count

    def admission_cost(self, prefix: PrefixId, hit_blocks: int, new_blocks: int) -> int:
        """Free blocks that admitting with ``hit_blocks`` cached and ``new_blocks`` fresh blocks consumes:
        reviving an evictable cached block takes it out of the free pool too."""
        evictable = self._evictable
        shared_hits = min(hit_blocks, prefix.shared_blocks + prefix.group_blocks)
        revived = sum(1 for key in prefix_keys(prefix, 0, shared_hits) if key in evictable)
        own_hits = hit_blocks - shared_hits
        if own_hits > 0:
            revived += evictable.get(-prefix.own_key, 0)  # the whole segment leaves the evictable pool
        return new_blocks + revived

    def acquire_prefix(self, seq: Seq, hit_blocks: int) -> None:
        """Take references on the first ``hit_blocks`` cached blocks of ``seq``'s prompt."""
        if hit_blocks <= 0:
            return
        prefix = seq.request.prefix
        referenced, evictable = self._referenced, self._evictable
        shared_hits = min(hit_blocks, prefix.shared_blocks + prefix.group_blocks)
        for key in prefix_keys(prefix, 0, shared_hits):
            if key in evictable:
                del evictable[key]
                self._num_evictable -= 1
                referenced[key] = 1
                self._num_referenced += 1
            else:
                referenced[key] += 1
        seq.num_shared_blocks = shared_hits
        own_hits = hit_blocks - shared_hits
        if own_hits > 0:
            # Blocks of the segment beyond the hit are dropped (the engine recomputes them anyway).
            self._num_evictable -= evictable.pop(-prefix.own_key)
            self._segments[-prefix.own_key] = own_hits
            self._num_referenced += own_hits
            seq.num_own_cached_blocks = own_hits
        self._track_peak()

    def allocate(self, seq: Seq, count: int) -> bool:
        """Give ``seq`` ``count`` private blocks, evicting LRU cached blocks if needed; False if full."""
        if not self.reserve(count):
            return False
        seq.num_private_blocks += max(count, 0)
        return True

    def reserve(self, count: int) -> bool:
        """Take ``count`` private blocks for holders tracked elsewhere (the decode cohort)."""
        if count <= 0:
            return True
        referenced = self._num_referenced
        if count > self.num_blocks - self.num_private - referenced:
            return False
        overflow = self.num_private + referenced + self._num_evictable + count - self.num_blocks
        if overflow > 0:
            self._evict(overflow)
        self.num_private += count
        used = self.num_private + referenced
        if used > self.peak_used:
            self.peak_used = used
        return True

    def _evict(self, count: int) -> None:
        evictable = self._evictable
        while count > 0:
            key = next(iter(evictable))
            size = evictable[key]
            if size > count:
                evictable[key] = size - count  # a segment loses its tail, keeps its LRU position
                self._num_evictable -= count
                return
            del evictable[key]
            self._num_evictable -= size
            count -= size

    def promote_prompt_blocks(self, seq: Seq, num_tokens: int) -> None:
        """Cache the full prompt blocks among ``seq``'s first ``num_tokens`` tokens (shared or own).

        Called when a step is scheduled to compute them, not when it ends: vLLM v1 caches a block when it
        allocates it, so a request admitted later in the same step (its batch-mate writes each layer's KV
        before attending to it) or in the next step reuses the prefix instead of computing it again. Rows
        of a relQuery arriving together share their template this way (``bench fidelity``'s relQueries)."""
        if not self.prefix_caching:
            return
        prefix = seq.request.prefix
        referenced, evictable = self._referenced, self._evictable
        shareable = prefix.shared_blocks + prefix.group_blocks
        for key in prefix_keys(prefix, seq.num_shared_blocks, min(shareable, num_tokens // self.block_size)):
            if seq.num_private_blocks == 0:
                return
            # The block's content lives in the cache from now on; the private copy is released.
            seq.num_private_blocks -= 1
            self.num_private -= 1
            if key in referenced:
                referenced[key] += 1
            else:
                if key in evictable:
                    del evictable[key]
                    self._num_evictable -= 1
                referenced[key] = 1
                self._num_referenced += 1
            seq.num_shared_blocks += 1
        if num_tokens < seq.num_prompt_tokens:
            return  # own blocks serve only this request after a preemption: cached with its last chunk
        own = min(prefix.own_blocks - seq.num_own_cached_blocks, seq.num_private_blocks)
        if own > 0 and seq.num_shared_blocks == shareable:
            seq.num_private_blocks -= own
            self.num_private -= own
            self._num_referenced += own
            seq.num_own_cached_blocks += own
            self._segments[-prefix.own_key] = seq.num_own_cached_blocks

    def release(self, seq: Seq) -> None:
        """Free everything ``seq`` holds; its cached blocks become evictable (tail first)."""
        self.num_private -= seq.num_private_blocks
        seq.num_private_blocks = 0
        prefix = seq.request.prefix
        evictable = self._evictable
        if seq.num_own_cached_blocks:
            count = self._segments.pop(-prefix.own_key)
            self._num_referenced -= count
            evictable[-prefix.own_key] = count
            self._num_evictable += count
            seq.num_own_cached_blocks = 0
        referenced = self._referenced
        for key in reversed(prefix_keys(prefix, 0, seq.num_shared_blocks)):
            count = referenced[key] - 1
            if count:
                referenced[key] = count
            else:
                del referenced[key]
                self._num_referenced -= 1
                evictable[key] = 1
                self._num_evictable += 1
        seq.num_shared_blocks = 0

    def _track_peak(self) -> None:
        used = self.num_private + self._num_referenced
        if used > self.peak_used:
            self.peak_used = used
