"""Small asyncio helpers shared by the servers."""

from __future__ import annotations

import asyncio
import contextlib


async def stop_task(task: asyncio.Task[object] | None) -> None:
    """Cancel a background task and wait until it has finished (no-op for None)."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
