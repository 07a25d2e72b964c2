"""The TPOT SLOs of the calls a router has placed on each instance and not yet seen finish.

A router that places a call on an instance also grows the batch every call already decoding there steps
in. Routers see an instance's batch size, not the SLOs of the calls in it, so the router keeps its own book:
each call with a TPOT SLO is entered where it was routed and struck off when the runtime reports it
finished (``FinishObserver``: the simulator and the gateway both do). A call that never reports back
(rejected, dropped, its backend lost) leaves the book when the time it could take while meeting its SLOs
has passed ``LINGER`` times over, so a lost report cannot hold an instance's bar down for long.

Instances are few and SLO classes fewer; each instance's entries are scanned per decision (a few dozen
calls where this matters), which costs less than keeping a heap in step with finishes and expiries.
"""

from __future__ import annotations

import math

from slosched.core.request import Request

LINGER = 4.0  # x a call's longest SLO-meeting duration before an unreported call leaves the book


class TpotResidents:
    """Per instance index: request id -> (TPOT SLO, when the entry lapses unreported)."""

    __slots__ = ("_books",)

    def __init__(self) -> None:
        self._books: dict[int, dict[str, tuple[float, float]]] = {}

    def on_routed(self, request: Request, index: int, now_s: float) -> None:
        if request.tpot_slo_s is None:
            return
        longest = (request.ttft_slo_s or 0.0) + max(request.predicted_output_tokens, 1.0) * request.tpot_slo_s
        self._books.setdefault(index, {})[request.id] = (request.tpot_slo_s, now_s + LINGER * longest)

    def on_finished(self, request: Request, index: int) -> None:
        book = self._books.get(index)
        if book is not None:
            book.pop(request.id, None)

    def tightest_s(self, index: int, now_s: float) -> float:
        """The smallest TPOT SLO among the calls on instance ``index`` (inf: none), lapsed entries dropped."""
        book = self._books.get(index)
        if not book:
            return math.inf
        tightest = math.inf
        lapsed = []
        for request_id, (tpot_s, until_s) in book.items():
            if until_s < now_s:
                lapsed.append(request_id)
            elif tpot_s < tightest:
                tightest = tpot_s
        for request_id in lapsed:
            del book[request_id]
        return tightest

    def __len__(self) -> int:
        return sum(len(book) for book in self._books.values())
