"""Read one queue's offset range from its broker, fast and without a consumer group.

What Spark's executors (and any bulk reader) use: tool pulls (``TOOLS_CONSUMER``, the
subscription carried in the request, nothing committed) over the range ``[start, end)``,
several in flight at once so the round trip is not paid once per 32 messages (the broker
returns at most ``maxTransferCountOnMessageInMemory`` messages a pull).  Messages come
out in queue-offset order.

Offsets that no longer exist (expired files: the broker answers OFFSET_MOVED) are
skipped and counted in ``ScanStats.missing``, never silently: a report over a range that
was partly deleted says so.

Thread-safety: one scan per event loop task; the ``AdminClient`` may be shared.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker_core.client.admin.messages import PULL_BATCH
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageExt, iter_records
from broker_core.remoting.codes import ResponseCode

if TYPE_CHECKING:
    from broker_core.client.admin import AdminClient

DEFAULT_PIPELINE_DEPTH = 8
# A window that keeps coming back empty without moving (a broker bug, a racing expiry)
# is given up after this many pulls rather than looping.
_MAX_STUCK_PULLS = 3


@dataclass
class ScanStats:
    """What a scan read: messages returned and offsets found missing (deleted or never there)."""

    messages: int = 0
    missing: int = 0
    pulls: int = 0
    bytes: int = 0


async def _pull(
    admin: AdminClient, addr: str, queue: MessageQueue, offset: int, count: int
) -> tuple[int, int, bytes]:
    """One tool pull: (response code, next begin offset, body)."""
    reply = await admin.pull_tool(addr, queue, offset, count)
    return reply.code, reply.header.next_offset_or(offset), reply.body


async def _read_window(
    admin: AdminClient, addr: str, queue: MessageQueue, start: int, stop: int, stats: ScanStats
) -> list[MessageExt]:
    """Every message of ``[start, stop)`` (at most one pull's worth: stop - start <= PULL_BATCH)."""
    found: list[MessageExt] = []
    offset = start
    stuck = 0
    while offset < stop:
        code, next_offset, body = await _pull(admin, addr, queue, offset, stop - offset)
        stats.pulls += 1
        if code == ResponseCode.SUCCESS:
            got = [m for m in iter_records(body) if offset <= m.queue_offset < stop]
            if got:
                if got[0].queue_offset > offset:  # a hole before what came back
                    stats.missing += got[0].queue_offset - offset
                found.extend(got)
                stats.bytes += len(body)
                offset = got[-1].queue_offset + 1
                stuck = 0
                continue
        if code == ResponseCode.PULL_NOT_FOUND and next_offset <= offset:
            # The queue ends before the planned end (a slave behind, a truncated tail):
            # what was planned and is not there is missing, and said so.
            stats.missing += stop - offset
            break
        if next_offset > offset:  # moved on: everything skipped is gone
            stats.missing += min(next_offset, stop) - offset
            offset = next_offset
            stuck = 0
            continue
        stuck += 1
        if stuck >= _MAX_STUCK_PULLS:
            stats.missing += stop - offset
            break
    return found


async def scan_queue(
    admin: AdminClient,
    addr: str,
    queue: MessageQueue,
    start: int,
    end: int,
    *,
    stats: ScanStats | None = None,
    depth: int = DEFAULT_PIPELINE_DEPTH,
) -> AsyncGenerator[list[MessageExt], None]:
    """Yield the messages of ``queue`` with offsets in ``[start, end)``, in order, a pull's
    worth at a time, keeping ``depth`` pulls in flight.

    Raises:
        AdminError: the broker refused a pull (no such topic, ACL) or did not answer.
    """
    if start < 0 or end < start:
        raise AdminError(f"bad offset range [{start}, {end}) for {queue}")
    stats = stats if stats is not None else ScanStats()
    windows = iter(range(start, end, PULL_BATCH))
    pending: list[asyncio.Task[list[MessageExt]]] = []

    def submit() -> bool:
        window = next(windows, None)
        if window is None:
            return False
        stop = min(window + PULL_BATCH, end)
        pending.append(asyncio.ensure_future(_read_window(admin, addr, queue, window, stop, stats)))
        return True

    try:
        while len(pending) < max(1, depth) and submit():
            pass
        while pending:
            batch = await pending.pop(0)
            submit()
            stats.messages += len(batch)
            if batch:
                yield batch
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
