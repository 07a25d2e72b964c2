"""The text a structured prompt carries: what a Messages or Responses call is sized by."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from slosched.gateway.calls.prompt_text import prompt_text

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.sampled_from(["text", "content", "input", "output", "type", "id"]), children, max_size=4)
    ),
    max_leaves=20,
)


def test_text_fields_count_in_order_and_everything_else_does_not() -> None:
    blocks = [
        {"type": "text", "text": "ab", "id": "not counted"},
        {"type": "tool_use", "input": {"q": 5}},  # an object under input counts as its JSON
        {"type": "tool_result", "content": [{"type": "text", "text": "cd"}, 7, None]},
        {"type": "image", "source": {"data": "AAAA"}},
    ]
    assert prompt_text(blocks) == 'ab{"q":5}cd'
    assert len(prompt_text({"input": {"q": 10**30}})) > 30  # past orjson's integers: counted by its digits
    nested: object = "deep"
    for _ in range(40):
        nested = {"content": [nested]}
    assert prompt_text(nested) == ""  # past the depth a prompt has: not read (and no recursion error)


@given(_json)
def test_any_json_gives_a_string_no_longer_than_its_own_json_and_never_raises(value: object) -> None:
    text = prompt_text(value)
    assert isinstance(text, str)
    assert len(text) <= len(repr(value)) + 2
