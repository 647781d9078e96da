"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320).

The three share one path: the header is read from either spelling (V2 uses one-letter
keys; both are declared in ``broker_core.remoting.headers``), a batch is code 320 or a
``batch`` field of "true"/"1" (the C++ 1.2.x client sends batches as code 10 with "1"),
and the message goes to the store as is.  A batch body the client zlib-compressed as a
whole (the C++ client does so from 4 KiB) is inflated first and its items stored
uncompressed, as they were sent.  The response always carries its extFields as strings:
the C++ client crashes on a SEND success without them.

A message sent straight to ``%RETRY%<group>`` (Java's fallback when CONSUMER_SEND_MSG_BACK
fails, and how its orderly consumer gives a message up) is checked as RocketMQ's
``handleRetryAndDLQ`` does: once its reconsumeTimes reaches the most allowed it is stored
in ``%DLQ%<group>`` instead.

With ``enableTopicMessageTypeCheck`` a message whose type is not its topic's
``message.type`` is refused (``broker_core.model.messagetype``).
"""

from __future__ import annotations

import asyncio
import logging
import random
import zlib
from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any

from broker_core.broker.groups import group_not_exist_remark
from broker_core.broker.retry import (
    DLQ_NUMS_PER_GROUP,
    ensure_send_back_topic,
    max_reconsume_times,
    retry_group_of,
)
from broker_core.broker.transaction import is_prepared, to_half
from broker_core.model.message import (
    COMPRESSED_FLAG,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_MAX_RECONSUME_TIMES,
    MessageBatchInner,
    MessageInner,
    decode_properties,
    encode_properties,
)
from broker_core.model.messagetype import message_type_refusal
from broker_core.model.topicconfig import PERM_INHERIT, TopicConfig, is_inherited, is_writeable
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import SendMessageRequestHeader, SendMessageResponseHeader
from broker_core.store.results import PutMessageResult, PutMessageStatus
from broker_core.topics import SCHEDULE_TOPIC, dlq_topic, topic_problem

if TYPE_CHECKING:
    from broker_core.broker.controller import BrokerController

log = logging.getLogger(__name__)

# A zlib stream's first byte (deflate, 32 KiB window).  A batch's first item cannot start
# so: its TOTALSIZE would be nearly 2 GiB.
ZLIB_FIRST_BYTE = b"\x78"

# Topics clients may never send to (RocketMQ TopicValidator.NOT_ALLOWED_SEND_TOPIC_SET).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {SCHEDULE_TOPIC, "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC"}
)

_STATUS_CODES = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
    PutMessageStatus.MESSAGE_ILLEGAL: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.PROPERTIES_SIZE_EXCEEDED: ResponseCode.MESSAGE_ILLEGAL,
    PutMessageStatus.SERVICE_NOT_AVAILABLE: ResponseCode.SERVICE_NOT_AVAILABLE,
    PutMessageStatus.DISK_FULL: ResponseCode.SERVICE_NOT_AVAILABLE,
}


class SendError(Exception):
    """A send refused before it reaches the store: (response code, remark)."""

    def __init__(self, code: int, remark: str) -> None:
        super().__init__(remark)
        self.code = code
        self.remark = remark


_BATCH_CODE = int(RequestCode.SEND_BATCH_MESSAGE)


def parse_send_header(request: RemotingCommand) -> SendMessageRequestHeader:
    """The send's header, in either spelling (``SendMessageRequestHeader.from_fields``);
    SEND_BATCH_MESSAGE makes it a batch whatever its ``batch`` field says.

    Raises:
        SendError: SYSTEM_ERROR when the request names no topic or a number field is no
            number (the remark names it).
    """
    try:
        header = SendMessageRequestHeader.from_fields(request.ext_fields)
    except ValueError as exc:
        raise SendError(ResponseCode.SYSTEM_ERROR, str(exc)) from None
    if request.code == _BATCH_CODE:
        header.batch = True
    return header


def _property_int(properties: dict[str, str], name: str) -> int | None:
    """A numeric message property, or None when absent or not a number."""
    try:
        return int(properties[name])
    except (KeyError, ValueError):
        return None


class SendProcessor:
    """Stores what producers send."""

    def __init__(self, broker: BrokerController) -> None:
        self.broker = broker

    def handle(self, request: RemotingCommand, conn: Any) -> RemotingCommand | Awaitable[RemotingCommand]:
        """Store what a producer sent; return the answer, or an awaitable of it under SYNC_FLUSH.

        A plain function, so the remoting server runs it inline from ``data_received``
        with no task per request: under ASYNC_FLUSH the answer is ready as soon as the
        store has appended.  A send that must wait for the disk (or a slave) returns a
        future of its answer, which the server answers from when it is done, and requests
        behind it are not held up; a compressed batch, inflated off the loop, a coroutine.
        """
        try:
            header = parse_send_header(request)
            topic_config = self._writable_topic(header)
            if self.broker.config.enable_topic_message_type_check:
                self._check_message_type(header, topic_config)
            if retry_group_of(header.topic) is not None:
                if header.batch:  # each message would need its own DLQ decision
                    raise SendError(ResponseCode.MESSAGE_ILLEGAL, "a batch cannot be sent to a retry topic")
                topic_config = self._retry_or_dlq(header, topic_config)
            queue_id = self._queue_id(header, topic_config)
            if header.batch and header.sys_flag & COMPRESSED_FLAG and request.body[:1] == ZLIB_FIRST_BYTE:
                return self._store_compressed_batch(request, header, queue_id, conn)
            result = self._append(request, header, queue_id, conn)
        except SendError as exc:
            return request.response(exc.code, exc.remark, ext_fields={})
        return self._answer(request, result, queue_id)

    def _answer(
        self, request: RemotingCommand, result: PutMessageResult, queue_id: int
    ) -> RemotingCommand | asyncio.Future[RemotingCommand]:
        if result.async_flush is not None or result.async_replica is not None:
            return self._answer_when_durable(request, result, queue_id)
        return self._response(request, result, queue_id)

    async def _store_compressed_batch(
        self, request: RemotingCommand, header: SendMessageRequestHeader, queue_id: int, conn: Any
    ) -> RemotingCommand:
        """A batch body compressed as a whole: inflated off the event loop (zlib lets go of
        the GIL), then stored item by item uncompressed."""
        loop = asyncio.get_running_loop()
        try:
            body = await loop.run_in_executor(None, self._inflate_batch, request.body)
            # The items are stored as they were before compression.
            result = self._append(request, header, queue_id, conn, body, header.sys_flag & ~COMPRESSED_FLAG)
        except SendError as exc:
            return request.response(exc.code, exc.remark, ext_fields={})
        answer = self._answer(request, result, queue_id)
        return answer if isinstance(answer, RemotingCommand) else await answer

    def _append(
        self,
        request: RemotingCommand,
        header: SendMessageRequestHeader,
        queue_id: int,
        conn: Any,
        batch_body: bytes | None = None,
        batch_sys_flag: int | None = None,
    ) -> PutMessageResult:
        """Append the message (or batch) without waiting for the disk."""
        store = self.broker.store
        assert store is not None
        born_host = getattr(conn, "remote_address", "127.0.0.1:0")
        if header.batch:
            # A batch whose COMPRESSED flag came without a zlib stream has each item's body
            # compressed (as Java stores such a batch): the flag stays on every item.
            body = request.body if batch_body is None else batch_body
            sys_flag = header.sys_flag if batch_sys_flag is None else batch_sys_flag
            batch = MessageBatchInner(
                header.topic,
                queue_id,
                body,
                sys_flag=sys_flag,
                born_timestamp=header.born_timestamp,
                born_host=born_host,
                properties=decode_properties(header.properties),
            )
            return self._counted(header, store.append_batch(batch, waiter="async"))
        msg = MessageInner(
            header.topic,
            queue_id,
            request.body,
            decode_properties(header.properties),
            flag=header.flag,
            sys_flag=header.sys_flag,
            born_timestamp=header.born_timestamp,
            born_host=born_host,
            reconsume_times=header.reconsume_times,
            properties_raw=header.properties.encode("utf-8"),
        )
        if is_prepared(header.sys_flag):
            to_half(msg)  # a transaction's half message: invisible until END_TRANSACTION
        return self._counted(header, store.append(msg, waiter="async"))

    def _counted(self, header: SendMessageRequestHeader, result: PutMessageResult) -> PutMessageResult:
        """Count what the producer's group had stored (the broker's only record of which
        producer groups send to a topic); a refusal counts nothing."""
        if result.status.ok:
            self.broker.stats.record_produce(header.producer_group, header.topic, result.msg_count or 1)
        return result

    def _inflate_batch(self, body: bytes) -> bytes:
        """The batch body a client zlib-compressed as a whole (sysFlag bit 0).

        The C++ client compresses any body of 4 KiB or more, a batch's included, so a
        batch of a few 1 KiB messages arrives compressed.  The inflated body may be no
        larger than an uncompressed batch could be (maxMessageSize, as RocketMQ bounds a
        batch body, and never more than a frame), which also bounds the work a small
        malicious body can cause.
        """
        store = self.broker.store
        assert store is not None
        limit = min(store.config.max_message_size, self.broker.config.max_frame_size_bytes)
        inflater = zlib.decompressobj()
        try:
            raw = inflater.decompress(body, limit + 1)
        except zlib.error as exc:
            raise SendError(
                ResponseCode.MESSAGE_ILLEGAL, f"the compressed batch body is corrupt: {exc}"
            ) from None
        if len(raw) > limit:
            raise SendError(
                ResponseCode.MESSAGE_ILLEGAL, f"the compressed batch body inflates to more than {limit} bytes"
            )
        if not inflater.eof:
            raise SendError(ResponseCode.MESSAGE_ILLEGAL, "the compressed batch body is truncated")
        if inflater.unused_data:
            raise SendError(ResponseCode.MESSAGE_ILLEGAL, "the compressed batch body has data after its end")
        return raw

    def _answer_when_durable(
        self, request: RemotingCommand, result: PutMessageResult, queue_id: int
    ) -> asyncio.Future[RemotingCommand]:
        """SYNC_FLUSH / SYNC_MASTER: the answer, once the records are on disk and on a slave
        (FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT if not in time), as a future the remoting
        server answers from when it is done (no task per send)."""
        store = self.broker.store
        assert store is not None
        answer: asyncio.Future[RemotingCommand] = asyncio.get_running_loop().create_future()

        def respond(durable: PutMessageResult) -> None:
            if answer.done():  # the server gave up on it (shutting down)
                return
            try:
                answer.set_result(self._response(request, durable, queue_id))
            except Exception as exc:  # the server answers SYSTEM_ERROR, as for any handler
                answer.set_exception(exc)

        store.when_durable(result, respond)
        return answer

    def _writable_topic(self, header: SendMessageRequestHeader) -> TopicConfig:
        problem = topic_problem(header.topic)
        if problem is not None:
            raise SendError(ResponseCode.SYSTEM_ERROR, problem)
        if header.topic in NOT_ALLOWED_SEND_TOPICS:
            raise SendError(
                ResponseCode.NO_PERMISSION, f"Sending message to topic[{header.topic}] is forbidden."
            )
        if not is_writeable(self.broker.config.broker_permission):
            raise SendError(
                ResponseCode.NO_PERMISSION,
                f"the broker[{self.broker.config.broker_name}] sending message is forbidden",
            )
        config = self.broker.topics.get(header.topic) or self._auto_create(header)
        if config is None:
            raise SendError(
                ResponseCode.TOPIC_NOT_EXIST, f"topic[{header.topic}] not exist, apply first please!"
            )
        if not is_writeable(config.perm):
            raise SendError(
                ResponseCode.NO_PERMISSION, f"the topic[{header.topic}] sending message is forbidden"
            )
        return config

    @staticmethod
    def _check_message_type(header: SendMessageRequestHeader, config: TopicConfig) -> None:
        """Refuse a message whose type is not the topic's ``message.type`` (RocketMQ 5's
        proxy check, here with ``enableTopicMessageTypeCheck``; MESSAGE_ILLEGAL, as its
        remoting proxy answers)."""
        properties = decode_properties(header.properties)
        refusal = message_type_refusal(header.topic, config.message_type, properties)
        if refusal is not None:
            raise SendError(ResponseCode.MESSAGE_ILLEGAL, refusal)

    def _auto_create(self, header: SendMessageRequestHeader) -> TopicConfig | None:
        """Create a topic from its default (TBW102) when the broker allows it, as RocketMQ does."""
        if not self.broker.config.auto_create_topic_enable:
            return None
        template = self.broker.topics.get(header.default_topic)
        if template is None or not is_inherited(template.perm):
            return None
        queues = max(1, min(header.default_topic_queue_nums, template.write_queue_nums))
        config = TopicConfig(header.topic, queues, queues, template.perm & ~PERM_INHERIT)
        if self.broker.topics.ensure(config):
            log.info(
                "auto-created topic %s (%d queues) for producer %s",
                header.topic,
                queues,
                header.producer_group,
            )
            self.broker.topics_changed()
        return self.broker.topics.get(header.topic)

    def _retry_or_dlq(self, header: SendMessageRequestHeader, config: TopicConfig) -> TopicConfig:
        """A message sent to ``%RETRY%<group>``: redirect ``header`` to ``%DLQ%<group>``
        (queue 0, no delay) once it has been reconsumed the most allowed times; return the
        config of the topic it now goes to.

        The most allowed is the header's maxReconsumeTimes (Java moves it there), else the
        message's MAX_RECONSUME_TIMES property, else the group's retryMaxTimes.  An unknown
        group is refused unless autoCreateSubscriptionGroup creates it.
        """
        group = retry_group_of(header.topic)
        assert group is not None
        group_config = self.broker.groups.find(
            group, auto_create=self.broker.config.auto_create_subscription_group
        )
        if group_config is None:
            raise SendError(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, group_not_exist_remark(group))
        properties = decode_properties(header.properties)
        asked = header.max_reconsume_times
        if asked is None:
            asked = _property_int(properties, PROPERTY_MAX_RECONSUME_TIMES)
        max_times = max_reconsume_times(group_config, asked)
        if header.reconsume_times < max_times:
            return config
        retry_topic, header.topic = header.topic, dlq_topic(group)
        header.queue_id = DLQ_NUMS_PER_GROUP - 1
        if properties.pop(PROPERTY_DELAY_TIME_LEVEL, None) is not None:
            header.properties = encode_properties(properties).decode("utf-8")
        log.info(
            "a message sent to %s goes to %s: reconsumed %d times, at most %d",
            retry_topic,
            header.topic,
            header.reconsume_times,
            max_times,
        )
        return ensure_send_back_topic(self.broker, header.topic, DLQ_NUMS_PER_GROUP)

    @staticmethod
    def _queue_id(header: SendMessageRequestHeader, config: TopicConfig) -> int:
        if header.queue_id < 0:
            return random.randrange(config.write_queue_nums)
        if header.queue_id >= max(config.write_queue_nums, config.read_queue_nums):
            raise SendError(
                ResponseCode.SYSTEM_ERROR,
                f"request queueId[{header.queue_id}] is illegal, topic {header.topic} has "
                f"{config.write_queue_nums} write queue(s); producer group {header.producer_group}",
            )
        return header.queue_id

    @staticmethod
    def _response(request: RemotingCommand, result: PutMessageResult, queue_id: int) -> RemotingCommand:
        code = _STATUS_CODES.get(result.status, ResponseCode.SYSTEM_ERROR)
        if not result.status.ok:
            return request.response(code, result.remark or result.status.value, ext_fields={})
        answer = SendMessageResponseHeader(",".join(result.msg_ids), queue_id, result.queue_offset)
        return request.response(code, result.remark or None, ext_fields=answer.to_fields())
