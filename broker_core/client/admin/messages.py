"""The admin client's message calls: finding, browsing, sending, tracking and resending.

Looking a message up (by offset msgId, by key, by client msgId), browsing a topic by time
range with tool pulls (which commit nothing and need no online consumer), sending a test
message, following a message to the groups that did or did not consume it, resending dead
letters to their group's retry topic, and the consumer relays (running info, consume
directly): what consoles built on RocketMQ offer (rocketmq-dashboard's message, DLQ and
consumer pages).
"""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson

from broker_core.client.admin.offsets import OffsetCalls
from broker_core.client.admin.topics import TopicCalls
from broker_core.client.config import local_ip
from broker_core.client.msgid import UniqueIdGenerator
from broker_core.client.requests import PullReply
from broker_core.errors import AdminError, MessageIllegalError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    RecordFormatError,
    decode_message_id,
    encode_properties,
    iter_records,
)
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import (
    CONSUMER_GROUP,
    ConsumeMessageDirectlyRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    PullMessageRequestHeader,
    PullSysFlag,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from broker_core.tags import parse_tags
from broker_core.topics import TOOLS_CONSUMER_GROUP, retry_topic

__all__ = [
    "DEFAULT_BROWSE_LIMIT",
    "DEFAULT_QUERY_MAX_NUM",
    "LONG_MAX",
    "PULL_BATCH",
    "MessageCalls",
    "MessageTrack",
    "ResendOutcome",
    "TrackType",
]

LONG_MAX: Final = 2**63 - 1
DEFAULT_QUERY_MAX_NUM: Final = 64
"""The most a broker returns for one QUERY_MESSAGE (RocketMQ's ``maxQueryNum`` default)."""
PULL_BATCH = 32  # the most a broker returns for one pull (maxTransferCountOnMessageInMemory)
# The answers of a tool pull that are not refusals.
_PULL_ANSWERS = frozenset(
    {
        ResponseCode.SUCCESS,
        ResponseCode.PULL_NOT_FOUND,
        ResponseCode.PULL_RETRY_IMMEDIATELY,
        ResponseCode.PULL_OFFSET_MOVED,
    }
)
DEFAULT_BROWSE_LIMIT = 2_000
_SEND_TURN = itertools.count()  # test sends take the writable queues in turn
# The producer group the admin client's sends (test messages, resends) name.
TOOLS_PRODUCER_GROUP: Final = "TOOLS_PRODUCER"
_IDS = UniqueIdGenerator(local_ip())
# Properties that only meant something where the message was before (delay, DLQ routing).
_NOT_RESENT = frozenset({PROPERTY_DELAY_TIME_LEVEL, PROPERTY_REAL_TOPIC, PROPERTY_REAL_QUEUE_ID})
# What a republished dead letter does not carry over: the broker's and the retry path's
# bookkeeping, and the ids the new message gets afresh.
_NOT_REPUBLISHED = frozenset(
    {
        *_NOT_RESENT,
        "TAGS",
        "KEYS",
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
        PROPERTY_RETRY_TOPIC,
        "WAIT",
        "MIN_OFFSET",
        "MAX_OFFSET",
        "ORIGIN_MESSAGE_ID",
        "RECONSUME_TIME",
        "MAX_RECONSUME_TIMES",
        "CLUSTER",
        "TRACE_ON",
        "CONSUME_START_TIME",
    }
)


class TrackType(enum.Enum):
    """Where a message stands for one consumer group (rocketmq-dashboard's track types)."""

    CONSUMED = "CONSUMED"
    CONSUMED_BUT_FILTERED = "CONSUMED_BUT_FILTERED"
    NOT_CONSUME_YET = "NOT_CONSUME_YET"
    NOT_ONLINE = "NOT_ONLINE"


@dataclass(frozen=True, slots=True)
class MessageTrack:
    group: str
    track_type: TrackType

    def to_json(self) -> dict[str, str]:
        return {CONSUMER_GROUP: self.group, "trackType": self.track_type.value}


@dataclass(frozen=True, slots=True)
class ResendOutcome:
    """One dead letter resent (or not): its DLQ msgId and where the copy went."""

    msg_id: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"msgId": self.msg_id, "ok": self.ok, "detail": self.detail}


class MessageCalls(OffsetCalls, TopicCalls):
    """Message lookup and browsing, test sends, tracking, DLQ resend and consumer relays."""

    # -- finding a message ---------------------------------------------------------------------

    async def view_message(self, offset_msg_id: str) -> MessageExt:
        """The message with this offset msgId (store host + commit-log offset).

        Raises:
            AdminError: not an offset msgId, a host that is no known broker, or no message there.
        """
        try:
            addr, offset = decode_message_id(offset_msg_id.strip())
        except MessageIllegalError as exc:
            raise AdminError(f"{exc}; an offset msgId is 32 hex characters") from exc
        info = await self.cluster_info()
        if info.broker_by_addr(addr) is None:
            raise AdminError(
                f"msgId {offset_msg_id} points at {addr}, which is no broker the nameservers know "
                "(a client msgId? query it by unique key with its topic)",
                code=ResponseCode.QUERY_NOT_FOUND,
            )
        response = await self._invoke(addr, RequestCode.VIEW_MESSAGE_BY_ID, {"offset": offset})
        messages = self._records(response)
        if not messages:
            raise AdminError(
                f"{addr} has no message at offset {offset}", code=ResponseCode.QUERY_NOT_FOUND, addr=addr
            )
        return messages[0]

    @staticmethod
    def _records(response: RemotingCommand) -> list[MessageExt]:
        try:
            return list(iter_records(response.body))
        except RecordFormatError as exc:
            raise AdminError(f"malformed message records: {exc}") from exc

    async def query_by_key(
        self,
        topic: str,
        key: str,
        *,
        max_num: int = DEFAULT_QUERY_MAX_NUM,
        begin_ms: int = 0,
        end_ms: int = LONG_MAX,
        unique_key: bool = False,
    ) -> list[MessageExt]:
        """Messages of ``topic`` whose KEYS include ``key`` (or whose UNIQ_KEY is ``key``),
        stored within [begin_ms, end_ms], from every broker of the topic, oldest first.

        Each broker returns at most ``max_num``.  ``unique_key`` asks for the client msgId
        (UNIQ_KEY) instead; see ``query_by_unique_key``.
        """
        route = await self.topic_route(topic)
        fields: dict[str, Any] = {
            "topic": topic,
            "key": key,
            "maxNum": max_num,
            "beginTimestamp": begin_ms,
            "endTimestamp": end_ms,
        }
        if unique_key:
            fields["_UNIQUE_KEY_QUERY"] = "true"
        responses = await self._ask_each(
            route.read_addrs().values(),
            RequestCode.QUERY_MESSAGE,
            fields,
            skip={ResponseCode.QUERY_NOT_FOUND},
        )
        found: dict[str, MessageExt] = {}
        for response in responses.values():
            for msg in self._records(response):
                found.setdefault(msg.msg_id, msg)
        return sorted(found.values(), key=lambda m: (m.store_timestamp, m.store_host, m.commit_log_offset))

    async def query_by_unique_key(self, topic: str, msg_id: str) -> list[MessageExt]:
        """The stored copies of the message with client msgId ``msg_id`` (its UNIQ_KEY).

        Usually one; more when the producer retried a send that had in fact been stored.
        """
        messages = await self.query_by_key(topic, msg_id, unique_key=True)
        return [m for m in messages if m.properties.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX) == msg_id]

    # -- brokers -----------------------------------------------------------------------------

    # -- browsing ----------------------------------------------------------------------------

    async def messages_by_time(
        self, topic: str, begin_ms: int, end_ms: int, *, limit: int = DEFAULT_BROWSE_LIMIT
    ) -> list[MessageExt]:
        """Messages of ``topic`` stored within [begin_ms, end_ms], oldest first, at most ``limit``.

        Each queue is searched by time for where the range starts and ends, then read
        with tool pulls (which commit nothing and need no online consumer).
        """
        if end_ms < begin_ms:
            raise AdminError(f"the time range ends ({end_ms}) before it begins ({begin_ms})")
        route = await self.topic_route(topic)
        addrs = route.read_addrs()
        found: list[MessageExt] = []
        for queue_data in route.queue_datas:
            addr = addrs.get(queue_data.broker_name)
            if addr is None:
                continue
            for queue_id in range(queue_data.read_queue_nums):
                queue = MessageQueue(topic, queue_data.broker_name, queue_id)
                start = await self._offset_by_time(addr, queue, begin_ms)
                stop = await self._offset_by_time(addr, queue, end_ms + 1)
                found.extend(await self._read_range(addr, queue, start, stop, begin_ms, end_ms, limit))
        found.sort(key=lambda m: (m.store_timestamp, m.store_host, m.commit_log_offset))
        return found[:limit]

    async def _read_range(
        self,
        addr: str,
        queue: MessageQueue,
        start: int,
        stop: int,
        begin_ms: int,
        end_ms: int,
        limit: int,
    ) -> list[MessageExt]:
        messages, _next = await self.browse_queue(addr, queue, start, stop, limit)
        return [m for m in messages if begin_ms <= m.store_timestamp <= end_ms]

    async def pull_tool(self, addr: str, queue: MessageQueue, offset: int, count: int) -> PullReply:
        """One tool pull of up to ``count`` messages of ``queue`` from ``offset``: as
        ``TOOLS_CONSUMER``, carrying its own subscription (``*``), committing nothing, never
        held.  Every pull answer is returned (found, not found, retry, offset moved).

        Raises:
            AdminError: the broker refused (no such topic, ACL) or did not answer.
        """
        header = PullMessageRequestHeader(
            consumer_group=TOOLS_CONSUMER_GROUP,
            topic=queue.topic,
            queue_id=queue.queue_id,
            queue_offset=offset,
            max_msg_nums=count,
            sys_flag=PullSysFlag.SUBSCRIPTION,
            suspend_timeout_millis=0,
        )
        reply = await self.requests.pull_message(addr, header)
        if reply.code not in _PULL_ANSWERS:
            raise self._refusal(addr, RequestCode.PULL_MESSAGE, reply.response)
        return reply

    async def browse_queue(
        self, addr: str, queue: MessageQueue, start: int, stop: int, max_messages: int
    ) -> tuple[list[MessageExt], int]:
        """Up to ``max_messages`` stored messages of ``queue`` from offset ``start`` (before
        ``stop``), read with tool pulls that commit nothing; and the offset to go on from."""
        messages: list[MessageExt] = []
        offset = start
        while offset < stop and len(messages) < max_messages:
            count = min(PULL_BATCH, stop - offset, max_messages - len(messages))
            reply = await self.pull_tool(addr, queue, offset, count)
            next_offset = reply.header.next_offset_or(offset)
            if reply.code == ResponseCode.SUCCESS:
                got = [m for m in iter_records(reply.body) if m.queue_offset < stop]
                messages.extend(got)
                if got:
                    next_offset = got[-1].queue_offset + 1
            if next_offset <= offset:
                break
            offset = next_offset
        return messages, offset

    # -- sending ---------------------------------------------------------------------------------

    async def send_message(
        self,
        topic: str,
        body: bytes,
        *,
        tags: str = "",
        keys: str = "",
        properties: Mapping[str, str] | None = None,
        delay_level: int = 0,
    ) -> dict[str, Any]:
        """Send one message (the console's test message) to a writable queue of ``topic``.

        Returns its client msgId (UNIQ_KEY), its offset msgId, the queue and queue offset.
        """
        route = await self.topic_route(topic)
        masters = route.master_addrs()
        writable = [
            (masters[q.broker_name], MessageQueue(topic, q.broker_name, queue_id))
            for q in route.queue_datas
            if q.broker_name in masters and q.perm & 2
            for queue_id in range(q.write_queue_nums)
        ]
        if not writable:
            raise AdminError(f"topic {topic!r} has no writable queue on a master broker")
        addr, queue = writable[_SEND_TURN.__next__() % len(writable)]
        unique_id = _IDS.next_id()
        props = dict(properties or {})
        props[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX] = unique_id
        if tags:
            props["TAGS"] = tags
        if keys:
            props["KEYS"] = keys
        if delay_level:
            props[PROPERTY_DELAY_TIME_LEVEL] = str(delay_level)
        header = SendMessageRequestHeader(
            TOOLS_PRODUCER_GROUP,
            topic,
            queue_id=queue.queue_id,
            born_timestamp=int(time.time() * 1000),
            properties=encode_properties(props).decode("utf-8"),
        )
        answer = await self._send_one(addr, header, body)
        return {
            "msgId": unique_id,
            "offsetMsgId": answer.msg_id,
            "brokerName": queue.broker_name,
            "queueId": queue.queue_id if answer.queue_id is None else answer.queue_id,
            "queueOffset": answer.queue_offset,
        }

    async def _send_one(
        self, addr: str, header: SendMessageRequestHeader, body: bytes
    ) -> SendMessageResponseHeader:
        """One message through the client's typed send (the producer's request); the
        broker's answer header, or ``AdminError`` when it refused."""
        response = await self.requests.send_message(addr, header, body)
        if response.code != ResponseCode.SUCCESS:
            raise self._refusal(addr, RequestCode.SEND_MESSAGE_V2, response)
        return SendMessageResponseHeader.from_fields(response.ext_fields)

    # -- where a message stands ------------------------------------------------------------------

    async def message_track(self, offset_msg_id: str) -> list[MessageTrack]:
        """For each group consuming the message's topic: consumed, filtered out, not yet, or offline."""
        msg = await self.view_message(offset_msg_id)
        info = await self.cluster_info()
        broker = info.broker_by_addr(msg.store_host)
        if broker is None:
            raise AdminError(f"the message's broker {msg.store_host} is not registered")
        queue = MessageQueue(msg.topic, broker.broker_name, msg.queue_id)
        tracks = []
        for group in await self.topic_consumers(msg.topic):
            tracks.append(MessageTrack(group, await self._track(group, queue, msg)))
        return tracks

    async def _track(self, group: str, queue: MessageQueue, msg: MessageExt) -> TrackType:
        try:
            connection = await self.consumer_connections(group)
        except AdminError as exc:
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
                raise
            connection = None
        try:
            stats = await self.consume_stats(group, msg.topic)
        except AdminError as exc:
            if exc.code != ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST:
                raise
            stats = None
        progress = next((q for q in stats.queues if q.queue == queue), None) if stats else None
        consumed = progress is not None and progress.consumer_offset > msg.queue_offset
        if connection is None:
            return TrackType.CONSUMED if consumed else TrackType.NOT_ONLINE
        subscription = connection.subscriptions.get(msg.topic)
        wanted = parse_tags(subscription.expression) if subscription is not None else None
        if wanted is not None and (msg.tags or "") not in wanted:
            return TrackType.CONSUMED_BUT_FILTERED
        return TrackType.CONSUMED if consumed else TrackType.NOT_CONSUME_YET

    # -- dead letters --------------------------------------------------------------------------------

    async def resend_dlq_messages(self, group: str, offset_msg_ids: Iterable[str]) -> list[ResendOutcome]:
        """Send dead letters of ``group`` back to its retry topic, where its consumers get
        them again (as the original topic) with a fresh count of retries.

        The DLQ keeps its copy.  Each message succeeds or fails on its own.
        """
        outcomes = []
        for msg_id in offset_msg_ids:
            try:
                outcomes.append(await self._resend_one(group, msg_id))
            except AdminError as exc:
                outcomes.append(ResendOutcome(msg_id, False, str(exc)))
        return outcomes

    async def republish_dead_letter(self, offset_msg_id: str, topic: str | None = None) -> ResendOutcome:
        """Send a dead letter (or any stored message) again as a new message of its original
        topic (``RETRY_TOPIC``, where the DLQ keeps it), or of ``topic``: every consumer of
        that topic gets it, whether or not one is online now.

        The target must exist and be writable.  Body, tags, keys and user properties are
        kept; the broker's bookkeeping properties are not, and the copy gets a new client
        msgId (``ORIGIN_MESSAGE_ID`` names the dead letter).
        """
        msg = await self.view_message(offset_msg_id)
        target = topic or msg.properties.get(PROPERTY_RETRY_TOPIC) or ""
        if not target or target.startswith(("%DLQ%", "%RETRY%")):
            raise AdminError(
                f"message {offset_msg_id} names no original topic to send it back to; choose one"
            )
        props = {k: v for k, v in msg.properties.items() if k not in _NOT_REPUBLISHED}
        props[PROPERTY_ORIGIN_MESSAGE_ID] = msg.msg_id
        sent = await self.send_message(
            target,
            msg.body,
            tags=msg.properties.get("TAGS", ""),
            keys=msg.properties.get("KEYS", ""),
            properties=props,
        )
        detail = (
            f"{target}@{sent['brokerName']}:{sent['queueId']} offset {sent['queueOffset']} as {sent['msgId']}"
        )
        return ResendOutcome(offset_msg_id, True, detail)

    async def _resend_one(self, group: str, msg_id: str) -> ResendOutcome:
        msg = await self.view_message(msg_id)
        target = retry_topic(group)
        masters = await self._route_masters(target)
        if not masters:
            raise AdminError(f"{target} has no route: group {group!r} never had a consumer online")
        broker_name, addr = sorted(masters.items())[0]
        props = {k: v for k, v in msg.properties.items() if k not in _NOT_RESENT}
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.properties.get(PROPERTY_RETRY_TOPIC) or msg.topic)
        header = SendMessageRequestHeader(
            TOOLS_PRODUCER_GROUP,
            target,
            default_topic=target,
            default_topic_queue_nums=1,
            queue_id=0,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            flag=msg.flag,
            properties=encode_properties(props).decode("utf-8"),
        )
        answer = await self._send_one(addr, header, msg.body)
        return ResendOutcome(msg_id, True, f"{target}@{broker_name}: {answer.msg_id}")

    # -- relays to a consumer -------------------------------------------------------------------------

    async def consumer_running_info(self, group: str, client_id: str) -> str:
        """What the consumer says of itself (its queues, threads, properties), as it said it.

        The C++ client's answer is not valid JSON, so it is returned as text.
        """
        addr = await self._broker_of_client(group, client_id)
        fields = GetConsumerRunningInfoRequestHeader(group, client_id).to_fields()
        response = await self._invoke(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
        return response.body.decode("utf-8", errors="replace")

    async def consume_message_directly(
        self, group: str, client_id: str, offset_msg_id: str
    ) -> dict[str, Any]:
        """Have one consumer of ``group`` consume a message now; its result as it reports it."""
        msg = await self.view_message(offset_msg_id)
        info = await self.cluster_info()
        broker = info.broker_by_addr(msg.store_host)
        addr = broker.master_addr if broker is not None else None
        if addr is None:
            raise AdminError(f"the message's broker {msg.store_host} has no master registered")
        assert broker is not None
        fields = ConsumeMessageDirectlyRequestHeader(
            group, client_id, offset_msg_id, broker.broker_name
        ).to_fields()
        response = await self._invoke(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
        try:
            body = orjson.loads(response.body) if response.body else {}
        except orjson.JSONDecodeError:
            body = {"raw": response.body.decode("utf-8", errors="replace")}
        return body if isinstance(body, dict) else {"result": body}

    async def _broker_of_client(self, group: str, client_id: str) -> str:
        """A master where ``client_id`` of ``group`` is connected."""
        for addr in await self._masters():
            response = await self._invoke(
                addr,
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                GetConsumerConnectionListRequestHeader(group).to_fields(),
                accept=(ResponseCode.SUCCESS, ResponseCode.CONSUMER_NOT_ONLINE),
            )
            if response.code == ResponseCode.SUCCESS:
                clients = self._json(response, "consumer connection").get("connectionSet") or []
                if any(c.get("clientId") == client_id for c in clients):
                    return addr
        raise AdminError(
            f"consumer {client_id!r} of group {group!r} is not connected to any broker",
            code=ResponseCode.CONSUMER_NOT_ONLINE,
        )
