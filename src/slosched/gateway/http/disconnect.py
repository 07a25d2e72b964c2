"""Noticing that an HTTP client left while its call waits (in a queue, on a backend, or mid-stream).

ASGI reports a disconnect only to a pending ``receive()``; once the request body is read nothing else
arrives, so one watcher task waits on ``receive`` for the rest of the call and cancels the call's task when
the client goes. The watcher starts ``WATCH_AFTER_S`` into the call: a task costs ~10 us, a call that ends
sooner needs none, and a disconnect before then is still reported (ASGI servers remember it) at that point.
The cancellation unwinds the wait wherever it is: a queued call leaves its queue, a forwarded one closes its
backend connection (vLLM aborts a request whose connection closes), a stream stops. A queued call is taken out
of its queue (``on_gone``) before the cancellation is even delivered: when a running and a queued client leave
in the same instant, the running call's unwinding frees a slot that must not go to the queued one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
WATCH_AFTER_S = 0.01


class DisconnectWatch:
    """Cancels the task that ``start``ed it when ``receive`` reports ``http.disconnect``; set ``done``
    before the response's last write (completing a response wakes ``receive`` too)."""

    __slots__ = ("_on_gone", "_receive", "_task", "_timer", "_watcher", "done", "gone")

    def __init__(self, receive: Callable[[], Awaitable[Message]], on_gone: Callable[[], None] | None = None) -> None:
        self._receive = receive
        self._on_gone = on_gone  # runs before the cancellation, in the callback that learns the client left
        self._task: asyncio.Task[Any] | None = None
        self._watcher: asyncio.Future[Message] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self.done = False
        self.gone = False

    def start(self, after_s: float = WATCH_AFTER_S) -> None:
        """Watch the calling task's client, from ``after_s`` on."""
        self._task = asyncio.current_task()
        self._timer = asyncio.get_running_loop().call_later(after_s, self._watch)

    def _watch(self) -> None:
        self._timer = None
        if self.done:
            return
        watcher = asyncio.ensure_future(self._receive())
        watcher.add_done_callback(self._on_message)
        self._watcher = watcher

    def _on_message(self, watcher: asyncio.Future[Message]) -> None:
        self._watcher = None
        if self.done or watcher.cancelled():
            return
        if watcher.exception() is None and watcher.result()["type"] != "http.disconnect":
            self._watch()  # not a disconnect (nothing else is expected once the body was read): keep watching
            return
        self.gone = True
        if self._on_gone is not None:
            self._on_gone()
        if self._task is not None:
            self._task.cancel()

    def absorb(self) -> bool:
        """Inside ``except CancelledError``: True when the cancellation is this watch's (the client left),
        which is then taken back; False when someone else cancels the task (re-raise then)."""
        if not self.gone or self._task is None:
            return False
        return self._task.cancelling() == 0 or self._task.uncancel() == 0

    def stop(self) -> None:
        self.done = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._watcher is not None:
            self._watcher.cancel()
            self._watcher = None
