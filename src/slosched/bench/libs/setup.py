"""What ``slosched bench libs`` measures: one ``Pair`` per part, the hand-written way and the library's way of
doing the same work, each a function of no arguments doing one batch."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

QUICK_ROUNDS, FULL_ROUNDS = 3, 9


@dataclass(frozen=True, slots=True)
class Pair:
    """``ours`` and ``library`` do the same batch of ``ops`` operations (``unit`` names one)."""

    part: str  # the row name, e.g. "sse"
    library: str  # the library and version measured
    ours: Callable[[], object]
    theirs: Callable[[], object]
    ops: int
    unit: str
    reps: int = 20  # batches per timing
