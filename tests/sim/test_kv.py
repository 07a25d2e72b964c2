from slosched.core.request import PrefixId, Request
from slosched.sim.kv import KVCache
from slosched.sim.seq import Seq


def _seq(prefix: PrefixId) -> Seq:
    request = Request(
        id=f"r{prefix.own_key}",
        job_id="j",
        stage="s",
        template="t",
        prompt_tokens=16 * prefix.num_blocks + 1,
        max_output_tokens=8,
        arrival_s=0.0,
        job_arrival_s=0.0,
        prefix=prefix,
    )
    return Seq(request, 4, 0.0, prefix.own_key, request.prompt_tokens)


def test_allocation_respects_capacity() -> None:
    kv = KVCache(num_blocks=4, block_size=16, prefix_caching=True)
    seq = _seq(PrefixId(0, 0, 1, 4))
    assert kv.allocate(seq, 4)
    assert kv.num_free == 0
    assert not kv.allocate(_seq(PrefixId(0, 0, 2, 1)), 1)
    kv.release(seq)
    assert kv.num_free == 4 and kv.num_used == 0


def test_shared_prefix_blocks_are_shared_and_evicted_lru() -> None:
    kv = KVCache(num_blocks=8, block_size=16, prefix_caching=True)
    first = _seq(PrefixId(7, 2, 1, 1))
    kv.allocate(first, 3)
    kv.promote_prompt_blocks(first, first.num_prompt_tokens)
    assert kv.num_used == 3 and kv.num_cached == 3 and first.num_private_blocks == 0
    second = _seq(PrefixId(7, 2, 2, 3))
    assert kv.cached_prefix_blocks(second.request.prefix) == 2  # shares the prefix, not first's own block
    kv.acquire_prefix(second, 2)
    assert kv.num_used == 3  # shared, not copied
    kv.release(first)
    kv.release(second)
    assert kv.num_used == 0 and kv.num_cached == 3 and kv.num_free == 8
    # Needing 6 fresh blocks evicts one cached block: first's own block, released before the prefix.
    third = _seq(PrefixId(0, 0, 3, 6))
    assert kv.allocate(third, 6)
    assert kv.num_cached == 2
    assert kv.cached_prefix_blocks(second.request.prefix) == 2


def test_own_blocks_are_reused_after_preemption_and_evicted_from_the_tail() -> None:
    kv = KVCache(num_blocks=10, block_size=16, prefix_caching=True)
    seq = _seq(PrefixId(0, 0, 5, 6))
    kv.allocate(seq, 6)
    kv.promote_prompt_blocks(seq, seq.num_prompt_tokens)
    kv.release(seq)  # preempted: its six blocks stay cached, evictable
    assert kv.cached_prefix_blocks(seq.request.prefix) == 6
    other = _seq(PrefixId(0, 0, 6, 8))
    assert kv.allocate(other, 8)  # evicts four blocks of the segment's tail
    assert kv.cached_prefix_blocks(seq.request.prefix) == 2
    assert kv.admission_cost(seq.request.prefix, 2, 4) == 6
    kv.release(other)
    kv.acquire_prefix(seq, 2)
    assert kv.num_used == 2 and seq.num_blocks == 2


def test_prefix_caching_off_never_hits() -> None:
    kv = KVCache(num_blocks=4, block_size=16, prefix_caching=False)
    seq = _seq(PrefixId(3, 2, 1, 0))
    kv.allocate(seq, 2)
    kv.promote_prompt_blocks(seq, seq.num_prompt_tokens)
    assert kv.cached_prefix_blocks(seq.request.prefix) == 0


def test_a_groups_blocks_follow_the_keys_and_are_shared_only_within_the_group() -> None:
    kv = KVCache(num_blocks=16, block_size=16, prefix_caching=True)
    # Key 7 (the template) holds 2 blocks, group 9 the next 2; each prompt has 1 own block.
    first = _seq(PrefixId(7, 2, 1, 1, group_key=9, group_blocks=2))
    kv.allocate(first, 5)
    kv.promote_prompt_blocks(first, first.num_prompt_tokens)
    assert first.num_shared_blocks == 4 and first.num_own_cached_blocks == 1
    same_group = PrefixId(7, 2, 2, 1, group_key=9, group_blocks=2)
    other_group = PrefixId(7, 2, 3, 1, group_key=11, group_blocks=2)
    assert kv.cached_prefix_blocks(same_group) == 4
    assert kv.cached_prefix_blocks(other_group) == 2  # the template only
    second = _seq(same_group)
    kv.acquire_prefix(second, 4)
    assert kv.num_used == 5  # the four shared blocks are referenced twice, not copied
    kv.release(first)
    kv.release(second)
    assert kv.num_used == 0 and kv.num_cached == 5 and kv.num_free == 16


def test_without_a_group_the_keys_are_those_of_the_template_alone() -> None:
    from slosched.sim.kv import prefix_keys

    plain = PrefixId(7, 3, 1, 1)
    assert list(prefix_keys(plain, 0, 3)) == [(7 << 24) | index for index in range(3)]
    grouped = PrefixId(7, 2, 1, 1, group_key=9, group_blocks=2)
    assert list(prefix_keys(grouped, 1, 4)) == [(7 << 24) | 1, (9 << 24) | 2, (9 << 24) | 3]
    assert list(prefix_keys(grouped, 2, 4)) == [(9 << 24) | 2, (9 << 24) | 3]


def test_blocks_are_cached_as_their_chunk_is_scheduled_and_own_blocks_with_the_last_chunk() -> None:
    kv = KVCache(num_blocks=16, block_size=16, prefix_caching=True)
    first = _seq(PrefixId(7, 3, 1, 2))  # 3 template blocks, 2 own, a partial last block: 81 tokens
    kv.allocate(first, 2)
    kv.promote_prompt_blocks(first, 40)  # a first chunk of 40 tokens fills 2 blocks
    assert first.num_shared_blocks == 2 and first.num_private_blocks == 0
    assert kv.cached_prefix_blocks(PrefixId(7, 3, 2, 0)) == 2  # a batch-mate already reuses them
    kv.allocate(first, 3)
    kv.promote_prompt_blocks(first, 80)  # not the last chunk: own blocks stay private
    assert first.num_shared_blocks == 3 and first.num_own_cached_blocks == 0 and first.num_private_blocks == 2
    kv.promote_prompt_blocks(first, first.num_prompt_tokens)
    assert first.num_own_cached_blocks == 2 and first.num_private_blocks == 0
    assert kv.num_used == 5
    kv.release(first)
    assert kv.num_used == 0 and kv.num_cached == 5
