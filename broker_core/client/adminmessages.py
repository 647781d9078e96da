"""The admin client's operations on messages and offsets beyond the plain queries.

Browsing a topic by time range, moving a group's offsets (to the earliest, the latest,
given offsets; skipping what accumulated), following a message to the groups that did
or did not consume it, resending dead letters to their group's retry topic, and the
consumer relays (running info, consume directly).  What consoles built on RocketMQ offer
(rocketmq-dashboard's message, DLQ and consumer pages).

``MessageOperations`` is a mixin of ``AdminClient``: it uses the client's transport
(``_invoke``, ``_ask_each``...) and its route and stats calls.
"""

from __future__ import annotations

import enum
import itertools
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from broker_core.client.config import local_ip
from broker_core.client.msgid import UniqueIdGenerator
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.store.message import (
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_ORIGIN_MESSAGE_ID,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_RETRY_TOPIC,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    MessageExt,
    encode_properties,
    iter_records,
)
from broker_core.tags import parse_tags
from broker_core.topics import TOOLS_CONSUMER_GROUP, retry_topic

if TYPE_CHECKING:
    from broker_core.client.admin import AdminClient

# The group RocketMQ's tools pull as; the pull carries its own subscription, commits nothing.
PULL_FLAG_SUBSCRIPTION = 0x4
PULL_BATCH = 32
DEFAULT_BROWSE_LIMIT = 2_000
# Properties that only meant something where the message was before (delay, DLQ routing).
_SEND_TURN = itertools.count()
_IDS = UniqueIdGenerator(local_ip())
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
        return {"consumerGroup": self.group, "trackType": self.track_type.value}


@dataclass(frozen=True, slots=True)
class ResendOutcome:
    """One dead letter resent (or not): its DLQ msgId and where the copy went."""

    msg_id: str
    ok: bool
    detail: str

    def to_json(self) -> dict[str, Any]:
        return {"msgId": self.msg_id, "ok": self.ok, "detail": self.detail}


class MessageOperations:
    """Message browsing, offset moves, tracking, DLQ resend and consumer relays."""

    # -- browsing ----------------------------------------------------------------------------

    async def messages_by_time(
        self: AdminClient, topic: str, begin_ms: int, end_ms: int, *, limit: int = DEFAULT_BROWSE_LIMIT
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

    async def _offset_by_time(self: AdminClient, addr: str, queue: MessageQueue, timestamp_ms: int) -> int:
        fields = {"topic": queue.topic, "queueId": queue.queue_id, "timestamp": timestamp_ms}
        response = await self._invoke(addr, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, fields)
        return int(response.ext_fields.get("offset") or 0)

    async def _read_range(
        self: AdminClient,
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

    async def browse_queue(
        self: AdminClient, addr: str, queue: MessageQueue, start: int, stop: int, max_messages: int
    ) -> tuple[list[MessageExt], int]:
        """Up to ``max_messages`` stored messages of ``queue`` from offset ``start`` (before
        ``stop``), read with tool pulls that commit nothing; and the offset to go on from."""
        messages: list[MessageExt] = []
        offset = start
        while offset < stop and len(messages) < max_messages:
            fields = {
                "consumerGroup": TOOLS_CONSUMER_GROUP,
                "topic": queue.topic,
                "queueId": queue.queue_id,
                "queueOffset": offset,
                "maxMsgNums": min(PULL_BATCH, stop - offset, max_messages - len(messages)),
                "sysFlag": PULL_FLAG_SUBSCRIPTION,
                "commitOffset": 0,
                "suspendTimeoutMillis": 0,
                "subscription": "*",
                "subVersion": 0,
            }
            accept = (
                ResponseCode.SUCCESS,
                ResponseCode.PULL_NOT_FOUND,
                ResponseCode.PULL_RETRY_IMMEDIATELY,
                ResponseCode.PULL_OFFSET_MOVED,
            )
            response = await self._invoke(addr, RequestCode.PULL_MESSAGE, fields, accept=accept)
            next_offset = int(response.ext_fields.get("nextBeginOffset") or offset)
            if response.code == ResponseCode.SUCCESS:
                got = [m for m in iter_records(response.body) if m.queue_offset < stop]
                messages.extend(got)
                if got:
                    next_offset = got[-1].queue_offset + 1
            if next_offset <= offset:
                break
            offset = next_offset
        return messages, offset

    async def _each_queue(self: AdminClient, topic: str) -> list[tuple[str, MessageQueue]]:
        """(master address, queue) for every readable queue of ``topic``."""
        route = await self.topic_route(topic)
        addrs = route.read_addrs()
        return [
            (addrs[q.broker_name], MessageQueue(topic, q.broker_name, queue_id))
            for q in route.queue_datas
            if q.broker_name in addrs
            for queue_id in range(q.read_queue_nums)
        ]

    async def offsets_by_time(self: AdminClient, topic: str, timestamp_ms: int) -> dict[MessageQueue, int]:
        """Per queue, the offset of the first message stored at or after ``timestamp_ms``."""
        queues = await self._each_queue(topic)
        found = await self._gather(self._offset_by_time(addr, q, timestamp_ms) for addr, q in queues)
        return {q: offset for (_, q), offset in zip(queues, found, strict=True)}

    async def earliest_store_times(self: AdminClient, topic: str) -> dict[MessageQueue, int]:
        """Per queue, when its oldest stored message was stored (epoch ms; 0 when it is empty)."""
        queues = await self._each_queue(topic)

        async def one(addr: str, queue: MessageQueue) -> int:
            fields = {"topic": topic, "queueId": queue.queue_id}
            accept = (ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR)
            response = await self._invoke(addr, RequestCode.GET_EARLIEST_MSG_STORETIME, fields, accept=accept)
            return max(0, int(response.ext_fields.get("timestamp") or 0)) if response.code == 0 else 0

        found = await self._gather(one(addr, q) for addr, q in queues)
        return {q: ts for (_, q), ts in zip(queues, found, strict=True)}

    async def send_message(
        self: AdminClient,
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
        fields = {
            "producerGroup": "TOOLS_PRODUCER",
            "topic": topic,
            "defaultTopic": "TBW102",
            "defaultTopicQueueNums": 4,
            "queueId": queue.queue_id,
            "sysFlag": 0,
            "bornTimestamp": int(time.time() * 1000),
            "flag": 0,
            "properties": encode_properties(props).decode("utf-8"),
            "reconsumeTimes": 0,
            "batch": "false",
        }
        response = await self._invoke(addr, RequestCode.SEND_MESSAGE, fields, body)
        return {
            "msgId": unique_id,
            "offsetMsgId": response.ext_fields.get("msgId", ""),
            "brokerName": queue.broker_name,
            "queueId": int(response.ext_fields.get("queueId", queue.queue_id)),
            "queueOffset": int(response.ext_fields.get("queueOffset", -1)),
        }

    # -- offsets -------------------------------------------------------------------------------

    async def reset_offset_to_earliest(self: AdminClient, group: str, topic: str) -> dict[MessageQueue, int]:
        """Consume ``topic`` again from its oldest stored message."""
        return await self.reset_offset_by_time(group, topic, 0, force=True)

    async def reset_offset_to_latest(self: AdminClient, group: str, topic: str) -> dict[MessageQueue, int]:
        """Skip everything stored so far in ``topic``: consume only what arrives from now on."""
        return await self.reset_offset_by_time(group, topic, -1, force=True)

    async def skip_accumulated(
        self: AdminClient, group: str, topic: str | None = None
    ) -> dict[MessageQueue, int]:
        """Move ``group`` to the end of every topic it consumes (or of ``topic``): its lag goes to 0."""
        topics = [topic] if topic is not None else (await self.consume_stats(group)).topics
        moved: dict[MessageQueue, int] = {}
        for name in topics:
            moved.update(await self.reset_offset_to_latest(group, name))
        return dict(sorted(moved.items()))

    async def update_consumer_offsets(
        self: AdminClient, group: str, offsets: Mapping[MessageQueue, int]
    ) -> None:
        """Set ``group``'s committed offset of each queue to the given one (checked against
        the queue's range).  Online consumers are not told: their next commit wins, so
        use this for a group that is stopped; ``reset_offset_by_time`` tells them."""
        for queue, offset in offsets.items():
            addr = await self._master_of(queue)
            fields = {"topic": queue.topic, "queueId": queue.queue_id}
            low = int(
                (await self._invoke(addr, RequestCode.GET_MIN_OFFSET, fields)).ext_fields.get("offset") or 0
            )
            high = int(
                (await self._invoke(addr, RequestCode.GET_MAX_OFFSET, fields)).ext_fields.get("offset") or 0
            )
            if not low <= offset <= high:
                raise AdminError(f"offset {offset} of {queue} is outside the queue's range [{low}, {high}]")
            await self._invoke(
                addr,
                RequestCode.UPDATE_CONSUMER_OFFSET,
                {"consumerGroup": group, **fields, "commitOffset": offset},
            )

    async def _master_of(self: AdminClient, queue: MessageQueue) -> str:
        addr = (await self._route_masters(queue.topic)).get(queue.broker_name)
        if addr is None:
            raise AdminError(f"broker {queue.broker_name!r} of {queue} has no master in the topic's route")
        return addr

    # -- where a message stands ------------------------------------------------------------------

    async def message_track(self: AdminClient, offset_msg_id: str) -> list[MessageTrack]:
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

    async def _track(self: AdminClient, group: str, queue: MessageQueue, msg: MessageExt) -> TrackType:
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

    async def resend_dlq_messages(
        self: AdminClient, group: str, offset_msg_ids: Iterable[str]
    ) -> list[ResendOutcome]:
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

    async def republish_dead_letter(
        self: AdminClient, offset_msg_id: str, topic: str | None = None
    ) -> ResendOutcome:
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

    async def _resend_one(self: AdminClient, group: str, msg_id: str) -> ResendOutcome:
        msg = await self.view_message(msg_id)
        target = retry_topic(group)
        masters = await self._route_masters(target)
        if not masters:
            raise AdminError(f"{target} has no route: group {group!r} never had a consumer online")
        broker_name, addr = sorted(masters.items())[0]
        props = {k: v for k, v in msg.properties.items() if k not in _NOT_RESENT}
        props.setdefault(PROPERTY_RETRY_TOPIC, msg.properties.get(PROPERTY_RETRY_TOPIC) or msg.topic)
        fields = {
            "producerGroup": "TOOLS_PRODUCER",
            "topic": target,
            "defaultTopic": target,
            "defaultTopicQueueNums": 1,
            "queueId": 0,
            "sysFlag": msg.sys_flag,
            "bornTimestamp": msg.born_timestamp,
            "flag": msg.flag,
            "properties": encode_properties(props).decode("utf-8"),
            "reconsumeTimes": 0,
            "batch": "false",
        }
        response = await self._invoke(addr, RequestCode.SEND_MESSAGE, fields, msg.body)
        return ResendOutcome(msg_id, True, f"{target}@{broker_name}: {response.ext_fields.get('msgId', '')}")

    # -- relays to a consumer -------------------------------------------------------------------------

    async def consumer_running_info(self: AdminClient, group: str, client_id: str) -> str:
        """What the consumer says of itself (its queues, threads, properties), as it said it.

        The C++ client's answer is not valid JSON, so it is returned as text.
        """
        addr = await self._broker_of_client(group, client_id)
        fields = {"consumerGroup": group, "clientId": client_id, "jstackEnable": "false"}
        response = await self._invoke(addr, RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
        return response.body.decode("utf-8", errors="replace")

    async def consume_message_directly(
        self: AdminClient, group: str, client_id: str, offset_msg_id: str
    ) -> dict[str, Any]:
        """Have one consumer of ``group`` consume a message now; its result as it reports it."""
        msg = await self.view_message(offset_msg_id)
        info = await self.cluster_info()
        broker = info.broker_by_addr(msg.store_host)
        addr = broker.master_addr if broker is not None else None
        if addr is None:
            raise AdminError(f"the message's broker {msg.store_host} has no master registered")
        assert broker is not None
        fields = {
            "consumerGroup": group,
            "clientId": client_id,
            "msgId": offset_msg_id,
            "brokerName": broker.broker_name,
        }
        response = await self._invoke(addr, RequestCode.CONSUME_MESSAGE_DIRECTLY, fields)
        try:
            body = orjson.loads(response.body) if response.body else {}
        except orjson.JSONDecodeError:
            body = {"raw": response.body.decode("utf-8", errors="replace")}
        return body if isinstance(body, dict) else {"result": body}

    async def _broker_of_client(self: AdminClient, group: str, client_id: str) -> str:
        """A master where ``client_id`` of ``group`` is connected."""
        for addr in await self._masters():
            response = await self._invoke(
                addr,
                RequestCode.GET_CONSUMER_CONNECTION_LIST,
                {"consumerGroup": group},
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
