"""Transactional messages: half messages, END_TRANSACTION and check-back, as RocketMQ 4.9 does them.

A producer's half message (sysFlag PREPARED, property ``TRAN_MSG=true``) is stored in
``RMQ_SYS_TRANS_HALF_TOPIC`` queue 0, its real topic and queue kept in REAL_TOPIC/REAL_QID,
so no consumer sees it.  END_TRANSACTION with COMMIT stores it in its real queue
(transaction type COMMIT) with every property it had, ``TRAN_MSG``, ``PGROUP``, REAL_TOPIC and
REAL_QID included, as RocketMQ's stored bytes have them; ROLLBACK stores nothing.  Either
way an op message (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``, body = the half's queue
offset) records that it is resolved, so a repeated or late answer changes nothing.

Check-back walks the half queue from where its last round stopped (kept as the offset of
group ``CID_RMQ_SYS_TRANS``, so it survives a restart), every ``transactionCheckInterval``:

* a half message younger than its *immunity* is left alone: ``transactionTimeOut``, or its
  own ``CHECK_IMMUNITY_TIME_IN_SECONDS``.  One with that property is stored again (a copy
  carrying ``TRAN_PREPARED_QUEUE_OFFSET``) so that the walk may go past it; without it the
  walk stops there (what follows is younger);
* an undecided one past it is stored again with ``TRANSACTION_CHECK_TIMES`` one higher (1
  the first time), and the producer group is asked about that copy
  (CHECK_TRANSACTION_STATE, oneway); the count travels with the message, so it survives a
  restart and the producer sees it;
* one checked ``transactionCheckMax`` times already is given up: copied into
  ``TRANS_CHECK_MAX_TIME_TOPIC`` and logged.

A transaction is resolved by its unique key, whichever copy the producer's answer names:
a late answer to an earlier check (or to the send itself) is honoured while the
transaction is undecided, and settles every copy.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker_core.aio import stop_task
from broker_core.model.message import (
    PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS,
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_CHECK_TIMES,
    PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    MessageInner,
    finish_record,
)
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import CheckTransactionStateRequestHeader
from broker_core.topics import (
    RMQ_SYS_TRANS_HALF_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TRANS_CHECK_MAX_TIME_TOPIC,
)

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController
    from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

OP_TAG = "d"


def _plain_copy(msg: MessageExt, topic: str, props: dict[str, str]) -> MessageInner:
    """``msg`` again, in queue 0 of ``topic`` with ``props``, without its transaction type
    (a stored copy is a plain message: the half queue's walk reads its properties)."""
    return MessageInner(
        topic,
        0,
        msg.body,
        props,
        flag=msg.flag,
        sys_flag=msg.sys_flag & ~TRANSACTION_TYPE_MASK,
        born_timestamp=msg.born_timestamp,
        born_host=msg.born_host,
        reconsume_times=msg.reconsume_times,
    )


@dataclass
class _Walk:
    """Where a check round has got to (the half-queue offset) and the checks it sent."""

    offset: int
    sent: int = 0


CHECK_GROUP = "CID_RMQ_SYS_TRANS"
"""Whose offset in the half queue says how far check-back has gone (RocketMQ's name)."""


def to_half(msg: MessageInner) -> None:
    """Redirect a PREPARED message into the half topic (in place)."""
    msg.set_property(PROPERTY_REAL_TOPIC, msg.topic)
    msg.set_property(PROPERTY_REAL_QUEUE_ID, str(msg.queue_id))
    msg.topic = RMQ_SYS_TRANS_HALF_TOPIC
    msg.queue_id = 0
    # Stored as a plain message so it enters the half topic's queue (and only that one).
    msg.sys_flag &= ~TRANSACTION_TYPE_MASK


def is_prepared(sys_flag: int) -> bool:
    return sys_flag & TRANSACTION_TYPE_MASK == TRANSACTION_PREPARED_TYPE


class TransactionService:
    """Resolves half messages and checks back the undecided ones."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker
        self.resolved: set[int] = set()  # half-topic queue offsets with an op message
        # Unique keys of resolved transactions, each with the half queue's end when it was
        # resolved (appended, dispatched or not: every copy is below it): once expiry takes
        # the queue's start there, no copy is left and the key is forgotten.
        self.settled: dict[str, int] = {}
        self._pruned_below = 0
        self._ending: set[str] = set()  # unique keys whose END_TRANSACTION is being applied
        self._task: asyncio.Task[None] | None = None

    @property
    def _store(self) -> MessageStore:
        """The broker's store; the service runs only once the broker has opened it."""
        assert self.broker.store is not None
        return self.broker.store

    def load(self) -> None:
        """Rebuild what is resolved from the op topic (after a restart)."""
        store = self._store
        offset = 0
        while True:
            result = store.get_message(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, offset, 32)
            if not result.messages:
                break
            for raw in result.messages:
                try:
                    self.resolved.add(_op_body(raw))
                except ValueError:
                    continue
            offset = result.next_begin_offset
        end = store.appended_offset_end(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        for queue_offset in self.resolved:
            half = store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, queue_offset, 1)
            found = half.messages and half.queue_offsets[0] == queue_offset  # not a later one
            msg = self._decode(half.messages[0]) if found else None
            key = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) if msg is not None else None
            if key:
                self.settled[key] = end
        self.prune()

    def prune(self) -> None:
        """Forget the resolved halves the store no longer has (their files expired): what
        is kept in memory is bounded by the half queue's retention, not by every
        transaction since the broker first started.  Safe: an answer naming a half that is
        gone finds no half message."""
        start = self._store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        if start <= self._pruned_below:
            return
        self._pruned_below = start
        self.resolved = {offset for offset in self.resolved if offset >= start}
        self.settled = {key: end for key, end in self.settled.items() if end > start}

    def _done(self, queue_offset: int, msg: MessageExt | None) -> bool:
        """Whether the half at ``queue_offset`` needs nothing more (its transaction resolved)."""
        if queue_offset in self.resolved:
            return True
        key = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) if msg is not None else None
        return bool(key) and key in self.settled

    # -- END_TRANSACTION -------------------------------------------------------------------

    async def end(
        self, commit_log_offset: int, half_queue_offset: int, decision: int, from_check: bool
    ) -> str | None:
        """Apply a producer's decision; return why nothing happened, or None."""
        if decision not in (TRANSACTION_COMMIT_TYPE, TRANSACTION_ROLLBACK_TYPE):
            return "the producer does not know yet: the half message stays and is checked again"
        half = self._store.look_message_by_offset(commit_log_offset)
        if half is None or half.topic != RMQ_SYS_TRANS_HALF_TOPIC:
            return f"no half message at commit-log offset {commit_log_offset}"
        if self._done(half.queue_offset, half):
            return f"half message {half.queue_offset} is already resolved"
        key = half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or half.msg_id
        if key in self._ending:  # two answers at once (the send's and a check-back's copy)
            return f"transaction {key} is being resolved by another answer"
        self._ending.add(key)
        try:
            if decision == TRANSACTION_COMMIT_TYPE:
                result = await self._store.put_message_async(self._committed(half))
                if not result.ok:
                    return f"storing the committed message failed: {result.remark}"
            await self._write_op(half)
        finally:
            self._ending.discard(key)
        log.info(
            "transaction %s %s%s",
            half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, half.msg_id),
            "committed" if decision == TRANSACTION_COMMIT_TYPE else "rolled back",
            " (after a check-back)" if from_check else "",
        )
        return None

    @staticmethod
    def _committed(half: MessageExt) -> MessageInner:
        """The message a commit stores: the half's, in its real queue, every property kept
        (RocketMQ's stored record keeps TRAN_MSG, PGROUP, REAL_TOPIC and REAL_QID)."""
        props = dict(half.properties)
        topic = props.get(PROPERTY_REAL_TOPIC, half.topic)
        queue_id = int(props.get(PROPERTY_REAL_QUEUE_ID, "0"))
        return MessageInner(
            topic,
            queue_id,
            half.body,
            props,
            flag=half.flag,
            sys_flag=(half.sys_flag & ~TRANSACTION_TYPE_MASK) | TRANSACTION_COMMIT_TYPE,
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
            reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.commit_log_offset,
        )

    async def _write_op(self, half: MessageExt) -> None:
        op = MessageInner(
            RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, str(half.queue_offset).encode(), {"TAGS": OP_TAG, "WAIT": "true"}
        )
        await self._store.put_message_async(op)
        self.resolved.add(half.queue_offset)
        key = half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX)
        if key:
            self.settled[key] = self._store.appended_offset_end(RMQ_SYS_TRANS_HALF_TOPIC, 0)

    # -- check-back ------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="transaction-check")

    async def stop(self) -> None:
        await stop_task(self._task)
        self._task = None

    async def _loop(self) -> None:
        while True:  # the interval is read each round: UPDATE_BROKER_CONFIG may change it
            await asyncio.sleep(self.broker.config.transaction_check_interval / 1000)
            try:
                await self.check_once()
            except Exception:
                log.exception("transaction check failed")

    @property
    def progress(self) -> int:
        """The half-queue offset check-back goes on from (every half below is handled)."""
        store = self._store
        kept = store.consumer_offsets.query_offset(CHECK_GROUP, RMQ_SYS_TRANS_HALF_TOPIC, 0)
        return max(kept, store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0))

    async def check_once(self) -> int:
        """One round of check-back over the half queue; return how many checks were sent."""
        store = self._store
        self.prune()
        end = store.get_max_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)  # copies made now wait
        walk = _Walk(self.progress)
        try:
            await self._walk(walk, end, self.broker.clock_ms(), self.broker.config.transaction_time_out)
        finally:  # what was handled stays handled, even when a round fails part-way
            store.consumer_offsets.commit_offset("", CHECK_GROUP, RMQ_SYS_TRANS_HALF_TOPIC, 0, walk.offset)
        return walk.sent

    async def _walk(self, walk: _Walk, end: int, now: int, timeout_ms: int) -> None:
        """Check back the halves from ``walk.offset`` up to ``end``, moving ``walk`` on."""
        store = self._store
        while walk.offset < end:
            result = store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, walk.offset, 32)
            if not result.messages:
                if result.next_begin_offset <= walk.offset:
                    return
                walk.offset = min(result.next_begin_offset, end)
                continue
            for queue_offset, raw in zip(result.queue_offsets, result.messages, strict=False):
                if queue_offset >= end:
                    return
                msg = self._decode(raw)
                if msg is not None and not self._done(queue_offset, msg):
                    outcome = await self._check_one(queue_offset, msg, now, timeout_ms)
                    if outcome is None:  # too young, and so is what follows: next round
                        return
                    walk.sent += outcome
                walk.offset = queue_offset + 1
            walk.offset = max(walk.offset, min(result.next_begin_offset, end))

    async def _check_one(self, queue_offset: int, msg: MessageExt, now: int, timeout_ms: int) -> int | None:
        """Handle one undecided half: check it back (1), store it again for later or give
        it up (0), or None when it is too young and the walk must stop here."""
        props = msg.properties
        try:
            checks = int(props.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0"))
        except ValueError:
            checks = 0
        if checks >= self.broker.config.transaction_check_max:
            await self._give_up(msg, checks)
            return 0
        immunity_text = props.get(PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        immunity_ms = timeout_ms
        if immunity_text is not None:
            try:
                immunity_ms = int(immunity_text) * 1000
            except ValueError:
                immunity_ms = timeout_ms
        age = now - msg.born_timestamp
        if 0 <= age < immunity_ms:
            if immunity_text is None:
                return None
            # Its own immunity: stored again so the walk goes on past it.
            copy = dict(props)
            copy.setdefault(PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET, str(queue_offset))
            return 0 if await self._renew(msg, copy) is not None else None
        copy = dict(props)
        copy[PROPERTY_TRANSACTION_CHECK_TIMES] = str(checks + 1)
        renewed = await self._renew(msg, copy)
        if renewed is None:
            return None  # not stored again (disk full...): try this one next round
        return 1 if self._check_back(renewed) else 0

    async def _renew(self, msg: MessageExt, props: dict[str, str]) -> MessageExt | None:
        """Store ``msg`` again in the half queue with ``props``; the stored copy, or None."""
        store = self._store
        result = await store.put_message_async(_plain_copy(msg, RMQ_SYS_TRANS_HALF_TOPIC, props))
        if not result.ok:
            log.warning("cannot store half message %s again for its check: %s", msg.msg_id, result.remark)
            return None
        return store.look_message_by_offset(result.wrote_offset)

    async def _give_up(self, msg: MessageExt, checks: int) -> None:
        """Checked ``transactionCheckMax`` times with no answer: kept in
        TRANS_CHECK_MAX_TIME_TOPIC for an operator, and no longer checked."""
        self.broker.topics.ensure(TopicConfig(TRANS_CHECK_MAX_TIME_TOPIC, 1, 1, 6))
        copy = _plain_copy(msg, TRANS_CHECK_MAX_TIME_TOPIC, dict(msg.properties))
        result = await self._store.put_message_async(copy)
        log.error(
            "transaction %s of producer group %s given up after %d check-backs; kept in %s (%s)",
            msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, msg.msg_id),
            msg.properties.get(PROPERTY_PRODUCER_GROUP, ""),
            checks,
            TRANS_CHECK_MAX_TIME_TOPIC,
            "stored" if result.ok else f"not stored: {result.remark}",
        )

    def pending(self, limit: int = 1000) -> tuple[list[dict[str, object]], int]:
        """Transactions neither committed nor rolled back (at most ``limit``, oldest first),
        each by its newest half message, with its age and the check-backs sent; and how
        many are pending in all."""
        store = self._store
        now = self.broker.clock_ms()
        newest: dict[str, tuple[int, MessageExt]] = {}  # by unique key (or msgId)
        offset = self.progress
        while True:
            result = store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, offset, 32)
            if not result.messages:
                break
            for queue_offset, raw in zip(result.queue_offsets, result.messages, strict=False):
                msg = self._decode(raw)
                if msg is None or self._done(queue_offset, msg):
                    continue
                key = msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) or msg.msg_id
                newest.pop(key, None)  # a later copy: the transaction moves to its place
                newest[key] = (queue_offset, msg)
            offset = result.next_begin_offset
        rows: list[dict[str, object]] = []
        for queue_offset, msg in list(newest.values())[:limit]:
            try:
                checks = int(msg.properties.get(PROPERTY_TRANSACTION_CHECK_TIMES, "0"))
            except ValueError:
                checks = 0
            rows.append(
                {
                    "queueOffset": queue_offset,
                    "msgId": msg.msg_id,
                    "uniqKey": msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                    "topic": msg.properties.get(PROPERTY_REAL_TOPIC, msg.topic),
                    "producerGroup": msg.properties.get(PROPERTY_PRODUCER_GROUP, ""),
                    "storeTimestamp": msg.store_timestamp,
                    "ageMs": max(0, now - msg.born_timestamp),
                    "checkBacks": checks,
                }
            )
        return rows, len(newest)

    @staticmethod
    def _decode(raw: bytes) -> MessageExt | None:
        from broker_core.model.message import RecordFormatError, decode_record

        try:
            return decode_record(raw)
        except RecordFormatError:
            return None

    def _check_back(self, half: MessageExt) -> bool:
        group = half.properties.get(PROPERTY_PRODUCER_GROUP, "")
        channels = list(self.broker.clients.producers.get(group, {}).values())
        if not channels:
            return False
        record = self._record_as_sent(half)
        uniq_key = half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, "")
        request = RemotingCommand.request(
            RequestCode.CHECK_TRANSACTION_STATE,
            CheckTransactionStateRequestHeader(
                tran_state_table_offset=half.queue_offset,
                commit_log_offset=half.commit_log_offset,
                msg_id=uniq_key,
                transaction_id=uniq_key,
                offset_msg_id=half.msg_id,
            ).to_fields(),
            record,
            oneway=True,
        )
        return bool(channels[0].conn.send_oneway(request))

    def _record_as_sent(self, half: MessageExt) -> bytes:
        """The half message as one stored record, with its real topic and queue back."""
        props = dict(half.properties)
        msg = MessageInner(
            props.get(PROPERTY_REAL_TOPIC, half.topic),
            int(props.get(PROPERTY_REAL_QUEUE_ID, "0")),
            half.body,
            props,
            flag=half.flag,
            sys_flag=half.sys_flag | TRANSACTION_PREPARED_TYPE,
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
        )
        assert self.broker.store is not None
        record = msg.encode(self.broker.store.store_host)
        finish_record(record, half.queue_offset, half.commit_log_offset, half.store_timestamp)
        return bytes(record)


def _op_body(raw: bytes) -> int:
    from broker_core.model.message import decode_record

    return int(decode_record(raw).body.decode())
