"""Transactional messages: half messages, END_TRANSACTION and check-back.

A producer's half message (sysFlag PREPARED) is stored in ``RMQ_SYS_TRANS_HALF_TOPIC``
queue 0, its real topic and queue kept in REAL_TOPIC/REAL_QID, so no consumer sees it.
END_TRANSACTION with COMMIT re-stores it in its real queue (transaction type COMMIT);
ROLLBACK drops it; either way an op message (``RMQ_SYS_TRANS_OP_HALF_TOPIC``, tag ``d``,
body = the half's queue offset) records that it is resolved, so a repeated or late answer
changes nothing.  A half message still unresolved after ``transactionTimeOut`` is checked
back with a producer of its group (CHECK_TRANSACTION_STATE, oneway) every
``transactionCheckInterval``, at most ``transactionCheckMax`` times; a producer's answer
that arrives late is honoured as long as the half is unresolved.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from broker_core.aio import stop_task
from broker_core.model.message import (
    PROPERTY_PRODUCER_GROUP,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TRANSACTION_PREPARED,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    TRANSACTION_COMMIT_TYPE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    MessageInner,
    finish_record,
)
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import CheckTransactionStateRequestHeader
from broker_core.topics import RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController
    from broker_core.store.store import MessageStore

log = logging.getLogger(__name__)

OP_TAG = "d"


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
        self.checks: dict[int, int] = {}  # half-topic queue offset -> check-backs sent
        self._task: asyncio.Task[None] | None = None

    @property
    def _store(self) -> MessageStore:
        """The broker's store; the service runs only once the broker has opened it."""
        assert self.broker.store is not None
        return self.broker.store

    def load(self) -> None:
        """Rebuild the resolved set from the op topic (after a restart)."""
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
        if half.queue_offset in self.resolved:
            return f"half message {half.queue_offset} is already resolved"
        if decision == TRANSACTION_COMMIT_TYPE:
            result = await self._store.put_message_async(self._committed(half))
            if not result.ok:
                return f"storing the committed message failed: {result.remark}"
        await self._write_op(half.queue_offset)
        log.info(
            "transaction %s %s%s",
            half.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, half.msg_id),
            "committed" if decision == TRANSACTION_COMMIT_TYPE else "rolled back",
            " (after a check-back)" if from_check else "",
        )
        return None

    @staticmethod
    def _committed(half: MessageExt) -> MessageInner:
        props = dict(half.properties)
        props.pop(PROPERTY_TRANSACTION_PREPARED, None)
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

    async def _write_op(self, half_queue_offset: int) -> None:
        op = MessageInner(RMQ_SYS_TRANS_OP_HALF_TOPIC, 0, str(half_queue_offset).encode(), {"TAGS": OP_TAG})
        await self._store.put_message_async(op)
        self.resolved.add(half_queue_offset)
        self.checks.pop(half_queue_offset, None)

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
                self.check_once()
            except Exception:
                log.exception("transaction check failed")

    def check_once(self) -> int:
        """Send a check-back for every half message old enough; return how many were sent."""
        store = self._store
        config = self.broker.config
        now = self.broker.clock_ms()
        sent = 0
        offset = store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        while True:
            result = store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, offset, 32)
            if not result.messages:
                break
            for queue_offset in result.queue_offsets:
                if (
                    queue_offset in self.resolved
                    or self.checks.get(queue_offset, 0) >= config.transaction_check_max
                ):
                    continue
                half = store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, queue_offset, 1)
                msg = self._decode(half.messages[0]) if half.messages else None
                if msg is None or now - msg.store_timestamp < config.transaction_time_out:
                    continue
                if self._check_back(msg):
                    self.checks[queue_offset] = self.checks.get(queue_offset, 0) + 1
                    sent += 1
            offset = result.next_begin_offset
        return sent

    def pending(self, limit: int = 1000) -> tuple[list[dict[str, object]], int]:
        """Half messages not yet committed or rolled back (at most ``limit``, oldest first),
        with their age and check-backs sent; and how many are pending in all."""
        store = self._store
        now = self.broker.clock_ms()
        rows: list[dict[str, object]] = []
        total = 0
        offset = store.get_min_offset_in_queue(RMQ_SYS_TRANS_HALF_TOPIC, 0)
        while True:
            result = store.get_message(RMQ_SYS_TRANS_HALF_TOPIC, 0, offset, 32)
            if not result.messages:
                break
            for queue_offset, raw in zip(result.queue_offsets, result.messages, strict=False):
                if queue_offset in self.resolved:
                    continue
                total += 1
                msg = self._decode(raw)
                if msg is None or len(rows) >= limit:
                    continue
                rows.append(
                    {
                        "queueOffset": queue_offset,
                        "msgId": msg.msg_id,
                        "uniqKey": msg.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
                        "topic": msg.properties.get(PROPERTY_REAL_TOPIC, msg.topic),
                        "producerGroup": msg.properties.get(PROPERTY_PRODUCER_GROUP, ""),
                        "storeTimestamp": msg.store_timestamp,
                        "ageMs": max(0, now - msg.store_timestamp),
                        "checkBacks": self.checks.get(queue_offset, 0),
                    }
                )
            offset = result.next_begin_offset
        return rows, total

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
