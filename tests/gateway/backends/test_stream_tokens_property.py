"""Property: however a backend's stream of n interleaved choices is cut into reads, ``StreamTokens`` passes
every byte of every whole event on unchanged (less the usage event it asked for), counts every choice's
tokens in ``total`` and moves the queue entry by one sequence's share of them."""

from __future__ import annotations

import asyncio
import json
from typing import cast

from hypothesis import given, settings
from hypothesis import strategies as st

from slosched.core.request import Request
from slosched.gateway.backends.forwarding import StreamTokens
from slosched.gateway.calls.call import per_sequence
from slosched.gateway.dispatch.queues import LiveSeq


def _seq(sequences: int) -> LiveSeq:
    request = Request(
        id="r", job_id="j", stage="s", template="t", prompt_tokens=3, max_output_tokens=64,
        arrival_s=0.0, job_arrival_s=0.0,
    )  # fmt: skip
    return LiveSeq(request, 3, 0.0, cast("asyncio.Future[None]", None), sequences=sequences)


def _event(choice: int) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": choice, "text": "x"}]}).encode() + b"\n\n"


@settings(max_examples=200, deadline=None)
@given(
    sequences=st.integers(1, 6),
    steps=st.integers(0, 12),
    with_usage=st.booleans(),
    cuts=st.lists(st.integers(0, 4000), max_size=12),
)
def test_any_chunking_of_n_interleaved_choices(sequences: int, steps: int, with_usage: bool, cuts: list[int]) -> None:
    events = b"".join(_event(choice) for _ in range(steps) for choice in range(sequences))
    usage = b'data: {"choices":[],"usage":{"completion_tokens":%d}}\n\n' % (steps * sequences)
    stream = events + (usage if with_usage else b"") + b"data: [DONE]\n\n"
    seq = _seq(sequences)
    tokens = StreamTokens(seq, lambda: 1.0, strip_usage=True)
    points = sorted({min(cut, len(stream)) for cut in cuts})
    pieces = [stream[a:b] for a, b in zip([0, *points], [*points, len(stream)], strict=True)]
    out = b"".join(tokens.feed(piece) for piece in pieces) + tokens.flush()
    assert out == events + b"data: [DONE]\n\n" and tokens.done
    assert tokens.total == steps * sequences
    assert seq.num_output_tokens == per_sequence(steps * sequences, sequences)
    assert (seq.first_token_s is not None) == (steps > 0)
