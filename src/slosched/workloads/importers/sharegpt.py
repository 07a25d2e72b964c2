"""ShareGPT (JSON): a list of ``{"id", "conversations": [{"from", "value"}, ...]}``.

Token counts are estimated as ``ceil(chars / 4)`` (at least 1): OpenAI's rule of thumb for English text
with BPE tokenizers; no tokenizer is a slosched dependency, and a capacity plan needs lengths' scale and
spread more than exact counts. Each assistant reply (``from`` = ``gpt``/``assistant``/``chatgpt``/``bard``/
``bing``) is one call whose prompt is everything said before it in the conversation (system, user and
earlier replies) and whose output is the reply. Calls of one conversation form a session, as the
``flowgpt`` generator does: ``session_id`` = ``prefix_key`` = ``sharegpt/<id>``, ``prefix_tokens`` = the
previous turn's prompt plus its reply (what a prefix cache holds).

ShareGPT has no timestamps: conversations start as a Poisson process of 1 per second (seed 0, so the
import is deterministic; ``--rate-scale`` scales it) and the turns of one conversation arrive
``THINK_TIME_S`` apart (open loop). Dropped: the text itself, roles other than the assistant's beyond
their length, trailing user turns without a reply, conversations without a reply (counted as skipped
rows by the caller when they produce no call). ``--limit`` counts calls.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from slosched.core.errors import ConfigError
from slosched.workloads.importers.base import TraceRow, show

CHARS_PER_TOKEN = 4
THINK_TIME_S = 30.0
ASSISTANT_ROLES = frozenset({"gpt", "assistant", "chatgpt", "bard", "bing"})


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``, at least 1."""
    return max(1, math.ceil(len(text) / CHARS_PER_TOKEN))


@dataclass(slots=True, frozen=True)
class ShareGptImporter:
    name: str = "sharegpt"
    summary: str = "ShareGPT JSON: conversations of from/value turns (4 chars per token; sessions)"

    def rows(self, path: Path, limit: int | None) -> Iterator[TraceRow]:
        conversations = _load(path)
        starts = np.cumsum(np.random.default_rng(0).exponential(1.0, size=len(conversations)))
        count = 0
        for index, (conversation, start) in enumerate(zip(conversations, starts.tolist(), strict=True)):
            for row in _calls(conversation, index, float(start), path):
                if limit is not None and count >= limit:
                    return
                yield row
                count += 1


def _load(path: Path) -> list[Any]:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as error:
        raise ConfigError(str(path), f"cannot read: {error.strerror or error}") from None
    except UnicodeDecodeError:
        raise ConfigError(str(path), "not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path} line {error.lineno}, column {error.colno}", f"bad JSON: {error.msg}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path} line 1", "expected a JSON list of conversations")
    return data


def _field(path: Path, index: int, field: str) -> str:
    # JSON values carry no line numbers once parsed; the conversation index and the field locate them.
    return f"{path} conversation {index}, field {field}"


def _calls(conversation: Any, index: int, start_s: float, path: Path) -> Iterator[TraceRow]:
    if not isinstance(conversation, dict):
        raise ConfigError(_field(path, index, "conversations"), f"expected an object, got {show(conversation)}")
    turns = conversation.get("conversations")
    if not isinstance(turns, list):
        raise ConfigError(_field(path, index, "conversations"), f"expected a list of turns, got {show(turns)}")
    session = f"sharegpt/{str(conversation.get('id', index))[:64]}"
    context = previous = 0
    number = 0
    for position, turn in enumerate(turns):
        role, value = _turn(turn, path, index, position)
        tokens = estimate_tokens(value)
        if role in ASSISTANT_ROLES and context > 0:
            yield TraceRow(
                arrival_s=start_s + number * THINK_TIME_S,
                input_tokens=context,
                output_tokens=tokens,
                line=index,
                template="sharegpt",
                prefix_key=session if previous else None,
                prefix_tokens=previous,
                session_id=session,
            )
            number += 1
            previous = context + tokens
        context += tokens


def _turn(turn: Any, path: Path, index: int, position: int) -> tuple[str, str]:
    where = f"conversations[{position}]"
    if not isinstance(turn, dict):
        raise ConfigError(_field(path, index, where), f"expected an object, got {show(turn)}")
    role, value = turn.get("from"), turn.get("value")
    if not isinstance(role, str):
        raise ConfigError(_field(path, index, f"{where}.from"), f"expected a string, got {show(role)}")
    if not isinstance(value, str):
        raise ConfigError(_field(path, index, f"{where}.value"), f"expected a string, got {show(value)}")
    return role.strip().lower(), value


SHAREGPT = ShareGptImporter()
