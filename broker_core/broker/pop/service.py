"""Pop consumption (RocketMQ 5's POP): hand out, ack, change invisible time, redeliver.

One ``PopService`` per master broker keeps a ``QueueBook`` per (group, topic, queue), made
durable by ``PopJournal``.  Unlike RocketMQ, which writes check-point and ack messages to
system topics and revives un-acked messages into a retry topic, Quiver hands a message
that was not acked in time out again from its own queue offset: the same bytes, with the
reconsume-times field patched to ``attempt - 1`` in the copy sent.  Once a message has been
handed out the group's ``retryMaxTimes + 1`` times (RocketMQ 5's max delivery attempts)
and comes back once more, it is stored in the group's ``%DLQ%`` topic instead.

The group's offset in the consumer-offset table follows each book's ``base`` (the lowest
offset not yet finished), so lag and the console read pop groups like any other; an
operator's offset reset shows up there as an offset the book did not write, and the book
starts over at it.

A group's first pop of a queue starts at its committed offset if it has one, else at 0
when the queue's first message is still stored (RocketMQ's ``initPopOffsetByCheckMsgInMem``),
else at the queue's end.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker_core.broker.filters import PullFilter
from broker_core.broker.pop.book import AckOutcome, InFlight, QueueBook
from broker_core.broker.pop.journal import BookKey, PopJournal
from broker_core.broker.retry import dead_letter_copy
from broker_core.model.message import (
    BORNHOST_V6_FLAG,
    PROPERTY_SHARDING_KEY,
    STOREHOST_V6_FLAG,
    RecordFormatError,
    decode_record,
)
from broker_core.model.receipt import ReceiptHandle
from broker_core.store.results import GetMessageStatus

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

# A FIFO book holds at most this many messages back behind busy message groups; past it,
# new messages are not looked at until some group moves on.
MAX_HELD = 2048
# How long a message being moved to the DLQ stays invisible, should that store fail.
_DEAD_LETTER_RETRY_MS = 30_000
# The window the console's acked rate is counted over.
ACK_RATE_WINDOW_S = 60


@dataclass(slots=True)
class Popped:
    """One handed-out message: its queue, offset, attempt and record as sent."""

    queue_id: int
    offset: int
    attempt: int
    record: bytes


@dataclass(slots=True)
class PopOutcome:
    pop_time: int
    messages: list[Popped]
    rest: int
    start_offsets: dict[int, int]


def with_reconsume_times(record: bytes, times: int) -> bytes:
    """A copy of the stored ``record`` whose RECONSUMETIMES field says ``times``."""
    sys_flag = int.from_bytes(record[36:40], "big")
    born_len = 20 if sys_flag & BORNHOST_V6_FLAG else 8
    store_len = 20 if sys_flag & STOREHOST_V6_FLAG else 8
    pos = 48 + born_len + 8 + store_len
    copy = bytearray(record)
    copy[pos : pos + 4] = times.to_bytes(4, "big", signed=True)
    return bytes(copy)


def message_group_of(record: bytes) -> str:
    """The FIFO message group a stored record carries ("" when none, or unreadable)."""
    try:
        return decode_record(record, with_body=False).properties.get(PROPERTY_SHARDING_KEY, "")
    except RecordFormatError:
        return ""


class PopService:
    """The pop books of one broker; every method runs on the broker's event loop."""

    def __init__(self, broker: BrokerController, wake: Any) -> None:
        store = broker.store
        assert store is not None
        self.broker = broker
        self.store = store
        # wake(keys): wake pops and pulls held on these (topic, queue) keys.
        self._wake = wake
        self.journal = PopJournal(store.root / "pop")
        self.books: dict[BookKey, QueueBook] = self.journal.load()
        # The base each book last wrote to the offset table (a different value there is a reset).
        self._committed: dict[BookKey, int] = {}
        self._turn = 0
        self._acks: dict[str, deque[tuple[int, int]]] = {}
        self._dying: set[tuple[BookKey, int]] = set()

    def close(self) -> None:
        self.journal.close(self.books)

    # -- books ---------------------------------------------------------------------------

    def _book(self, group: str, topic: str, queue_id: int) -> QueueBook:
        key = (group, topic, queue_id)
        offsets = self.store.consumer_offsets
        stored = offsets.query_offset(group, topic, queue_id)
        book = self.books.get(key)
        if book is None:
            base = stored if stored >= 0 else self._initial_offset(topic, queue_id)
            book = self.books[key] = QueueBook(base=base)
            self.journal.write([{"k": "base", "g": group, "t": topic, "q": queue_id, "o": base}])
        elif key in self._committed and stored >= 0 and stored != self._committed[key]:
            log.info(
                "pop book of %s on %s queue %d starts over at %d (offset reset)",
                group,
                topic,
                queue_id,
                stored,
            )
            book.reset(stored)
            self.journal.write([{"k": "base", "g": group, "t": topic, "q": queue_id, "o": stored}])
        self._commit(key, book)
        return book

    def _initial_offset(self, topic: str, queue_id: int) -> int:
        store = self.store
        if store.get_min_offset_in_queue(topic, queue_id) == 0 and (
            store.get_message_store_timestamp(topic, queue_id, 0) >= 0
        ):
            return 0
        return store.get_max_offset_in_queue(topic, queue_id)

    def _commit(self, key: BookKey, book: QueueBook) -> None:
        if self._committed.get(key) != book.base:
            group, topic, queue_id = key
            self.store.consumer_offsets.commit_offset("pop", group, topic, queue_id, book.base)
            self._committed[key] = book.base

    def _journal(self, records: list[dict[str, Any]]) -> None:
        self.journal.write(records)
        if self.journal.due_for_compaction():
            self.journal.compact(self.books)

    # -- pop --------------------------------------------------------------------------------

    async def pop(
        self,
        group: str,
        topic: str,
        queue_ids: list[int],
        max_nums: int,
        invisible_ms: int,
        choose: PullFilter,
        *,
        fifo: bool,
        max_attempts: int,
    ) -> PopOutcome:
        """Hand out up to ``max_nums`` messages of ``topic`` from ``queue_ids`` (taken in
        turn, so concurrent consumers spread over the queues)."""
        now = self.broker.clock_ms()
        start = self._turn % len(queue_ids) if queue_ids else 0
        self._turn += 1
        out = PopOutcome(now, [], 0, {})
        records: list[dict[str, Any]] = []
        doomed: list[tuple[BookKey, int, int]] = []
        for index in range(len(queue_ids)):
            queue_id = queue_ids[(start + index) % len(queue_ids)]
            key = (group, topic, queue_id)
            book = self._book(group, topic, queue_id)
            room = max_nums - len(out.messages)
            if room > 0:
                out.start_offsets[queue_id] = book.cursor
                self._pop_queue(
                    key, book, room, now, invisible_ms, choose, fifo, max_attempts, out, records, doomed
                )
                self._commit(key, book)
            out.rest += max(0, self.store.get_max_offset_in_queue(topic, queue_id) - book.cursor)
        self._journal(records)
        for key, offset, attempts in doomed:
            await self._dead_letter(key, offset, attempts)
        return out

    def _pop_queue(
        self,
        key: BookKey,
        book: QueueBook,
        room: int,
        now: int,
        invisible_ms: int,
        choose: PullFilter,
        fifo: bool,
        max_attempts: int,
        out: PopOutcome,
        records: list[dict[str, Any]],
        doomed: list[tuple[BookKey, int, int]],
    ) -> None:
        group, topic, queue_id = key
        taken = 0

        def hand_out(offset: int, record: bytes, attempt: int, message_group: str) -> None:
            nonlocal taken
            book.hand_out(offset, now, invisible_ms, attempt, message_group)
            entry = book.in_flight[offset]
            records.append(
                {"k": "out", "g": group, "t": topic, "q": queue_id, "o": offset}
                | {"v": entry.visible_at, "a": attempt, "p": now, "m": message_group}
            )
            out.messages.append(Popped(queue_id, offset, attempt, with_reconsume_times(record, attempt - 1)))
            taken += 1

        def finish(offset: int) -> None:
            book.finish(offset)
            records.append({"k": "fin", "g": group, "t": topic, "q": queue_id, "o": offset})

        # 1. What came back (not acked in time), unless it has had all its attempts.
        for offset in book.due(now):
            if taken >= room:
                return
            if (key, offset) in self._dying:
                continue
            entry = book.in_flight[offset]
            if entry.attempt >= max_attempts:
                book.change(offset, entry.pop_time, now, _DEAD_LETTER_RETRY_MS)
                self._dying.add((key, offset))
                doomed.append((key, offset, entry.attempt))
                continue
            record = self._read(topic, queue_id, offset)
            if record is None:
                finish(offset)  # no longer stored: nothing to deliver
                continue
            hand_out(offset, record, entry.attempt + 1, entry.message_group)
        # 2. FIFO: held messages whose group has nothing in flight any more.
        if fifo:
            for offset, message_group in book.ready_held():
                if taken >= room:
                    return
                record = self._read(topic, queue_id, offset)
                if record is None:
                    queue = book.held[message_group]
                    queue.popleft()
                    if not queue:
                        del book.held[message_group]
                    finish(offset)
                    continue
                hand_out(offset, record, 1, message_group)
        # 3. Messages not looked at yet.
        store = self.store
        while taken < room:
            if fifo and sum(len(q) for q in book.held.values()) >= MAX_HELD:
                return
            want = room - taken if not fifo else max(room - taken, 32)
            result = store.get_message(topic, queue_id, book.cursor, want, choose.tag_codes, choose.records)
            status = result.status
            if status is GetMessageStatus.FOUND:
                for offset, record in zip(result.queue_offsets, result.messages, strict=True):
                    if offset < book.cursor:
                        continue
                    if taken >= room:
                        return  # the cursor stays here: the rest is looked at next time
                    self._skip(book, offset, group, topic, queue_id, records)
                    if offset in book.in_flight or offset in book.finished:
                        book.look_past(offset)  # after a restart: handed out or acked before
                        continue
                    message_group = message_group_of(record) if fifo else ""
                    if message_group and book.blocked(message_group):
                        book.hold(offset, message_group)
                        continue
                    hand_out(offset, record, 1, message_group)
                self._skip(book, result.next_begin_offset, group, topic, queue_id, records)
            elif status in (
                GetMessageStatus.NO_MATCHED_MESSAGE,
                GetMessageStatus.MESSAGE_WAS_REMOVING,
                GetMessageStatus.OFFSET_TOO_SMALL,
            ):
                if result.next_begin_offset <= book.cursor:
                    return
                self._skip(book, result.next_begin_offset, group, topic, queue_id, records)
            else:
                return

    @staticmethod
    def _skip(
        book: QueueBook, offset: int, group: str, topic: str, queue_id: int, records: list[dict[str, Any]]
    ) -> None:
        """Offsets from the cursor up to ``offset`` need no delivery (filtered out or gone)."""
        if offset <= book.cursor:
            return
        if book.idle:
            # Nothing pending below: the book simply moves on (no journal line per offset).
            book.skip_to(offset)
            records.append({"k": "base", "g": group, "t": topic, "q": queue_id, "o": book.base})
            return
        for skipped in range(book.cursor, offset):
            if skipped not in book.in_flight:
                records.append({"k": "fin", "g": group, "t": topic, "q": queue_id, "o": skipped})
        book.skip_to(offset)

    def _read(self, topic: str, queue_id: int, offset: int) -> bytes | None:
        result = self.store.get_message(topic, queue_id, offset, 1)
        if result.status is GetMessageStatus.FOUND and result.queue_offsets[0] == offset:
            return bytes(result.messages[0])
        return None

    async def _dead_letter(self, key: BookKey, offset: int, attempts: int) -> None:
        """Store the message at ``offset`` in the group's DLQ, then finish it."""
        group, topic, queue_id = key
        try:
            record = self._read(topic, queue_id, offset)
            book = self.books.get(key)
            if book is None or offset not in book.in_flight:
                return
            if record is not None:
                original = decode_record(record)
                copy = dead_letter_copy(self.broker, group, original, attempts)
                result = await self.store.put_message_async(copy)
                if not result.ok:
                    log.warning(
                        "moving %s queue %d offset %d of %s to its DLQ failed (%s); tried again later",
                        topic,
                        queue_id,
                        offset,
                        group,
                        result.status.value,
                    )
                    return
                log.info(
                    "message %s of group %s goes to %%DLQ%% after %d deliveries",
                    original.msg_id,
                    group,
                    attempts,
                )
            book.finish(offset)
            book.dead_lettered += 1
            self._journal([{"k": "fin", "g": group, "t": topic, "q": queue_id, "o": offset}])
            self._commit(key, book)
            if book.held:
                self._wake([(topic, queue_id)])
        finally:
            self._dying.discard((key, offset))

    # -- ack and change ------------------------------------------------------------------------

    def ack(self, group: str, topic: str, handle: ReceiptHandle) -> str:
        key = (group, topic, handle.queue_id)
        book = self.books.get(key)
        if book is None:
            return AckOutcome.NOT_IN_FLIGHT
        outcome = book.ack(handle.offset, handle.pop_time)
        if outcome == AckOutcome.OK:
            self._journal([{"k": "fin", "g": group, "t": topic, "q": handle.queue_id, "o": handle.offset}])
            self._commit(key, book)
            self._count_ack(group)
            if book.held:
                self._wake([(topic, handle.queue_id)])
        return outcome

    def change(self, group: str, topic: str, handle: ReceiptHandle, invisible_ms: int) -> InFlight | str:
        key = (group, topic, handle.queue_id)
        book = self.books.get(key)
        if book is None:
            return AckOutcome.NOT_IN_FLIGHT
        now = self.broker.clock_ms()
        changed = book.change(handle.offset, handle.pop_time, now, invisible_ms)
        if isinstance(changed, InFlight):
            # Pops held now computed when to look again from the old time: a sooner one
            # (a consumer giving the message back) must wake them.
            self._wake([(topic, handle.queue_id)])
            self._journal(
                [
                    {"k": "chg", "g": group, "t": topic, "q": handle.queue_id, "o": handle.offset}
                    | {"v": changed.visible_at, "p": changed.pop_time}
                ]
            )
        return changed

    def _count_ack(self, group: str) -> None:
        second = int(time.monotonic())
        window = self._acks.setdefault(group, deque())
        if window and window[-1][0] == second:
            window[-1] = (second, window[-1][1] + 1)
        else:
            window.append((second, 1))
        while window and window[0][0] <= second - ACK_RATE_WINDOW_S:
            window.popleft()

    def acked_rate(self, group: str) -> float:
        """Acks per second of ``group`` over the last minute."""
        window = self._acks.get(group)
        if not window:
            return 0.0
        since = int(time.monotonic()) - ACK_RATE_WINDOW_S
        return sum(n for second, n in window if second > since) / ACK_RATE_WINDOW_S

    # -- when to look again ------------------------------------------------------------------------

    def next_visible_at(self, group: str, topic: str, queue_ids: list[int]) -> int | None:
        """When the first of the group's in-flight messages on these queues comes back."""
        times = [
            at
            for queue_id in queue_ids
            if (book := self.books.get((group, topic, queue_id))) is not None
            and (at := book.next_visible_at()) is not None
        ]
        return min(times) if times else None

    # -- the console's view -----------------------------------------------------------------------

    def status(self, group: str | None = None) -> list[dict[str, Any]]:
        """Per (group, topic, queue): offsets, in flight, held, counters, attempts."""
        rows = []
        for (g, topic, queue_id), book in sorted(self.books.items()):
            if group is not None and g != group:
                continue
            rows.append(
                {
                    "group": g,
                    "topic": topic,
                    "queueId": queue_id,
                    "baseOffset": book.base,
                    "cursorOffset": book.cursor,
                    "inFlight": book.in_flight_count,
                    "held": sum(len(q) for q in book.held.values()),
                    "acked": book.acked,
                    "redelivered": book.redelivered,
                    "deadLettered": book.dead_lettered,
                    "attempts": {str(a): n for a, n in sorted(book.attempts().items())},
                }
            )
        return rows

    def forget_group(self, group: str) -> None:
        """Drop the books of a deleted group."""
        for key in [k for k in self.books if k[0] == group]:
            del self.books[key]
            self._committed.pop(key, None)
        self.journal.compact(self.books)
