"""The dispatcher: follows the commit log and updates consume queues and the index (RocketMQ *reput*).

In normal running the commit log hands each append's dispatch entry to ``CommitLog.appended``
and the dispatcher drains it in commit-log order, so nothing is decoded twice.  On a slave
the entries are the records its master's chunks completed, decoded (``store.replica``).

Who drains: under the GIL a second thread adds no parallelism, only lock handoffs, which
cost more than the dispatching itself.  So the work is shared: while appends keep coming,
the appending thread drains every ``INLINE_DRAIN_BYTES`` of records (``maybe_drain``).  An
owner with an event loop (the broker) also sets ``drain_soon``: the tail an append leaves
is then drained by the loop once the answers of its iteration are written, unless that
would create a file or fault one in (a new consume-queue or index file costs 10-40 ms,
too long to hold a loop): the dispatcher thread is woken for those, and otherwise is only
a safety net that polls every ``SCHEDULED_POLL_INTERVAL_SECONDS``.  Without ``drain_soon``
the thread drains a tail that nobody else is draining, within about
``POLL_INTERVAL_SECONDS`` of the last append.  (A thread that wakes every millisecond
costs a loop serving one-at-a-time sends about a fifth of its sends: each wake takes the
GIL from the loop.)  Either way records are dispatched in order, by one thread at a time,
shortly after the append returned.  After a crash
(or to rebuild) the store re-reads the log and feeds ``dispatch_request`` instead; both
paths produce the same entries, which the rebuild test checks byte for byte.

``dispatched_offset`` is the commit-log offset below which every record's consume-queue
and index entries are written; the flush thread checkpoints it once they are flushed.

When the disk is full a consume-queue file cannot be created: the entry stays at the head
of the queue and is retried, so nothing is skipped.  (Index keys that find no file wait in
the index service instead: see ``indexfile``.)
"""

from __future__ import annotations

import errno
import logging
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from broker_core.model.hashcode import tags_code as tags_code_of
from broker_core.model.message import (
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    DispatchRequest,
    DispatchRun,
    MessageInner,
)
from broker_core.store.indexfile import record_items
from broker_core.topics import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from broker_core.store.commitlog import Appended, CommitLog
    from broker_core.store.consumequeue import ConsumeQueueStore
    from broker_core.store.indexfile import IndexService

log = logging.getLogger(__name__)

# Called after a batch of dispatches with {(topic, queue id): messages added there}: the
# broker wakes long-polling pulls with it (RocketMQ MessageArrivingListener) and counts
# its puts.
ArrivalListener = Callable[[dict[tuple[str, int], int]], None]

_SKIP_CQ = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
_CQ_ENTRY = struct.Struct(">qiq")  # the consume-queue entry layout (consumequeue.py)
_RETRY_SECONDS = 1.0
_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
POLL_INTERVAL_SECONDS = 0.001
SCHEDULED_POLL_INTERVAL_SECONDS = 0.05
"""The dispatcher thread's poll when ``drain_soon`` drains tails (a safety net only)."""
QUICK_DRAIN_MAX = 256
"""Records waiting past which the owner's loop leaves the drain to the dispatcher thread."""
_INDEX_ITEMS_PER_RECORD = 4  # room asked of the index per record (its unique key and a few keys)
MAX_BATCH = 4096
# The appending thread drains once this many bytes of records await dispatch.
INLINE_DRAIN_BYTES = 256 * 1024


def queue_tags_code(req: DispatchRequest, delay_levels_ms: Sequence[int]) -> int:
    """The tagsCode of ``req``'s consume-queue entry (a delayed message's is its due time)."""
    if req.topic == SCHEDULE_TOPIC:
        return delay_due_time(req.store_timestamp, req.queue_id, delay_levels_ms)
    return req.tags_code


def delay_due_time(store_timestamp: int, queue_id: int, delay_levels_ms: Sequence[int]) -> int:
    """When a record of ``SCHEDULE_TOPIC``'s queue ``queue_id`` (one queue per delay level)
    is due: its consume-queue entry's tagsCode."""
    return store_timestamp + delay_levels_ms[min(queue_id, len(delay_levels_ms) - 1)]


class Dispatcher:
    """Background thread that turns appended records into queue and index entries."""

    def __init__(
        self,
        commit_log: CommitLog,
        consume_queues: ConsumeQueueStore,
        index: IndexService | None,
        delay_levels_ms: tuple[int, ...],
        *,
        on_disk_full: Callable[[OSError], None] = lambda exc: None,
    ) -> None:
        self.commit_log = commit_log
        self.consume_queues = consume_queues
        self.index = index
        self.delay_levels_ms = delay_levels_ms
        self.dispatched_offset = 0
        self.last_store_timestamp = 0
        self.listeners: list[ArrivalListener] = []
        # Whether someone waits for a queue's next message (held pulls): an append there is
        # dispatched at once by the appending thread, not at the thread's next poll.
        self.prompt: Callable[[str, int], bool] | None = None
        # Asks the owner's event loop to call ``drain_asked`` soon; thread-safe (see the
        # module docstring).  Called once per drain, not per append.
        self.drain_soon: Callable[[], None] | None = None
        self._drain_asked = False
        self._wake = threading.Event()  # the loop hands the thread a drain it should not do
        self._on_disk_full = on_disk_full
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._drain_lock = threading.Lock()

    # -- entry points ------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="dispatcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Dispatch what is pending, then stop the thread."""
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.drain()

    def wait_dispatched(self, offset: int, timeout: float = 5.0) -> bool:
        """Block until everything below commit-log ``offset`` is dispatched (tests, admin)."""
        deadline = time.monotonic() + timeout
        while self.dispatched_offset < offset:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    # -- the loop ----------------------------------------------------------------------

    def _run(self) -> None:
        appended = self.commit_log.appended
        seen = -1
        wake = self._wake
        while not self._stopping:
            interval = POLL_INTERVAL_SECONDS if self.drain_soon is None else SCHEDULED_POLL_INTERVAL_SECONDS
            woken = wake.wait(interval)
            if woken:
                wake.clear()
            if not appended:
                continue
            progress = self.dispatched_offset
            if not woken and progress != seen and self.commit_log.records_end - progress < INLINE_DRAIN_BYTES:
                # Someone (the appending thread) is draining: leave the tail to it for now.
                seen = progress
                continue
            try:
                self.drain()
            except Exception as exc:  # never let the thread die: nothing would be dispatched
                log.error("dispatch failed, retrying in %.0fs: %s", _RETRY_SECONDS, exc)
                if isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS:
                    self._on_disk_full(exc)
                time.sleep(_RETRY_SECONDS)
            seen = self.dispatched_offset

    def maybe_drain(self, topic: str = "", queue_id: int = 0) -> None:
        """Drain now if enough records are waiting, or if someone waits for ``topic``'s
        ``queue_id`` (called by the appending thread after an append there)."""
        if self._thread is None:
            return
        if self.commit_log.records_end - self.dispatched_offset >= INLINE_DRAIN_BYTES or (
            self.prompt is not None and self.prompt(topic, queue_id)
        ):
            self._drain_now()
        elif self.drain_soon is not None and not self._drain_asked:
            self._drain_asked = True
            try:
                self.drain_soon()
            except Exception as exc:  # a closed loop, say: the dispatcher thread drains it
                self._drain_asked = False
                log.debug("cannot ask for a drain (the dispatcher thread will do it): %s", exc)

    def drain_asked(self) -> None:
        """Drain what ``drain_soon`` was asked for (on the owner's loop), or wake the
        dispatcher thread for it when it would create or fault in a file."""
        self._drain_asked = False
        if self._thread is None:
            return
        if not self._quick_to_dispatch() or (not self._drain_now() and self.commit_log.appended):
            self._wake.set()  # (or the thread held the drain just then: it takes the rest)

    def _quick_to_dispatch(self) -> bool:
        """Whether the records waiting fit the consume queues' and the index's current files
        (no file to create, no pages to fault in) and are few enough for a loop to take."""
        appended = self.commit_log.appended
        if len(appended) == 1:  # one-at-a-time sends: one record, checked without the tallies
            try:
                _phys, _size, _queue_offset, _store_ts, msg = appended[0]
            except IndexError:  # the dispatcher thread took it meanwhile
                return True
            if not isinstance(msg, DispatchRun):
                cq = self.consume_queues.find(msg.topic, msg.queue_id)
                if cq is None or not cq.has_room(1):
                    return False
                props = msg.properties
                return (
                    self.index is None
                    or ("UNIQ_KEY" not in props and "KEYS" not in props)
                    or self.index.has_room(_INDEX_ITEMS_PER_RECORD)
                )
        elif len(appended) > QUICK_DRAIN_MAX:
            return False
        waiting = list(self.commit_log.appended)  # (a copy: other threads may append)
        entries: dict[tuple[str, int], int] = {}
        keys = 0  # index keys, about
        for _phys, _size, _queue_offset, _store_ts, msg in waiting:
            key = (msg.topic, msg.queue_id)
            if isinstance(msg, DispatchRun):
                entries[key] = entries.get(key, 0) + msg.count
                keys += len(msg.index_items)
            else:
                entries[key] = entries.get(key, 0) + 1
                if "UNIQ_KEY" in msg.properties or "KEYS" in msg.properties:
                    keys += _INDEX_ITEMS_PER_RECORD
        for (topic, queue_id), count in entries.items():
            cq = self.consume_queues.find(topic, queue_id)
            if cq is None or not cq.has_room(count):
                return False
        return not keys or self.index is None or self.index.has_room(keys)

    def _drain_now(self) -> int:
        """Drain unless another thread is; how many were dispatched (0 on a failure)."""
        try:
            return self.drain(blocking=False)
        except Exception as exc:  # the append succeeded; the dispatcher thread retries
            log.warning("inline dispatch failed (the dispatcher thread will retry): %s", exc)
            if isinstance(exc, OSError) and exc.errno in _NO_SPACE_ERRNOS:
                self._on_disk_full(exc)
            return 0

    def drain(self, *, blocking: bool = True) -> int:
        """Dispatch every appended record now; return how many.

        One thread at a time: with ``blocking=False`` a call that finds another thread
        draining returns 0 at once.  Entries are taken as a batch; consume-queue entries are
        grouped per queue and written with one call per group; index keys are added in
        commit-log order.  If a write fails (no space for a new file) the whole batch goes
        back to the head of the queue: re-dispatching is idempotent, so nothing is lost or
        doubled.
        """
        if not self._drain_lock.acquire(blocking):
            return 0
        try:
            return self._drain_locked()
        finally:
            self._drain_lock.release()

    def _drain_locked(self) -> int:
        appended = self.commit_log.appended
        total = 0
        while appended:
            batch = [appended.popleft() for _ in range(min(len(appended), MAX_BATCH))]
            try:
                self._dispatch_batch(batch)
            except BaseException:
                appended.extendleft(reversed(batch))
                raise
            total += len(batch)
        return total

    def run_drained(self, action: Callable[[], None]) -> None:
        """Dispatch everything pending, then run ``action`` before anything else is dispatched."""
        with self._drain_lock:
            self._drain_locked()
            action()

    def _dispatch_batch(self, batch: list[Appended]) -> None:
        if len(batch) == 1:
            phys, size, queue_offset, store_ts, msg = batch[0]
            if type(msg) is MessageInner:
                self._dispatch_one(phys, size, queue_offset, store_ts, msg)
                return
        delays = self.delay_levels_ms
        pack = _CQ_ENTRY.pack
        # Per queue: packed 20-byte entries, in queue order, and the first one's offset.
        groups: dict[tuple[str, int], list[bytes]] = {}
        first_offsets: dict[tuple[str, int], int] = {}
        next_offsets: dict[tuple[str, int], int] = {}
        index_items: list[tuple[str, str, int, int]] = []
        for phys, size, queue_offset, store_ts, msg in batch:
            topic = msg.topic
            if isinstance(msg, DispatchRun):
                # A whole encoded batch (or a slave's run of one queue's records): its
                # entries come packed.  A run of none is a slave's half or rollback message.
                entries, count, items = msg.cq_entries, msg.count, msg.index_items
                if not count:
                    index_items.extend(items)
                    continue
            else:
                props = msg.properties
                items = record_items(topic, phys, store_ts, props.get("UNIQ_KEY"), props.get("KEYS"))
                if msg.sys_flag & TRANSACTION_TYPE_MASK in _SKIP_CQ:
                    index_items.extend(items)
                    continue
                # A slave's record (MessageExt, from its master's bytes) has its tags' hash made here.
                tags_code = (
                    msg.tags_code if isinstance(msg, MessageInner) else tags_code_of(props.get("TAGS"))
                )
                if topic == SCHEDULE_TOPIC:
                    tags_code = delay_due_time(store_ts, msg.queue_id, delays)
                entries, count = pack(phys, size, tags_code), 1
            key = (topic, msg.queue_id)
            chunks = groups.get(key)
            if chunks is None:
                chunks = groups[key] = []
                first_offsets[key] = queue_offset
            elif next_offsets[key] != queue_offset:
                # Not consecutive (cannot happen from one commit log): write the group so far.
                self._put_group(key, first_offsets[key], chunks)
                chunks = groups[key] = []
                first_offsets[key] = queue_offset
            chunks.append(entries)
            next_offsets[key] = queue_offset + count
            index_items.extend(items)
        arrived: dict[tuple[str, int], int] = {}
        for key, chunks in groups.items():
            if chunks:
                self._put_group(key, first_offsets[key], chunks)
                arrived[key] = sum(map(len, chunks)) // _CQ_ENTRY.size
        if self.index is not None and index_items:
            self.index.add_items(index_items)
        phys, size, _queue_offset, store_ts, _msg = batch[-1]
        self._dispatched(phys + size, store_ts, arrived)

    def _dispatch_one(
        self, phys: int, size: int, queue_offset: int, store_ts: int, msg: MessageInner
    ) -> None:
        """``_dispatch_batch`` of one message's record (a one-at-a-time send's), with none of
        the per-queue grouping: the same entries, index items and arrivals."""
        topic, props = msg.topic, msg.properties
        items = record_items(topic, phys, store_ts, props.get("UNIQ_KEY"), props.get("KEYS"))
        arrived = None
        if msg.sys_flag & TRANSACTION_TYPE_MASK not in _SKIP_CQ:
            tags_code = msg.tags_code
            if topic == SCHEDULE_TOPIC:
                tags_code = delay_due_time(store_ts, msg.queue_id, self.delay_levels_ms)
            key = (topic, msg.queue_id)
            self.consume_queues.find_or_create(*key).put_packed(
                _CQ_ENTRY.pack(phys, size, tags_code), queue_offset
            )
            arrived = {key: 1}
        if self.index is not None and items:
            self.index.add_items(items)
        self._dispatched(phys + size, store_ts, arrived)

    def _dispatched(self, end: int, store_ts: int, arrived: dict[tuple[str, int], int] | None) -> None:
        """Records up to commit-log offset ``end`` (the last stored at ``store_ts``) are in
        their queues and the index: say so, and tell the listeners what ``arrived``."""
        self.dispatched_offset = end
        self.last_store_timestamp = store_ts
        if arrived:
            for listener in self.listeners:
                try:
                    listener(arrived)
                except Exception:  # a listener's bug must not stop dispatching
                    log.exception("message arrival listener failed")

    def _put_group(self, key: tuple[str, int], first_offset: int, chunks: list[bytes]) -> None:
        raw = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        self.consume_queues.find_or_create(*key).put_packed(raw, first_offset)

    def _queue_tags_code(self, req: DispatchRequest) -> int:
        return queue_tags_code(req, self.delay_levels_ms)

    def entry_disagreement(self, req: DispatchRequest) -> str | None:
        """How the consume-queue entry already written for ``req`` disagrees with the record.

        The entry was made from the record as it was appended: a record whose size or tag
        hash no longer matches it has been damaged since (this covers its properties, which
        the body CRC does not).  None when they agree, or when there is no entry to compare.
        """
        if req.sys_flag & TRANSACTION_TYPE_MASK in _SKIP_CQ:
            return None
        cq = self.consume_queues.find(req.topic, req.queue_id)
        entry = cq.get(req.queue_offset) if cq is not None and req.queue_offset < cq.max_offset else None
        if entry is None or entry[0] != req.commit_log_offset:
            return None
        if entry[1] != req.msg_size:
            return f"its size {req.msg_size} differs from its consume-queue entry's {entry[1]}"
        if entry[2] != self._queue_tags_code(req):
            return "its tag hash differs from its consume-queue entry's (damaged properties)"
        return None

    def dispatch_request(self, req: DispatchRequest) -> None:
        """Dispatch one record read back from the commit log (recovery, rebuild)."""
        if req.sys_flag & TRANSACTION_TYPE_MASK not in _SKIP_CQ:
            cq = self.consume_queues.find_or_create(req.topic, req.queue_id)
            cq.put(req.commit_log_offset, req.msg_size, self._queue_tags_code(req), req.queue_offset)
        if self.index is not None:
            self.index.build_index(
                req.topic, req.commit_log_offset, req.store_timestamp, req.uniq_key, req.keys
            )
        self.dispatched_offset = req.commit_log_offset + req.msg_size
        self.last_store_timestamp = req.store_timestamp
