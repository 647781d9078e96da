"""Delayed messages: delay levels, SCHEDULE_TOPIC_XXXX and the due-message scan.

A message stored with delay level L (property ``DELAY``; 1..18 by default, capped at the
highest level) is appended to ``SCHEDULE_TOPIC_XXXX`` queue L-1 instead of its topic, with
``REAL_TOPIC``/``REAL_QID`` remembering where it belongs; its consume-queue tag field holds
the delivery time (store time + the level's delay).  Within one level queue delivery times
only grow, so ``deliver_due`` walks each queue from its delay offset and stops at the
first entry not yet due.

A delivered message is stored as RocketMQ stores it: its properties as they were, ``DELAY``,
``REAL_TOPIC`` and ``REAL_QID`` included, and nothing of ours (``MessageStore.put_delivered``
keeps it from being delayed again and does not wait for the disk).

Exactly once across a crash: the delay-offset table (``config/delayOffset.json``) is
persisted by the checkpoint cycle together with the commit-log offset it covers, and
recovery's re-dispatch of the records after that offset advances the table past every
delivery it finds (``observe``): a delivered record names its level (``DELAY``), and the
level's queue holds, at or just after the table's offset, the entry whose message it is
(same unique key, born time, host and body).  So a delivery is either in the log (and
counted) or not (and done again), never both.

The file also holds the timer messages' progress (``timerProgress``, see ``store.timer``),
so both are saved together under ``delivery_lock`` and a slave copies both.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    MessageInner,
)
from broker_core.store.configfile import ConfigFile, config_path
from broker_core.store.results import PutMessageResult, PutMessageStatus
from broker_core.store.timer import TimerProgress
from broker_core.topics import SCHEDULE_TOPIC

if TYPE_CHECKING:
    from broker_core.store.timer import TimerMessageService

log = logging.getLogger(__name__)

# The key of the timer messages' progress in delayOffset.json (Quiver's; RocketMQ keeps its
# timer's in files of its own).
TIMER_PROGRESS_KEY = "timerProgress"
# Put outcomes that retrying cannot change: the message is skipped, not retried forever.
_PERMANENT_FAILURES = (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)


def apply_delay(msg: MessageInner, max_level: int) -> None:
    """Redirect a delayed message to its level's schedule queue (no-op when not delayed).

    Transactional half and rollback messages are never delayed (RocketMQ does the same).
    """
    if msg.sys_flag & TRANSACTION_TYPE_MASK in (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE):
        return
    level = msg.delay_level
    if level <= 0:
        return
    if level > max_level:
        level = max_level
        msg.set_property(PROPERTY_DELAY_TIME_LEVEL, str(level))
    msg.set_property(PROPERTY_REAL_TOPIC, msg.topic)
    msg.set_property(PROPERTY_REAL_QUEUE_ID, str(msg.queue_id))
    msg.topic = SCHEDULE_TOPIC
    msg.queue_id = level - 1


def restore_delayed(stored: MessageExt) -> MessageInner:
    """The message to append when a delayed one is due: back in its real topic and queue,
    every property kept as RocketMQ keeps it (``DELAY``, ``REAL_TOPIC``, ``REAL_QID``)."""
    props = dict(stored.properties)
    topic = props.get(PROPERTY_REAL_TOPIC, stored.topic)
    try:
        queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID, "0"))
    except ValueError:
        queue_id = 0
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


def same_message(a: MessageExt, b: MessageExt) -> bool:
    """Whether two records hold the same producer message (a delayed one and its delivery)."""
    return (
        a.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        == b.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        and a.born_timestamp == b.born_timestamp
        and a.born_host == b.born_host
        and a.body_crc == b.body_crc
        and len(a.body) == len(b.body)
    )


LEGACY_MARKER = "SCHEDULE_OFFSET"
"""Where a delivery stored by an earlier Quiver names its entry ("<level>:<offset>")."""

MAX_OBSERVE_SEARCH = 4096
"""Schedule entries looked at past the table's offset to place one delivery (recovery)."""


class ScheduleMessageService(ConfigFile):
    """The delay-offset table and the scan that delivers due delayed messages.

    ``store`` is the MessageStore: the scan reads schedule queues through it and appends
    with ``put_message`` (which waits for the disk under SYNC_FLUSH).
    """

    def __init__(self, store_root: Path, delay_levels_ms: tuple[int, ...], store: Any) -> None:
        super().__init__()
        self._path = config_path(store_root, "delayOffset.json")
        self.delay_levels_ms = delay_levels_ms
        self._store = store
        # Next schedule-queue offset to deliver, per level (1-based).
        self.offset_table: dict[int, int] = {}
        # Held while delivering one message and while the checkpoint snapshots the table.
        self.delivery_lock = threading.Lock()
        self._scan_lock = threading.Lock()
        self.delivered_total = 0
        # The timer messages' service, whose progress this file saves (None: none).
        self.timers: TimerMessageService | None = None

    @property
    def config_file_path(self) -> Path:
        return self._path

    @property
    def max_level(self) -> int:
        return len(self.delay_levels_ms)

    def encode(self) -> dict[str, Any]:
        obj: dict[str, Any] = {
            "offsetTable": {str(level): offset for level, offset in sorted(self.offset_table.items())}
        }
        if self.timers is not None:
            obj[TIMER_PROGRESS_KEY] = self.timers.encode()
        return obj

    def decode(self, obj: dict[str, Any]) -> None:
        table = obj.get("offsetTable", {})
        if not isinstance(table, dict):
            raise ValueError("offsetTable must be an object")
        raw_progress = obj.get(TIMER_PROGRESS_KEY)
        progress = TimerProgress.from_json(raw_progress) if raw_progress is not None else None
        self.offset_table = {int(level): int(offset) for level, offset in table.items()}
        if progress is not None and self.timers is not None:
            self.timers.set_progress(progress)

    def observe(self, topic: str, properties: Mapping[str, str], phys: int) -> None:
        """Advance the table past a delivery found in the log (recovery re-dispatch): the
        record at ``phys``, in ``topic``, with ``properties``."""
        if topic == SCHEDULE_TOPIC or PROPERTY_REAL_TOPIC not in properties:
            return
        legacy = properties.get(LEGACY_MARKER)
        if legacy:  # written before deliveries kept RocketMQ's properties (a store upgraded mid-way)
            level_text, _, offset_text = legacy.partition(":")
            if level_text.isdigit() and offset_text.isdigit():
                level, offset = int(level_text), int(offset_text)
                self.offset_table[level] = max(self.offset_table.get(level, 0), offset + 1)
            return
        try:
            level = min(int(properties.get(PROPERTY_DELAY_TIME_LEVEL, "0")), self.max_level)
        except ValueError:
            return
        if level <= 0:
            return
        store = self._store
        cq = store.consume_queues.find(SCHEDULE_TOPIC, level - 1)
        delivered = store.look_message_by_offset(phys)
        if cq is None or delivered is None:
            return
        start = max(self.offset_table.get(level, 0), cq.min_offset)
        for offset in range(start, min(cq.max_offset, start + MAX_OBSERVE_SEARCH)):
            entry = cq.get(offset)
            scheduled = store.look_message_by_offset(entry[0]) if entry is not None else None
            if scheduled is not None and same_message(scheduled, delivered):
                self.offset_table[level] = offset + 1
                return

    def deliver_due(self, now_ms: int, *, max_messages: int = 10_000) -> tuple[int, int | None]:
        """Re-store every delayed message due at ``now_ms`` in its real topic and queue.

        Returns ``(delivered, next_due_ms)``: how many were delivered and when the next
        one falls due (None when no delayed message is waiting), so a caller can schedule
        the next scan for exactly then.  Stops early (and reports ``now_ms`` as next due)
        when ``max_messages`` were delivered or a put failed, e.g. the disk is full.
        """
        with self._scan_lock:  # two scans at once would deliver the same entries twice
            return self._deliver_due(now_ms, max_messages)

    def _deliver_due(self, now_ms: int, max_messages: int) -> tuple[int, int | None]:
        store = self._store
        delivered = 0
        next_due: int | None = None
        for level in range(1, self.max_level + 1):
            cq = store.consume_queues.find(SCHEDULE_TOPIC, level - 1)
            if cq is None:
                continue
            offset = max(self.offset_table.get(level, 0), cq.min_offset)
            while offset < cq.max_offset:
                if delivered >= max_messages:
                    self.delivered_total += delivered
                    return delivered, now_ms
                entry = cq.get(offset)
                if entry is None:  # expired or blank: nothing to deliver there
                    offset = self._advance(level, offset)
                    continue
                phys, _size, deliver_at = entry
                if deliver_at > now_ms:
                    next_due = deliver_at if next_due is None else min(next_due, deliver_at)
                    break
                stored = store.look_message_by_offset(phys)
                if stored is None or PROPERTY_REAL_TOPIC not in stored.properties:
                    log.warning(
                        "schedule entry %d of level %d has no deliverable message; skipping", offset, level
                    )
                    offset = self._advance(level, offset)
                    continue
                with self.delivery_lock:
                    result: PutMessageResult = store.put_delivered(restore_delayed(stored))
                    if result.status in _PERMANENT_FAILURES:
                        # It will never fit (its real topic's name makes it longer than maxMessageSize):
                        # skip it rather than hold back every later message of its level.
                        log.error(
                            "delayed message %s (level %d, offset %d) cannot be delivered: %s; skipped",
                            stored.msg_id,
                            level,
                            offset,
                            result.remark,
                        )
                        offset = self._advance(level, offset)
                        continue
                    if not result.ok:
                        log.warning(
                            "delivering delayed message failed (%s): %s", result.status.value, result.remark
                        )
                        next_due = now_ms  # try this level again on the next scan
                        break
                    offset = self._advance(level, offset)
                delivered += 1
        self.delivered_total += delivered
        return delivered, next_due

    def _advance(self, level: int, offset: int) -> int:
        self.offset_table[level] = offset + 1
        return offset + 1

    def earliest_due_ms(self) -> int | None:
        """When the first delayed message still waiting falls due (None: none waits).

        Reads only each level's next entry, so it is cheap enough to ask often: the
        broker asks it to see whether the platform's scans keep up.
        """
        due = [row["next_due_ms"] for row in self.backlog(0) if row["next_due_ms"] is not None]
        return min(due) if due else None

    def backlog(self, now_ms: int) -> list[dict[str, int | None]]:
        """Per level: messages waiting and when the next one is due (for the console)."""
        rows: list[dict[str, int | None]] = []
        for level in range(1, self.max_level + 1):
            cq = self._store.consume_queues.find(SCHEDULE_TOPIC, level - 1)
            if cq is None:
                rows.append(
                    {
                        "level": level,
                        "delay_ms": self.delay_levels_ms[level - 1],
                        "waiting": 0,
                        "next_due_ms": None,
                    }
                )
                continue
            offset = max(self.offset_table.get(level, 0), cq.min_offset)
            entry = cq.get(offset) if offset < cq.max_offset else None
            rows.append(
                {
                    "level": level,
                    "delay_ms": self.delay_levels_ms[level - 1],
                    "waiting": max(0, cq.max_offset - offset),
                    "next_due_ms": entry[2] if entry is not None else None,
                }
            )
        return rows
