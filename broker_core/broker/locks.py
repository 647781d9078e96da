"""Queue locks for orderly consumption (RocketMQ ``RebalanceLockManager``).

An orderly consumer locks each queue it is assigned before pulling it, and renews the lock
every 20 s; a lock not renewed for 60 s (``lockMaxLiveTime``) expires, so a queue whose
consumer died goes to another member.  Only one client of a group holds a queue at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

QueueKey = tuple[str, str, int]  # (topic, broker name, queue id)
LOCK_MAX_LIVE_MS = 60_000


class RebalanceLockManager:
    def __init__(self, clock_ms: Callable[[], int], max_live_ms: int = LOCK_MAX_LIVE_MS) -> None:
        self._clock_ms = clock_ms
        self._max_live_ms = max_live_ms
        # group -> queue -> (client id, last renewal ms)
        self._locks: dict[str, dict[QueueKey, tuple[str, int]]] = {}

    def try_lock(self, group: str, queues: Iterable[QueueKey], client_id: str) -> list[QueueKey]:
        """Lock (or renew) what is free or already ours; return the queues now held by ``client_id``."""
        now = self._clock_ms()
        table = self._locks.setdefault(group, {})
        locked = []
        for queue in queues:
            holder = table.get(queue)
            if holder is None or holder[0] == client_id or now - holder[1] > self._max_live_ms:
                table[queue] = (client_id, now)
                locked.append(queue)
        return locked

    def unlock(self, group: str, queues: Iterable[QueueKey], client_id: str) -> None:
        table = self._locks.get(group, {})
        for queue in queues:
            holder = table.get(queue)
            if holder is not None and holder[0] == client_id:
                del table[queue]

    def holder(self, group: str, queue: QueueKey) -> str | None:
        entry = self._locks.get(group, {}).get(queue)
        if entry is None or self._clock_ms() - entry[1] > self._max_live_ms:
            return None
        return entry[0]
