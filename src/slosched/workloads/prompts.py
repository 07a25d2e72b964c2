"""Token-id prompts of an exact length for driving real engines (profiling, trace replay).

A text prompt's token count depends on the tokenizer, and identical prompts hit the engine's prefix cache;
both would corrupt a measurement. Ids 3..92 are the byte tokens of printable ASCII (``!`` to ``|``) in
slosched's generated tiny models and in the Llama-3 family alike. Printable matters: a prompt of bytes that
are not valid UTF-8 makes vLLM's streaming detokenizer emit the whole undecodable prompt with the first
token, which costs its API server ~100 ms per request here (measured) and would be charged to the engine.
"""

from __future__ import annotations

import hashlib

import numpy as np

_FIRST_ID, _ID_SPAN = 3, 90


def prompt_ids(input_tokens: int, salt: int, prefix_key: str | None = None, prefix_tokens: int = 0) -> list[int]:
    """``input_tokens`` ids: the first ``prefix_tokens`` a function of ``prefix_key`` only (calls sharing a
    key share that prefix in the engine's cache), the rest a function of ``salt`` (no accidental sharing
    between calls with different salts)."""
    shared = min(prefix_tokens, input_tokens) if prefix_key else 0
    ids: list[int] = []
    if prefix_key and shared:
        key_seed = int.from_bytes(hashlib.sha256(prefix_key.encode()).digest()[:8], "little")
        ids += (np.random.default_rng(key_seed).integers(0, _ID_SPAN, shared) + _FIRST_ID).tolist()
    own = input_tokens - shared
    ids += (np.random.default_rng([salt, 7]).integers(0, _ID_SPAN, own) + _FIRST_ID).tolist()
    return ids
