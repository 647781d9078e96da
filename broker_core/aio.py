"""Small asyncio helpers shared by the servers."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable


async def stop_task(task: asyncio.Task[object] | None) -> None:
    """Cancel a background task and wait until it has finished (no-op for None)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def after_writes(loop: asyncio.AbstractEventLoop) -> Callable[[Callable[[], None]], None]:
    """``soon(fn)``: run ``fn`` on ``loop``, called from any thread.

    From the loop's own thread, ``fn`` runs in the next iteration, after the callbacks
    already queued in this one (the connections' corked writes, so answers go out
    before the work ``fn`` does); from another thread, as soon as the loop wakes.
    """
    loop_thread = threading.get_ident()

    def soon(fn: Callable[[], None]) -> None:
        if threading.get_ident() == loop_thread:
            loop.call_soon(loop.call_soon, fn)
        else:
            loop.call_soon_threadsafe(fn)

    return soon
