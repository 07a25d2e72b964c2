"""Token-id prompts of an exact length for driving real engines (profiling, trace replay).

A text prompt's token count depends on the tokenizer, and identical prompts hit the engine's prefix cache;
both would corrupt a measurement. Ids 3..252 are byte tokens of any byte-level BPE vocabulary (slosched's
generated tiny models and the Llama-3 family alike), so every id is valid for every model slosched serves.
"""

from __future__ import annotations

import hashlib

import numpy as np

_FIRST_ID, _ID_SPAN = 3, 250


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
