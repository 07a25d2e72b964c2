"""The gateway's prompt block hashes: shared leading blocks hash alike, the first differing block and every
block after it do not."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slosched.gateway.calls.prompt_blocks import (
    BLOCK_CHARS,
    BLOCK_TOKENS,
    MAX_BLOCKS,
    chat_block_hashes,
    completion_block_hashes,
)

_TEMPLATE = "You translate questions into SQL over the schema below. " * 20  # 1,120 characters: 17 blocks


def test_prompts_sharing_a_template_share_its_full_blocks_only() -> None:
    first = completion_block_hashes("m", _TEMPLATE + "Question: how many films?")
    second = completion_block_hashes("m", _TEMPLATE + "Question: which actor?")
    shared = len(_TEMPLATE) // BLOCK_CHARS
    assert first[:shared] == second[:shared]
    assert len(first) == (len(_TEMPLATE) + 25) // BLOCK_CHARS  # the trailing partial block is left out
    assert len(set(first[shared:]) & set(second)) == 0  # a difference in block k changes every hash from k on


def test_the_model_and_the_prompt_form_seed_the_chain() -> None:
    assert completion_block_hashes("a", _TEMPLATE)[0] != completion_block_hashes("b", _TEMPLATE)[0]
    assert completion_block_hashes(None, "x" * (BLOCK_CHARS - 1)) == ()  # under one block: nothing to share


def test_token_id_prompts_are_cut_into_blocks_of_ids() -> None:
    ids = list(range(5 * BLOCK_TOKENS + 3))
    hashes = completion_block_hashes("m", ids)
    assert len(hashes) == 5
    assert completion_block_hashes("m", [ids, [1, 2]]) == hashes  # several prompts: the first one's
    changed = completion_block_hashes("m", [*ids[: 2 * BLOCK_TOKENS], 999, *ids[2 * BLOCK_TOKENS + 1 :]])
    assert changed[:2] == hashes[:2] and changed[2] != hashes[2]
    assert completion_block_hashes("m", [_TEMPLATE, "other"]) == completion_block_hashes("m", _TEMPLATE)


def test_chat_hashes_roles_and_text_parts_in_order() -> None:
    system = {"role": "system", "content": _TEMPLATE}
    one = chat_block_hashes("m", [system, {"role": "user", "content": "how many films were made in 1999?" * 3}])
    two = chat_block_hashes("m", [system, {"role": "user", "content": [{"type": "text", "text": "which actor?" * 9}]}])
    assert one[:16] == two[:16] and one[-1] != two[-1]
    as_user = chat_block_hashes("m", [{"role": "user", "content": _TEMPLATE}])
    assert as_user[0] != one[0]  # the role is part of the prompt


def test_the_work_per_call_is_bounded() -> None:
    assert len(completion_block_hashes("m", "y" * BLOCK_CHARS * (MAX_BLOCKS + 40))) == MAX_BLOCKS
    assert len(completion_block_hashes("m", "\ud800" * BLOCK_CHARS)) == 1  # a lone surrogate JSON let through


@given(st.text(max_size=400), st.text(max_size=200), st.text(max_size=200))
def test_a_shared_prefix_shares_the_hashes_of_its_full_blocks(prefix: str, one: str, two: str) -> None:
    shared = len(prefix) // BLOCK_CHARS
    first, second = completion_block_hashes("m", prefix + one), completion_block_hashes("m", prefix + two)
    assert first[:shared] == second[:shared]
    if one[:BLOCK_CHARS] != two[:BLOCK_CHARS] and len(prefix) % BLOCK_CHARS == 0 and first[shared:] and second[shared:]:
        assert first[shared] != second[shared]
