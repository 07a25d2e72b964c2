"""KV cache in fixed-size blocks with an LRU prefix cache over block hashes (vLLM's design).

A block is either private to one sequence (partial prompt blocks, generated tokens) or a cached block
identified by its hash and shared by reference count. Cached blocks whose count drops to zero stay
cached but become evictable, least recently released first; they count as free capacity.
Invariant: ``num_private + len(referenced) + len(evictable) <= num_blocks``.
"""

from __future__ import annotations

from collections import OrderedDict

from slosched.sim.seq import Seq


class KVCache:
    __slots__ = (
        "_evictable", "_referenced", "block_size", "num_blocks", "num_private", "peak_used", "prefix_caching"
    )

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool) -> None:
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.num_private = 0
        self.peak_used = 0
        self._referenced: dict[int, int] = {}
        self._evictable: OrderedDict[int, None] = OrderedDict()

    @property
    def num_free(self) -> int:
        """Blocks that can be handed out now (evictable cached blocks included)."""
        return self.num_blocks - self.num_private - len(self._referenced)

    @property
    def num_used(self) -> int:
        """Blocks referenced by a sequence (the quantity bounded by capacity)."""
        return self.num_private + len(self._referenced)

    @property
    def num_cached(self) -> int:
        return len(self._referenced) + len(self._evictable)

    def cached_prefix_blocks(self, hashes: tuple[int, ...] | list[int]) -> int:
        """Leading blocks of ``hashes`` present in the cache; read-only."""
        if not self.prefix_caching:
            return 0
        count = 0
        for block_hash in hashes:
            if block_hash in self._referenced or block_hash in self._evictable:
                count += 1
            else:
                break
        return count

    def admission_cost(self, hashes: tuple[int, ...] | list[int], hit_blocks: int, new_blocks: int) -> int:
        """Free blocks that admitting with ``hit_blocks`` cached and ``new_blocks`` fresh blocks consumes:
        reviving an evictable cached block takes it out of the free pool too."""
        evictable = self._evictable
        return new_blocks + sum(1 for block_hash in hashes[:hit_blocks] if block_hash in evictable)

    def acquire_prefix(self, seq: Seq, hashes: tuple[int, ...] | list[int], count: int) -> None:
        """Take a reference on the first ``count`` cached blocks for ``seq``."""
        referenced = self._referenced
        for block_hash in hashes[:count]:
            if block_hash in self._evictable:
                del self._evictable[block_hash]
                referenced[block_hash] = 1
            else:
                referenced[block_hash] += 1
            seq.shared_hashes.append(block_hash)
        used = self.num_private + len(referenced)
        if used > self.peak_used:
            self.peak_used = used

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
        if count > self.num_free:
            return False
        overflow = self.num_private + self.num_cached + count - self.num_blocks
        evictable = self._evictable
        for _ in range(overflow):
            evictable.popitem(last=False)
        self.num_private += count
        used = self.num_private + len(self._referenced)
        if used > self.peak_used:
            self.peak_used = used
        return True

    def promote_prompt_blocks(self, seq: Seq) -> None:
        """After a prefill completes, its full hashed prompt blocks become cached (shareable) blocks."""
        if not self.prefix_caching:
            return
        hashes = seq.request.prefix_hashes
        start = len(seq.shared_hashes)
        referenced = self._referenced
        for block_hash in hashes[start:]:
            if seq.num_private_blocks == 0:
                break
            # The block's content now lives in the cache; the private copy is released.
            seq.num_private_blocks -= 1
            self.num_private -= 1
            if block_hash in referenced:
                referenced[block_hash] += 1
            elif block_hash in self._evictable:
                del self._evictable[block_hash]
                referenced[block_hash] = 1
            else:
                referenced[block_hash] = 1
            seq.shared_hashes.append(block_hash)

    def release(self, seq: Seq) -> None:
        """Free everything ``seq`` holds; its cached blocks become evictable when unreferenced."""
        self.num_private -= seq.num_private_blocks
        seq.num_private_blocks = 0
        referenced = self._referenced
        for block_hash in reversed(seq.shared_hashes):
            count = referenced[block_hash] - 1
            if count:
                referenced[block_hash] = count
            else:
                del referenced[block_hash]
                self._evictable[block_hash] = None
        seq.shared_hashes.clear()
