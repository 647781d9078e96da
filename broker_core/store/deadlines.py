"""One timer for many waiters: ``Deadlines`` answers False for a future that has no answer
within a fixed timeout (a SYNC_FLUSH put's wait for the disk or for a slave).

A timer per waiter (``loop.call_later`` and its ``cancel``) costs uvloop a few
microseconds, a tenth of what the loop spends on a SYNC_FLUSH append.  Every waiter here
gets the same timeout, so deadlines come in the order waiters do: a FIFO with one timer
at its head does the same work for a deque append.
"""

from __future__ import annotations

import asyncio
from collections import deque


class Deadlines:
    """Futures on one event loop that must be answered within ``timeout_s``."""

    def __init__(self, loop: asyncio.AbstractEventLoop, timeout_s: float) -> None:
        self.loop = loop
        self.timeout_s = timeout_s
        self._waiting: deque[tuple[float, asyncio.Future[bool]]] = deque()
        self._timer: asyncio.TimerHandle | None = None

    def add(self, future: asyncio.Future[bool]) -> None:
        """Answer ``future`` False unless it is done within the timeout (from now)."""
        waiting = self._waiting
        while waiting and waiting[0][1].done():  # answered in time: they leave at the head
            waiting.popleft()
        waiting.append((self.loop.time() + self.timeout_s, future))
        if self._timer is None:
            self._timer = self.loop.call_at(waiting[0][0], self._expire)

    def _expire(self) -> None:
        self._timer = None
        now = self.loop.time()
        waiting = self._waiting
        while waiting and (waiting[0][0] <= now or waiting[0][1].done()):
            _deadline, future = waiting.popleft()
            if not future.done():
                future.set_result(False)
        if waiting:
            self._timer = self.loop.call_at(waiting[0][0], self._expire)

    def __len__(self) -> int:
        """Waiters not yet let go (some may have been answered since)."""
        return len(self._waiting)
