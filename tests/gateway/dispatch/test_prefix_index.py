"""The gateway's approximate prefix index: what a backend was sent stands for its prefix cache, a call's own
blocks never count as its cache, and the least recently routed tail is forgotten first."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import httpx
from hypothesis import given
from hypothesis import strategies as st

from slosched.core.request import Request
from slosched.gateway.calls.call import SloHeaders, parse_call
from slosched.gateway.calls.prompt_blocks import BLOCK_CHARS, BLOCK_TOKENS
from slosched.gateway.dispatch.prefix_index import PrefixIndex
from slosched.gateway.dispatch.views import BackendView
from tests.gateway.helpers import harness, make_request, offline_dispatcher


def _request(name: str, hashes: tuple[int, ...], prompt_tokens: int = 1000) -> Request:
    return replace(make_request(0, 0.0), id=name, prompt_tokens=prompt_tokens, prompt_block_hashes=hashes)


def test_a_call_is_credited_the_leading_blocks_others_brought() -> None:
    index = PrefixIndex()
    first = _request("a", (1, 2, 3, 4))
    index.record(first, 10_000)
    assert index.matched_tokens(first) == 0  # its own blocks: it prefills them itself
    assert index.matched_tokens(_request("b", (1, 2, 9, 4))) == 2 * BLOCK_TOKENS  # the run stops at a miss
    assert index.matched_tokens(_request("c", (1, 2, 3, 4, 5), prompt_tokens=40)) == 40  # never past the prompt
    assert index.matched_tokens(_request("d", ())) == 0


def test_eviction_cuts_prefixes_from_their_tail() -> None:
    index = PrefixIndex()
    index.record(_request("a", (1, 2, 3)), 4 * BLOCK_TOKENS)
    index.record(_request("b", (7, 8)), 4 * BLOCK_TOKENS)  # five blocks for four places: a's last block goes
    assert len(index) == 4
    assert index.matched_tokens(_request("x", (1, 2, 3))) == 2 * BLOCK_TOKENS
    assert index.matched_tokens(_request("y", (7, 8))) == 2 * BLOCK_TOKENS


@given(st.lists(st.lists(st.integers(1, 30), max_size=12, unique=True), max_size=30), st.integers(1, 20))
def test_the_index_never_holds_more_than_the_cache(prompts: list[list[int]], capacity_blocks: int) -> None:
    index = PrefixIndex()
    for number, hashes in enumerate(prompts):
        request = _request(f"r{number}", tuple(hashes))
        index.record(request, capacity_blocks * BLOCK_TOKENS)
        assert len(index) <= capacity_blocks
        # The most recent call's first block is the last to go: a later call sharing it is credited.
        if hashes:
            assert index.matched_tokens(_request("later", (hashes[0],))) == BLOCK_TOKENS


def test_calls_sharing_a_template_follow_it_live() -> None:
    """Through the gateway: ``cache-aware`` sends a template's calls where the first went (before the index,
    the views reported no cached prefix and it spread them by load), and the view credits the next call."""

    async def scenario() -> None:
        dispatcher = offline_dispatcher(router="cache-aware")
        template = "Translate the question into SQL over this schema: films(id, title, year, rating). " * 12
        chosen = []
        for number, question in enumerate(["how many films?", "best rated?", "films of 1999?"]):
            body = {"model": "Llama-3-8B", "prompt": template + question, "max_tokens": 8}
            call = parse_call("/v1/completions", body, SloHeaders(tenant="t"), dispatcher.clock(), 16)
            queue = dispatcher.choose(call.request, set(), call.model)
            view = BackendView(dispatcher.backends[queue.index], queue, dispatcher.clock())
            credited = view.cached_prefix_tokens(call.request)
            assert credited == (0 if number == 0 else len(template) // 64 * BLOCK_TOKENS)
            queue.enqueue(call.request, call.request.prompt_tokens)
            chosen.append(queue.index)
        assert len(set(chosen)) == 1
        other = parse_call(
            "/v1/completions", {"model": "Llama-3-8B", "prompt": "z" * 900}, SloHeaders(tenant="t"), 0.0, 16
        )
        assert dispatcher.choose(other.request, set(), other.model).index != chosen[0]  # the least loaded

    asyncio.run(scenario())


def test_the_gateway_counts_what_its_index_expected_cached() -> None:
    """``slosched:prefix_index_{queries,hits}_total``: prompt tokens routed per backend, and those the index
    expected cached there (the pair to set beside vLLM's ``vllm:prefix_cache_*``)."""

    async def scenario() -> None:
        template = "You answer questions about the films table. Columns: id, title, year, rating, genre. " * 10
        async with harness(policies={"router": "cache-aware"}) as h, httpx.AsyncClient(base_url=h.url) as client:
            questions = ("how many films?", "which year?")
            for question in questions:
                body = {"prompt": template + question, "max_tokens": 2}
                assert (await client.post("/v1/completions", json=body)).status_code == 200
            queries, hits = h.value("slosched:prefix_index_queries_total"), h.value("slosched:prefix_index_hits_total")
            # Both calls went to one backend; the second found the template's full blocks there.
            assert hits == len(template) // BLOCK_CHARS * BLOCK_TOKENS
            assert queries == sum((len(template) + len(question)) // 4 for question in questions)

    asyncio.run(scenario())
