from slosched.core.request import Request
from slosched.sim.kv import KVCache
from slosched.sim.seq import Seq


def _seq(hashes: tuple[int, ...], prompt: int = 64) -> Seq:
    request = Request(
        id=f"r{hashes[:1]}", job_id="j", stage="s", template="t", prompt_tokens=prompt, max_output_tokens=8,
        arrival_s=0.0, job_arrival_s=0.0, prefix_hashes=hashes,
    )
    return Seq(request, 4, 0.0, 0, prompt)


def test_allocation_respects_capacity() -> None:
    kv = KVCache(num_blocks=4, block_size=16, prefix_caching=True)
    seq = _seq((1, 2, 3, 4))
    assert kv.allocate(seq, 4)
    assert kv.num_free == 0
    assert not kv.allocate(_seq((9,)), 1)
    kv.release(seq)
    assert kv.num_free == 4 and kv.num_used == 0


def test_prefix_blocks_are_shared_and_evicted_lru() -> None:
    kv = KVCache(num_blocks=6, block_size=16, prefix_caching=True)
    first = _seq((1, 2, 3))
    kv.allocate(first, 3)
    kv.promote_prompt_blocks(first)
    assert kv.num_used == 3 and kv.num_cached == 3
    second = _seq((1, 2, 7))
    assert kv.cached_prefix_blocks(second.request.prefix_hashes) == 2
    kv.acquire_prefix(second, second.request.prefix_hashes, 2)
    assert kv.num_used == 3  # shared, not copied
    kv.release(first)
    kv.release(second)
    assert kv.num_used == 0 and kv.num_cached == 3 and kv.num_free == 6
    # Needing 5 fresh blocks evicts two cached blocks, least recently released first.
    third = _seq((8,))
    assert kv.allocate(third, 5)
    assert kv.num_cached == 1


def test_prefix_caching_off_never_hits() -> None:
    kv = KVCache(num_blocks=4, block_size=16, prefix_caching=False)
    seq = _seq((1, 2))
    kv.allocate(seq, 2)
    kv.promote_prompt_blocks(seq)
    assert kv.cached_prefix_blocks((1, 2)) == 0
