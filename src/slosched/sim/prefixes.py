"""Prefix identities of the calls a simulated cluster releases: which full prompt blocks a prefix cache can share.

A call's ``prefix_key`` (a template, a session's earlier turns) names the blocks it shares with every call of
that key, and its ``group_key`` (rows of a relQuery whose leading fields agree) the blocks after them it shares
with its group only; the rest are its own. Keys become small positive integers, numbered as they first appear,
so the same calls in the same order get the same identities (records are reproducible).
"""

from __future__ import annotations

from slosched.core.job import CallSpec
from slosched.core.request import PrefixId


class PrefixKeys:
    __slots__ = ("_block_size", "_ids", "_next_own_key")

    def __init__(self, block_size: int) -> None:
        self._block_size = block_size
        self._ids: dict[str, int] = {}
        self._next_own_key = 0

    def of(self, call: CallSpec) -> PrefixId:
        """Full prompt blocks: shared ones keyed by the prefix identity, then the group's (blocks wholly
        within the group's tokens), the rest this call's own."""
        block_size = self._block_size
        num_full = call.input_tokens // block_size
        shared_key = 0
        num_shared = 0
        if call.prefix_key is not None:
            shared_key = self._ids.setdefault(call.prefix_key, len(self._ids) + 1)
            num_shared = min(call.prefix_tokens // block_size, num_full)
        self._next_own_key += 1
        if not call.group_tokens:
            return PrefixId(shared_key, num_shared, self._next_own_key, num_full - num_shared)
        # A group's blocks are keyed by the key and the group together (two relQueries' groups never meet).
        group_key = self._ids.setdefault(f"{call.prefix_key}\x00{call.group_key}", len(self._ids) + 1)
        shared_end = min((call.prefix_tokens + call.group_tokens) // block_size, num_full)
        return PrefixId(
            shared_key, num_shared, self._next_own_key, num_full - shared_end, group_key, shared_end - num_shared
        )
