"""Timer messages: any delivery time, held in ``rmq_sys_wheel_timer`` until it comes.

A message carrying one of RocketMQ 5's timer properties (``TIMER_DELAY_SEC``,
``TIMER_DELAY_MS`` from the store time; ``TIMER_DELIVER_MS`` or Aliyun's
``__STARTDELIVERTIME`` as an epoch ms) whose time is still ahead is appended to queue 0
of ``rmq_sys_wheel_timer`` instead of its topic (``apply_timer``), with ``TIMER_OUT_MS``
(the due time, to the millisecond), ``REAL_TOPIC`` and ``REAL_QID``.  A time already
past is no timer: the message is stored in its topic at once, as RocketMQ does.  A time
more than ``timerMaxDelaySec`` ahead is refused.  A delay level wins over a timer property
(RocketMQ drops the timer properties then), and a message that already has
``TIMER_OUT_MS`` (one the timer delivered, or a copy of one) is never held again.

Due times in one queue come in any order, so the queue cannot be walked like a delay
level's.  The service keeps a time index in memory instead: a heap of the waiting
entries, ordered by (due time, queue offset), filled by reading the queue's new entries
(each one's record, for its ``TIMER_OUT_MS``) and emptied as entries fall due.  A
delivered message goes back to its real topic and queue with ``TIMER_ENQUEUE_MS`` and
``TIMER_DEQUEUE_MS`` added and ``REAL_TOPIC``/``REAL_QID`` removed (RocketMQ's
``convertMessage``); the requested-time properties stay for the consumer to see.

Exactly once across a crash, with three numbers (``TimerProgress``): ``enqueued`` (the
queue's entries below it have been read), ``cursor`` (a (due, offset) pair) and ``low``.
At every moment the delivered entries are exactly those below ``enqueued`` whose (due,
offset) is at most the cursor: the heap is popped in that order, each delivery moving
the cursor to its entry; an entry read in with a key already under the cursor (it fell
due before it was read) is delivered on the spot.  ``low`` is a queue offset no waiting
entry is below, so a restart reads the queue from there to ``enqueued`` to fill the heap
again.  Each delivered copy carries ``TIMER_OFFSET`` (its entry's queue offset) and its
``TIMER_OUT_MS``; recovery's re-dispatch of the records after the checkpoint replays
them (``observe``), which brings the numbers to where they were at the last delivery
that reached the log.  The numbers are saved in ``delayOffset.json`` with the delay
levels' offsets (``ScheduleMessageService``), under the same lock and after the same
commit-log flush, so they never claim a delivery whose record is not on disk, and a
slave copies them with the levels' offsets.

Costs: about 45 bytes of broker memory per waiting timer message, one record read to take
each one in and one to deliver it; a restart reads the records from ``low`` on, i.e. back
to the oldest message still waiting.
"""

from __future__ import annotations

import collections
import heapq
import logging
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Any

from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TIMER_DELAY_MS,
    PROPERTY_TIMER_DELAY_SEC,
    PROPERTY_TIMER_DEQUEUE_MS,
    PROPERTY_TIMER_ENQUEUE_MS,
    PROPERTY_TIMER_OFFSET,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_WAIT_STORE_MSG_OK,
    TIMER_PROPERTIES,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    MessageInner,
)
from broker_core.store.consumequeue import BLANK_ENTRY_SIZE
from broker_core.store.results import PutMessageStatus
from broker_core.topics import TIMER_TOPIC

if TYPE_CHECKING:
    from broker_core.store.consumequeue import ConsumeQueue
    from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

TIMER_QUEUE_ID = 0

# An index key is (due ms << _OFFSET_BITS) | queue offset: one int orders by due time,
# then queue offset, and costs less memory than a tuple.
_OFFSET_BITS = 40
_OFFSET_MASK = (1 << _OFFSET_BITS) - 1
# Waiting entries are counted per block of queue offsets, which gives ``low`` cheaply.
_BLOCK_BITS = 12
# Queue entries read per step while taking new ones in.
TAKE_IN_CHUNK = 1024

_NUMBER = re.compile(r"\s*-?\d{1,19}\s*")
_PERMANENT_FAILURES = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
# A message holding none of these is no timer message (``not names.isdisjoint(props)``
# is the cheap test the store makes on every put).
TIMER_PROPERTY_NAMES = frozenset(TIMER_PROPERTIES)


def _key(due_ms: int, offset: int) -> int:
    return (due_ms << _OFFSET_BITS) | offset


def requested_due_ms(properties: Mapping[str, str], now_ms: int) -> int | None:
    """The delivery time (epoch ms) a message's timer properties ask for; None without one.

    Read in RocketMQ's order: ``TIMER_DELAY_SEC``, ``TIMER_DELAY_MS`` (both from ``now_ms``,
    the store time), ``TIMER_DELIVER_MS``, then ``__STARTDELIVERTIME``.  Raises ValueError
    naming the property when its value is not a whole number.
    """
    for name in TIMER_PROPERTIES:
        raw = properties.get(name)
        if raw is None:
            continue
        if not _NUMBER.fullmatch(raw):
            raise ValueError(f"{name} must be a whole number, not {raw!r}")
        value = int(raw)
        if name == PROPERTY_TIMER_DELAY_SEC:
            return now_ms + value * 1000
        if name == PROPERTY_TIMER_DELAY_MS:
            return now_ms + value
        return value
    return None


def apply_timer(msg: MessageInner, now_ms: int, max_delay_ms: int) -> str | None:
    """Redirect a timer message to ``rmq_sys_wheel_timer`` (no-op when it is none, or due).

    Returns why the message must be refused (a bad or too distant time), else None.
    Transactional half and rollback messages are left alone; a committed one is held when
    it is committed (RocketMQ does the same).
    """
    if msg.sys_flag & TRANSACTION_TYPE_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
        return None
    if msg.delay_level > 0:
        for name in TIMER_PROPERTIES:  # the delay level wins (RocketMQ checkIfTimerMessage)
            msg.clear_property(name)
        return None
    if PROPERTY_TIMER_OUT_MS in msg.properties:
        return None
    try:
        due = requested_due_ms(msg.properties, now_ms)
    except ValueError as exc:
        return f"timer message illegal: {exc}"
    if due is None or due <= now_ms:
        return None
    if due - now_ms > max_delay_ms:
        return (
            f"timer message illegal: its delivery time is {due - now_ms} ms ahead, "
            f"more than the max delay of {max_delay_ms} ms (timerMaxDelaySec)"
        )
    msg.set_property(PROPERTY_TIMER_OUT_MS, str(due))
    msg.set_property(PROPERTY_REAL_TOPIC, msg.topic)
    msg.set_property(PROPERTY_REAL_QUEUE_ID, str(msg.queue_id))
    msg.topic = TIMER_TOPIC
    msg.queue_id = TIMER_QUEUE_ID
    return None


def restore_timer(stored: MessageExt, offset: int, now_ms: int) -> MessageInner:
    """The message to append when a timer message is due: back in its real topic and queue."""
    props = dict(stored.properties)
    topic = props.pop(PROPERTY_REAL_TOPIC, stored.topic)
    try:
        queue_id = int(props.pop(PROPERTY_REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
    props.pop(PROPERTY_DELAY_TIME_LEVEL, None)
    props[PROPERTY_TIMER_ENQUEUE_MS] = str(stored.store_timestamp)
    props[PROPERTY_TIMER_DEQUEUE_MS] = str(now_ms)
    props[PROPERTY_TIMER_OFFSET] = str(offset)
    # No fsync wait per delivery, as for delay levels: the checkpoint flushes the commit log
    # before it saves the progress, and the marker above lets recovery count a delivery
    # only if its record survived.
    props[PROPERTY_WAIT_STORE_MSG_OK] = "false"
    return MessageInner(
        topic,
        queue_id,
        stored.body,
        props,
        flag=stored.flag,
        sys_flag=stored.sys_flag,
        born_timestamp=stored.born_timestamp,
        born_host=stored.born_host,
        reconsume_times=stored.reconsume_times,
        prepared_transaction_offset=stored.prepared_transaction_offset,
    )


@dataclass(frozen=True, slots=True)
class TimerProgress:
    """How far the timer is (see the module docstring); saved in ``delayOffset.json``."""

    low: int = 0
    enqueued: int = 0
    cursor: int = 0  # a key: (due ms << 40) | queue offset; 0 before the first delivery

    def to_json(self) -> dict[str, int]:
        return {
            "lowOffset": self.low,
            "enqueuedOffset": self.enqueued,
            "cursorDueMs": self.cursor >> _OFFSET_BITS,
            "cursorOffset": self.cursor & _OFFSET_MASK,
        }

    @classmethod
    def from_json(cls, obj: object) -> TimerProgress:
        """Parse ``to_json``'s form; ValueError when it is not that."""
        if not isinstance(obj, dict):
            raise ValueError("timerProgress must be an object")
        values = {}
        for name in ("lowOffset", "enqueuedOffset", "cursorDueMs", "cursorOffset"):
            value = obj.get(name, 0)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"timerProgress.{name} must be a whole number >= 0")
            values[name] = value
        if values["cursorOffset"] > _OFFSET_MASK:
            raise ValueError("timerProgress.cursorOffset is out of range")
        return cls(
            values["lowOffset"],
            values["enqueuedOffset"],
            _key(values["cursorDueMs"], values["cursorOffset"]),
        )


class _Outcome(Enum):
    DELIVERED = "delivered"
    SKIPPED = "skipped"  # can never be delivered (unreadable, or refused for good)
    RETRY = "retry"  # the put failed for now (full disk): try again on a later pass


class TimerMessageService:
    """The time index of waiting timer messages and the pass that delivers due ones.

    ``store`` is the MessageStore; ``delivery_lock`` is the one the checkpoint holds while it
    flushes the commit log and saves the progress (``ScheduleMessageService.delivery_lock``).
    Passes run one at a time (any thread); the progress may be read from any thread.
    """

    def __init__(self, store: MessageStore, delivery_lock: threading.Lock) -> None:
        self._store = store
        self.delivery_lock = delivery_lock
        self._scan_lock = threading.Lock()
        # Replaced whole, never changed in place: a reader on another thread sees one state.
        self._progress = TimerProgress()
        self._heap: list[int] = []  # keys of the entries taken in and not yet delivered
        # Blocks of queue offsets holding waiting entries, in order, and how many each holds.
        self._blocks: collections.deque[int] = collections.deque()
        self._block_counts: dict[int, int] = {}
        self.delivered_total = 0

    # -- progress, as saved ------------------------------------------------------------

    @property
    def progress(self) -> TimerProgress:
        return self._progress

    def encode(self) -> dict[str, int]:
        return self._progress.to_json()

    def set_progress(self, progress: TimerProgress) -> None:
        """Take progress loaded from the file (or a master's copy, on a slave)."""
        self._progress = progress

    def observe(self, properties: Mapping[str, str]) -> None:
        """Replay a delivery found in the log (recovery re-dispatch, in log order).

        The marker counts only when its entry's record has the store time the delivered
        copy names (``TIMER_ENQUEUE_MS``): a copy of a message delivered by another broker
        (a resend, a migration) names another queue's entry and must move nothing here.
        """
        marker = properties.get(PROPERTY_TIMER_OFFSET)
        if marker is None:
            return
        try:
            offset = int(marker)
            due = int(properties[PROPERTY_TIMER_OUT_MS])
            enqueued_ms = int(properties[PROPERTY_TIMER_ENQUEUE_MS])
        except (KeyError, ValueError):
            return
        if not 0 <= offset <= _OFFSET_MASK or due < 0:
            return
        cq = self._queue()
        entry = cq.get(offset) if cq is not None else None
        if entry is None or self._store.commit_log.store_timestamp_at(entry[0]) != enqueued_ms:
            return
        p = self._progress
        self._progress = TimerProgress(p.low, max(p.enqueued, offset + 1), max(p.cursor, _key(due, offset)))

    # -- the index -----------------------------------------------------------------------

    def _queue(self) -> ConsumeQueue | None:
        return self._store.consume_queues.find(TIMER_TOPIC, TIMER_QUEUE_ID)

    def rebuild(self) -> None:
        """Fill the index from the queue, from ``low`` to ``enqueued`` (at open, after recovery)."""
        with self._scan_lock:
            self._heap = []
            self._blocks.clear()
            self._block_counts.clear()
            p = self._progress
            cq = self._queue()
            if cq is None:
                self._progress = TimerProgress(0, 0, p.cursor)
                return
            enqueued = min(p.enqueued, cq.max_offset)
            offset = min(max(p.low, cq.min_offset), enqueued)
            if p.low < cq.min_offset < p.enqueued:
                log.warning(
                    "timer queue entries %d..%d expired with the commit log before they were "
                    "delivered (any still waiting there are lost)",
                    p.low,
                    cq.min_offset - 1,
                )
            while offset < enqueued:
                entries = cq.entries(offset, min(enqueued - offset, TAKE_IN_CHUNK))
                if not entries:
                    break
                for phys, size, _tag in entries:
                    found = self._read(phys, size, offset)
                    if found is not None and _key(found[0], offset) > p.cursor:
                        self._add(_key(found[0], offset))
                    offset += 1
            self._progress = TimerProgress(self._low(enqueued), enqueued, p.cursor)
            if self._heap:
                log.info(
                    "timer: %d message(s) waiting, the next due at %d",
                    len(self._heap),
                    self._heap[0] >> _OFFSET_BITS,
                )

    def _add(self, key: int) -> None:
        heapq.heappush(self._heap, key)
        block = (key & _OFFSET_MASK) >> _BLOCK_BITS
        if not self._blocks or self._blocks[-1] != block:
            self._blocks.append(block)
        self._block_counts[block] = self._block_counts.get(block, 0) + 1

    def _remove_top(self) -> None:
        key = heapq.heappop(self._heap)
        self._block_counts[(key & _OFFSET_MASK) >> _BLOCK_BITS] -= 1

    def _low(self, enqueued: int) -> int:
        """A queue offset no waiting entry is below."""
        blocks, counts = self._blocks, self._block_counts
        while blocks and counts.get(blocks[0], 0) <= 0:
            counts.pop(blocks.popleft(), None)
        return min(blocks[0] << _BLOCK_BITS, enqueued) if blocks else enqueued

    def _read(self, phys: int, size: int, offset: int) -> tuple[int, MessageExt] | None:
        """The due time and record of a queue entry; None (logged) when it has none."""
        if size == BLANK_ENTRY_SIZE or size <= 0:
            return None
        stored = self._store.look_message_by_offset(phys)
        if stored is None or PROPERTY_REAL_TOPIC not in stored.properties:
            log.warning("timer entry %d has no deliverable message; skipping it", offset)
            return None
        try:
            return int(stored.properties[PROPERTY_TIMER_OUT_MS]), stored
        except (KeyError, ValueError):
            log.warning("timer entry %d has no valid %s; skipping it", offset, PROPERTY_TIMER_OUT_MS)
            return None

    # -- delivering ----------------------------------------------------------------------

    def deliver_due(self, now_ms: int, *, max_messages: int = 10_000) -> tuple[int, int | None]:
        """Deliver every timer message due at ``now_ms``; same contract as the delay levels'
        ``ScheduleMessageService.deliver_due``: ``(delivered, next due ms or None)``, and
        ``now_ms`` as next due when it stopped early (``max_messages``, or a failed put)."""
        with self._scan_lock:
            delivered, stopped = self._pass(now_ms, max_messages)
            self.delivered_total += delivered
            if stopped:
                return delivered, now_ms
            return delivered, self._heap[0] >> _OFFSET_BITS if self._heap else None

    def _pass(self, now_ms: int, room: int) -> tuple[int, bool]:
        cq = self._queue()
        if cq is None:
            return 0, False
        delivered, blocked = self._take_in(cq, now_ms, room)
        if blocked is not None:
            return delivered, True
        heap = self._heap
        while heap and heap[0] >> _OFFSET_BITS <= now_ms:
            if delivered >= room:
                return delivered, True
            key = heap[0]
            offset = key & _OFFSET_MASK
            entry = cq.get(offset)
            found = self._read(entry[0], entry[1], offset) if entry is not None else None
            outcome = self._deliver(found[1] if found is not None else None, key, now_ms, late=False)
            if outcome is _Outcome.RETRY:
                return delivered, True
            self._remove_top()
            delivered += outcome is _Outcome.DELIVERED
        p = self._progress
        self._progress = TimerProgress(self._low(p.enqueued), p.enqueued, p.cursor)
        return delivered, False

    def _take_in(
        self, cq: ConsumeQueue, now_ms: int, room: int, *, deliver: bool = True
    ) -> tuple[int, int | None]:
        """Read the queue's new entries into the index, delivering at once any that fell
        due under the cursor.  Returns how many were delivered and, when it had to stop
        before the end, the due time of the entry it stopped at."""
        delivered = 0
        while True:
            p = self._progress
            enqueued = p.enqueued
            if enqueued < cq.min_offset:  # expired with the commit log, unread
                log.warning("timer queue entries %d..%d expired unread", enqueued, cq.min_offset - 1)
                enqueued = cq.min_offset
                self._progress = TimerProgress(max(p.low, enqueued), enqueued, p.cursor)
            end = cq.max_offset
            entries = cq.entries(enqueued, min(end - enqueued, TAKE_IN_CHUNK)) if enqueued < end else []
            if not entries:
                return delivered, None
            for phys, size, _tag in entries:
                found = self._read(phys, size, enqueued)
                if found is not None:
                    key = _key(found[0], enqueued)
                    p = self._progress
                    if key <= p.cursor:
                        # Due before entries already delivered: deliver it now, in queue order.
                        if not deliver or delivered >= room:
                            return delivered, found[0]
                        outcome = self._deliver(found[1], key, now_ms, late=True)
                        if outcome is _Outcome.RETRY:
                            return delivered, found[0]
                        delivered += outcome is _Outcome.DELIVERED
                        enqueued += 1
                        continue
                    self._add(key)
                enqueued += 1
                p = self._progress
                self._progress = TimerProgress(p.low, enqueued, p.cursor)

    def _deliver(self, stored: MessageExt | None, key: int, now_ms: int, *, late: bool) -> _Outcome:
        """Append ``stored``'s delivery (None: skip the entry) and record it in the progress,
        both under the delivery lock, so a checkpoint sees both or neither."""
        offset = key & _OFFSET_MASK
        with self.delivery_lock:
            if stored is None:
                outcome = _Outcome.SKIPPED
            else:
                result = self._store.put_message(restore_timer(stored, offset, now_ms))
                if result.ok:
                    outcome = _Outcome.DELIVERED
                elif result.status in _PERMANENT_FAILURES:
                    # It will never fit (the added properties pushed it past a limit, or its
                    # queue is gone): skip it rather than hold back every later one.
                    log.error(
                        "timer message %s (entry %d) cannot be delivered: %s; skipped",
                        stored.msg_id,
                        offset,
                        result.remark,
                    )
                    outcome = _Outcome.SKIPPED
                else:
                    log.warning(
                        "delivering timer message failed (%s): %s", result.status.value, result.remark
                    )
                    return _Outcome.RETRY
            p = self._progress
            if late:
                self._progress = TimerProgress(p.low, offset + 1, p.cursor)
            else:
                self._progress = TimerProgress(p.low, p.enqueued, key)
        return outcome

    # -- reading -------------------------------------------------------------------------

    def earliest_due_ms(self) -> int | None:
        """When the first timer message still waiting falls due (None: none waits).

        Takes in the queue's new entries first (without delivering), unless a pass is
        running; cheap enough for the broker to ask every 100 ms whether the platform's
        scans keep up.
        """
        if self._store.is_replica:
            return None  # a slave delivers nothing and keeps no index
        if self._scan_lock.acquire(blocking=False):
            try:
                cq = self._queue()
                if cq is not None:
                    _delivered, blocked = self._take_in(cq, 0, 0, deliver=False)
                    if blocked is not None:
                        return blocked
            finally:
                self._scan_lock.release()
        heap = self._heap
        return heap[0] >> _OFFSET_BITS if heap else None

    def backlog(self) -> dict[str, Any]:
        """Timer messages waiting (those taken in, plus queue entries not read yet) and the
        next due time among those taken in."""
        cq = self._queue()
        unread = max(0, cq.max_offset - self._progress.enqueued) if cq is not None else 0
        heap = self._heap
        return {
            "waiting": len(heap) + unread,
            "next_due_ms": heap[0] >> _OFFSET_BITS if heap else None,
        }
