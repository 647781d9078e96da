"""The pull consumer: the application chooses queues and offsets (RocketMQ's pull consumers).

Two styles on one class, for one consumer group:

- **Queue and offset** (``DefaultMQPullConsumer``): ``fetch_queues(topic)`` lists the
  readable queues, ``pull(mq, expression, offset)`` reads from an offset and returns a
  ``PullResult`` (FOUND / NO_NEW_MSG / NO_MATCHED_MSG / OFFSET_ILLEGAL, the next offset,
  the queue's min and max), ``pull_blocking`` does the same with long polling (the broker
  holds the request until a message arrives or the suspension ends).  Offsets are the
  application's: ``update_offset`` / ``fetch_offset`` / ``persist`` go through the
  group's offset store.
- **Subscribe and poll** (``DefaultLitePullConsumer``): ``subscribe(topic, expression)``
  then ``poll(timeout_ms)``.  The consumer allocates the topic's queues among the group's
  consumers (GET_CONSUMER_LIST_BY_GROUP, ``AllocateMessageQueueAveragely`` by default, on
  the inputs ``sort_for_allocate`` orders), pulls its queues in the background with long
  polling into a bounded buffer, and ``poll`` returns what is buffered.  Returning
  messages marks them consumed; offsets are committed every
  ``persist_consumer_offset_interval`` (5 s) and at shutdown, so a consumer that dies
  between two commits has the last few seconds of messages redelivered (at-least-once).
  It rebalances every ``rebalance_interval_ms`` (20 s) and at once when a broker reports
  the group's members changed.

Offsets live on the brokers in the CLUSTERING model (``RemoteBrokerOffsetStore``) and in a
local file in BROADCASTING (``LocalFileOffsetStore``, where every consumer reads every
queue).  A queue with no committed offset starts as ``consume_from_where`` says.

Pulls always carry their tag expression (sysFlag ``PullSysFlag.SUBSCRIPTION``), so the broker filters
by tag hash; the client then keeps only messages whose ``TAGS`` is one of the expression's
tags, as RocketMQ's clients do (hash collisions are harmless).  Messages are
``MessageExt`` records with bodies decompressed (the COMPRESSED flag cleared) and the
queue's ``MIN_OFFSET``/``MAX_OFFSET`` properties set, as RocketMQ sets them.

Thread-safety: every method may be called from any thread; the work runs on the client
instance's loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import time
import zlib
from collections import deque
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.assignment import (
    group_consumer_ids,
    queue_offset,
    readable_queues,
    start_offset,
)
from broker_core.client.consumer.offsetstore import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    topic_offsets,
)
from broker_core.client.consumer.rebalance import (
    AllocateMessageQueueAveragely,
    AllocateMessageQueueStrategy,
    sort_for_allocate,
)
from broker_core.client.instance import ClientInstance
from broker_core.client.requests import refused
from broker_core.errors import ClientError, NoRouteError
from broker_core.messagequeue import MessageQueue
from broker_core.model.groupconfig import MASTER_ID
from broker_core.model.hashcode import tags_code
from broker_core.model.message import (
    COMPRESSED_FLAG,
    PROPERTY_MAX_OFFSET,
    PROPERTY_MIN_OFFSET,
    MessageExt,
    RecordFormatError,
    iter_records,
)
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import PullMessageRequestHeader, PullSysFlag
from broker_core.tags import SUB_ALL, parse_tags
from broker_core.topics import group_problem, topic_problem

log = logging.getLogger(__name__)

T = TypeVar("T")


# How long a background pull waits after a failure before trying the queue again.
PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION = 1_000
# How long a background pull waits when its queue's buffer is full.
PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL = 50


class MessageModel(enum.StrEnum):
    """Whether a group shares its queues (CLUSTERING) or every consumer reads all (BROADCASTING).

    String-valued, so the push consumer takes these or their names alike."""

    BROADCASTING = "BROADCASTING"
    CLUSTERING = "CLUSTERING"


class ConsumeFromWhere(enum.StrEnum):
    """Where a queue with no committed offset starts (string-valued, like ``MessageModel``)."""

    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class PullStatus(enum.Enum):
    """What a pull found (RocketMQ ``PullStatus``)."""

    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


# Keyed by int: a reply's code is the plain int read off the wire.
_STATUS_BY_CODE: dict[int, PullStatus] = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}


@dataclass(frozen=True, slots=True)
class PullResult:
    """One pull's outcome: continue from ``next_begin_offset`` (also after OFFSET_ILLEGAL)."""

    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SubscriptionData:
    """A topic and its tag expression, as heartbeats and pulls carry it."""

    topic: str
    expression: str
    tags: frozenset[str] | None  # None: every tag
    version: int

    @classmethod
    def of(cls, topic: str, expression: str | None) -> SubscriptionData:
        expression = (expression or "").strip() or SUB_ALL
        return cls(topic, expression, parse_tags(expression), time.time_ns() // 1_000_000)

    def matches(self, msg: MessageExt) -> bool:
        """The client-side filter: the message's tag is one of ours (by string)."""
        return self.tags is None or (msg.tags is not None and msg.tags in self.tags)

    def to_json(self) -> dict[str, Any]:
        """A heartbeat's subscriptionData entry (Java's field names; empty sets omitted)."""
        data: dict[str, Any] = {
            "classFilterMode": False,
            "expressionType": "TAG",
            "subString": self.expression,
            "subVersion": self.version,
            "topic": self.topic,
        }
        if self.tags:
            ordered = sorted(self.tags)
            data["tagsSet"] = ordered
            data["codeSet"] = [tags_code(t) for t in ordered]
        return data


def decode_pull_body(body: bytes, min_offset: int, max_offset: int) -> list[MessageExt]:
    """The records of a FOUND body, bodies decompressed, MIN/MAX_OFFSET properties set.

    Raises ClientError when the body is not a run of records.
    """
    try:
        messages = list(iter_records(body))
    except RecordFormatError as exc:
        raise ClientError(f"the broker's pull body is malformed: {exc}") from None
    for msg in messages:
        if msg.sys_flag & COMPRESSED_FLAG:
            try:
                msg.body = zlib.decompress(msg.body)
            except zlib.error as exc:
                raise ClientError(f"message {msg.msg_id} has a corrupt compressed body: {exc}") from None
            msg.sys_flag &= ~COMPRESSED_FLAG
        msg.properties[PROPERTY_MIN_OFFSET] = str(min_offset)
        msg.properties[PROPERTY_MAX_OFFSET] = str(max_offset)
    return messages


@dataclass(slots=True)
class _Chunk:
    """Pulled messages of one queue not yet returned by ``poll``; ``next_offset`` follows them."""

    messages: deque[MessageExt]
    next_offset: int


@dataclass(slots=True)
class _Assigned:
    """A queue this consumer pulls in the subscribe-and-poll style."""

    subscription: SubscriptionData
    pull_offset: int
    chunks: deque[_Chunk] = field(default_factory=deque)
    buffered: int = 0
    task: asyncio.Task[None] | None = None
    paused: bool = False


class PullConsumer:
    """Pulls messages of one consumer group; thread-safe.  ``start()`` before use."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        config: ClientConfig | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp_ms: int | None = None,
        allocate_strategy: AllocateMessageQueueStrategy | None = None,
        offset_store_dir: str | os.PathLike[str] | None = None,
        pull_batch_size: int = 32,
        poll_batch_size: int = 10,
        pull_threshold_for_queue: int = 1000,
        broker_suspend_max_time_ms: int = 20_000,
        rebalance_interval_ms: int = 20_000,
        auto_commit: bool = True,
    ) -> None:
        self.group = group
        self.config = config if config is not None else ClientConfig(namesrv_addr=namesrv_addr)
        try:  # the enums, or their names as strings
            self.message_model = MessageModel(message_model)
            self.consume_from_where = ConsumeFromWhere(consume_from_where)
        except ValueError as exc:
            raise ClientError(str(exc)) from None
        # RocketMQ's default: half an hour ago.
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate_strategy = allocate_strategy or AllocateMessageQueueAveragely()
        self.offset_store_dir = offset_store_dir
        self.pull_batch_size = pull_batch_size
        self.poll_batch_size = poll_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.broker_suspend_max_time_ms = broker_suspend_max_time_ms
        self.rebalance_interval_ms = rebalance_interval_ms
        self.auto_commit = auto_commit
        self.offset_store: OffsetStore | None = None
        self._instance: ClientInstance | None = None
        self._subscriptions: dict[str, SubscriptionData] = {}
        # assign(): queues chosen by the application, no rebalance (exclusive with subscribe).
        self._manual: dict[MessageQueue, SubscriptionData] | None = None
        self._assigned: dict[MessageQueue, _Assigned] = {}
        self._suggested: dict[MessageQueue, int] = {}
        self._arrived: asyncio.Event | None = None
        self._timers: list[asyncio.Task[None]] = []
        self._rebalance_lock: asyncio.Lock | None = None
        self._cursor = 0
        self._background: set[asyncio.Future[None]] = set()
        self._stopping = False  # set by shutdown: no rebalance may start a pull after it

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> PullConsumer:
        """Join the client instance as a CONSUME_ACTIVELY consumer and load the offset store."""
        if self._instance is not None:
            return self
        problem = group_problem(self.group)
        if problem is not None:
            raise ClientError(problem)
        instance = self._instance = ClientInstance.acquire(self.config)
        try:
            instance.submit(self._start(instance)).result()
        except BaseException:
            self._instance = None
            with contextlib.suppress(Exception):
                instance.submit(self._stop(instance)).result(timeout=10)
            instance.release()
            raise
        return self

    async def _start(self, instance: ClientInstance) -> None:
        if self.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(instance.client_id, self.group, self.offset_store_dir)
        else:
            self.offset_store = RemoteBrokerOffsetStore(instance, self.group)
        await self.offset_store.load()
        self._arrived = asyncio.Event()
        self._rebalance_lock = asyncio.Lock()
        for topic in self._subscriptions:
            await instance.route(topic)
        await instance.register_consumer(self)
        self._timers = [
            asyncio.create_task(self._every(self.config.persist_consumer_offset_interval, self._persist_all)),
            asyncio.create_task(self._every(self.rebalance_interval_ms, self._rebalance)),
        ]
        if self._subscriptions or self._manual is not None:
            await self._rebalance()

    def shutdown(self) -> None:
        """Stop pulling, commit the offsets, leave the group; the last user closes the instance."""
        instance, self._instance = self._instance, None
        if instance is None:
            return
        try:
            instance.submit(self._stop(instance)).result(timeout=15)
        finally:
            instance.release()

    async def _stop(self, instance: ClientInstance) -> None:
        self._stopping = True
        if self._rebalance_lock is not None:
            async with self._rebalance_lock:  # a rebalance under way finishes first
                pass
        tasks = [*self._timers, *self._background]
        tasks += [a.task for a in self._assigned.values() if a.task is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._timers = []
        for assigned in self._assigned.values():
            assigned.task = None
        if self.offset_store is not None:
            try:
                await self.offset_store.persist_all()
            except ClientError as exc:
                log.warning("committing the offsets of %s at shutdown failed: %s", self.group, exc)
        await instance.unregister(self, consumer=True)

    def __enter__(self) -> PullConsumer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def heartbeat_data(self) -> dict[str, Any]:
        """This group's heartbeat entry: a pull consumer with its subscriptions."""
        data: dict[str, Any] = {
            "consumeFromWhere": self.consume_from_where.value,
            "consumeType": "CONSUME_ACTIVELY",
            "groupName": self.group,
            "messageModel": self.message_model.value,
            "unitMode": False,
        }
        if self._subscriptions:
            data["subscriptionDataSet"] = [s.to_json() for s in self._subscriptions.values()]
        return data

    def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offsets held for ``topic``'s queues."""
        return topic_offsets(self.offset_store, topic)

    def on_consumer_ids_changed(self) -> None:
        """The group's members changed (the instance relays the broker's notice): rebalance now."""
        if self._instance is not None and self._subscriptions:
            self._instance.call_soon(self._spawn_rebalance)

    def _spawn_rebalance(self) -> None:
        task = asyncio.ensure_future(self._quietly(self._rebalance))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    @property
    def instance(self) -> ClientInstance:
        if self._instance is None:
            raise ClientError(f"pull consumer {self.group!r} is not started")
        return self._instance

    def _run(self, coro: Coroutine[Any, Any, T], timeout_s: float | None = None) -> T:
        """Run ``coro`` on the instance's loop and wait for its result (the blocking API)."""
        return self.instance.submit(coro).result(timeout_s)

    # -- queues and offsets of a queue ------------------------------------------------------

    def fetch_queues(self, topic: str) -> list[MessageQueue]:
        """The readable queues of ``topic`` (from the nameservers' route), sorted.

        Raises NoRouteError when the topic is unknown or has no readable queue.
        """
        return self._run(self._fetch_queues(topic))

    def min_offset(self, mq: MessageQueue) -> int:
        """The oldest offset still stored in ``mq`` (GET_MIN_OFFSET)."""
        return self._run(self._offset_query(RequestCode.GET_MIN_OFFSET, mq))

    def max_offset(self, mq: MessageQueue) -> int:
        """The offset the next message of ``mq`` will get (GET_MAX_OFFSET)."""
        return self._run(self._offset_query(RequestCode.GET_MAX_OFFSET, mq))

    def search_offset(self, mq: MessageQueue, timestamp_ms: int) -> int:
        """The offset of the first message of ``mq`` stored at or after ``timestamp_ms``."""
        return self._run(self._offset_query(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq, timestamp_ms))

    # -- pulling -------------------------------------------------------------------------------

    def pull(
        self,
        mq: MessageQueue,
        subscription_expression: str | None,
        offset: int,
        max_nums: int = 32,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Read up to ``max_nums`` messages of ``mq`` from ``offset`` without waiting.

        Raises BrokerRefusedError (with the broker's code), NoRouteError, RemotingError.
        """
        sub = SubscriptionData.of(mq.topic, subscription_expression)
        timeout_s = (timeout_ms or self.config.request_timeout_ms) / 1000
        return self._run(self._pull(mq, sub, offset, max_nums, None, timeout_s))

    def pull_blocking(
        self,
        mq: MessageQueue,
        subscription_expression: str | None,
        offset: int,
        max_nums: int = 32,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Like ``pull``, but when nothing is there the broker holds the request until a
        message arrives or ``timeout_ms`` (``broker_suspend_max_time_ms``) passes."""
        sub = SubscriptionData.of(mq.topic, subscription_expression)
        suspend_ms = timeout_ms if timeout_ms is not None else self.broker_suspend_max_time_ms
        timeout_s = (suspend_ms + self.config.request_timeout_ms) / 1000
        return self._run(self._pull(mq, sub, offset, max_nums, suspend_ms, timeout_s))

    # -- offsets through the store ------------------------------------------------------------

    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        """Set the group's next offset of ``mq`` (in memory; committed by ``persist`` or the timer)."""
        self._store.update(mq, offset, False)

    def fetch_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        """The group's next offset of ``mq``: from the broker (or file), else memory; -1 if none."""
        where = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return self._run(self._store.read(mq, where))

    def persist(self, mq: MessageQueue | None = None) -> None:
        """Commit ``mq``'s offset (or every changed one) now; errors are raised for one queue."""
        store = self._store
        self._run(store.persist(mq) if mq is not None else store.persist_all())

    @property
    def _store(self) -> OffsetStore:
        if self._instance is None or self.offset_store is None:
            raise ClientError(f"pull consumer {self.group!r} is not started")
        return self.offset_store

    # -- subscribe and poll -------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | None = SUB_ALL) -> None:
        """Consume ``topic`` (messages whose tag matches ``expression``) through ``poll``."""
        problem = topic_problem(topic)
        if problem is not None:
            raise ClientError(problem)
        if self._manual is not None:
            raise ClientError("subscribe() and assign() are exclusive: this consumer has assigned queues")
        sub = SubscriptionData.of(topic, expression)
        if self._instance is None:
            self._subscriptions[topic] = sub
            return
        self._run(self._subscribe(sub))

    def unsubscribe(self, topic: str) -> None:
        """Stop consuming ``topic``: its queues are committed and released."""
        if self._instance is None:
            self._subscriptions.pop(topic, None)
            return
        self._run(self._unsubscribe(topic))

    def assignment(self) -> list[MessageQueue]:
        """The queues this consumer currently pulls for ``poll``, sorted."""
        if self._instance is None:
            return []
        return self._run(self._assignment())

    def assign(self, queues: list[MessageQueue], expression: str | None = SUB_ALL) -> None:
        """Pull exactly ``queues`` for ``poll`` (RocketMQ's lite-pull ``assign``): no group
        rebalance, each queue from its committed offset or ``consume_from_where``.  Calling
        it again replaces the set; queues left out are committed and released.

        Raises ClientError when the consumer subscribes to topics (the two are exclusive).
        """
        if self._subscriptions:
            raise ClientError("subscribe() and assign() are exclusive: this consumer subscribes to topics")
        for mq in queues:
            problem = topic_problem(mq.topic)
            if problem is not None:
                raise ClientError(problem)
        self._manual = {mq: SubscriptionData.of(mq.topic, expression) for mq in queues}
        if self._instance is not None:
            self._run(self._rebalance())

    def seek(self, mq: MessageQueue, offset: int) -> None:
        """Make ``poll`` go on from ``offset`` of ``mq``: what was buffered is dropped, and the
        offset is the group's new consumed offset (committed with the others).

        Raises ClientError when ``mq`` is not assigned or ``offset`` is outside the queue's
        stored range (min..max offset).
        """
        self._run(self._seek(mq, lambda lo, hi: offset))

    def seek_to_begin(self, mq: MessageQueue) -> None:
        """``seek`` to the oldest message still stored in ``mq``."""
        self._run(self._seek(mq, lambda lo, hi: lo))

    def seek_to_end(self, mq: MessageQueue) -> None:
        """``seek`` past the newest message of ``mq``: only new messages are polled."""
        self._run(self._seek(mq, lambda lo, hi: hi))

    def pause(self, queues: list[MessageQueue]) -> None:
        """Stop pulling ``queues`` and returning their messages from ``poll`` until ``resume``;
        their buffered messages and offsets are kept."""
        self._run(self._set_paused(queues, True))

    def resume(self, queues: list[MessageQueue]) -> None:
        """Pull and poll ``queues`` again after ``pause``."""
        self._run(self._set_paused(queues, False))

    def committed(self, mq: MessageQueue) -> int:
        """The group's consumed offset of ``mq`` as the broker (or offset file) has it; -1 if none."""
        return self.fetch_offset(mq, from_store=True)

    def rebalance(self) -> list[MessageQueue]:
        """Re-allocate the subscribed topics' queues now; the new assignment."""
        self._run(self._rebalance())
        return self.assignment()

    def poll(self, timeout_ms: int = 5_000) -> list[MessageExt]:
        """Up to ``poll_batch_size`` messages of the subscribed topics, waiting up to ``timeout_ms``.

        Returned messages count as consumed: their queues' offsets move past them and are
        committed by the timer (with ``auto_commit``) or by ``commit``.
        """
        return self._run(self._poll(timeout_ms / 1000))

    def commit(self) -> None:
        """Commit every consumed offset now."""
        self._run(self._store.persist_all())

    # -- on the instance's loop ----------------------------------------------------------------

    async def _every(self, interval_ms: int, job: Any) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await self._quietly(job)

    async def _quietly(self, job: Any) -> None:
        try:
            await job()
        except (ClientError, RemotingError) as exc:
            log.warning("%s of consumer group %s failed: %s", job.__name__, self.group, exc)
        except Exception:  # a timer must outlive one bad round
            log.exception("%s of consumer group %s failed", job.__name__, self.group)

    async def _persist_all(self) -> None:
        if self.offset_store is not None and (self.auto_commit or not self._subscriptions):
            await self.offset_store.persist_all()

    async def _fetch_queues(self, topic: str) -> list[MessageQueue]:
        queues = readable_queues(await self.instance.route(topic))
        if not queues:
            raise NoRouteError(f"topic {topic!r} has no readable queue")
        return queues

    async def _addr(self, mq: MessageQueue, *, master: bool = False) -> str:
        """The broker to ask about ``mq``: its master, or the broker the last pull suggested."""
        addrs = self.instance.broker_addrs(mq.broker_name)
        if not addrs:
            await self.instance.update_route(mq.topic)
            addrs = self.instance.broker_addrs(mq.broker_name)
        if not addrs:
            raise NoRouteError(f"no address of broker {mq.broker_name!r} for {mq}")
        if master:
            if MASTER_ID not in addrs:
                raise NoRouteError(f"broker {mq.broker_name!r} of {mq} has no master")
            return addrs[MASTER_ID]
        wanted = self._suggested.get(mq, MASTER_ID)
        return addrs.get(wanted) or addrs.get(MASTER_ID) or addrs[min(addrs)]

    async def _offset_query(
        self, code: RequestCode, mq: MessageQueue, timestamp_ms: int | None = None
    ) -> int:
        return await queue_offset(self.instance, code, mq, timestamp_ms)

    async def _pull(
        self,
        mq: MessageQueue,
        sub: SubscriptionData,
        offset: int,
        max_nums: int,
        suspend_ms: int | None,
        timeout_s: float,
    ) -> PullResult:
        if offset < 0:
            raise ClientError(f"offset {offset} of {mq} is negative")
        if max_nums <= 0:
            raise ClientError(f"max_nums must be positive, not {max_nums}")
        addr = await self._addr(mq)
        sys_flag = PullSysFlag.SUBSCRIPTION
        if suspend_ms is not None:
            sys_flag |= PullSysFlag.SUSPEND
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=sys_flag,
            commit_offset=0,
            suspend_timeout_millis=suspend_ms or 0,
            subscription=sub.expression,
            expression_type="TAG",
        )
        reply = await self.instance.requests.pull_message(addr, header, timeout_s)
        status = _STATUS_BY_CODE.get(reply.code)
        if status is None:
            raise refused(addr, f"the pull of {mq} at {offset}", reply.response)
        try:
            answer = reply.header
        except ValueError as exc:
            raise ClientError(f"{addr} answered the pull of {mq} with a malformed header: {exc!r}") from None
        next_offset = answer.next_begin_offset
        if next_offset is None:
            raise ClientError(f"{addr} answered the pull of {mq} with a malformed header: no nextBeginOffset")
        min_offset, max_offset = answer.min_offset, answer.max_offset
        self._suggested[mq] = answer.suggest_which_broker_id
        messages: list[MessageExt] = []
        if status is PullStatus.FOUND:
            messages = [m for m in decode_pull_body(reply.body, min_offset, max_offset) if sub.matches(m)]
        return PullResult(status, next_offset, min_offset, max_offset, messages)

    # -- subscribe and poll, on the loop -------------------------------------------------------

    async def _subscribe(self, sub: SubscriptionData) -> None:
        await self.instance.route(sub.topic)
        self._subscriptions[sub.topic] = sub
        await self.instance.heartbeat_all()
        await self._rebalance()

    async def _unsubscribe(self, topic: str) -> None:
        self._subscriptions.pop(topic, None)
        await self.instance.heartbeat_all()
        await self._rebalance()

    async def _assignment(self) -> list[MessageQueue]:
        return sorted(self._assigned)

    async def _rebalance(self) -> None:
        """Allocate each subscribed topic's queues; start pulling new ones, release lost ones."""
        assert self._rebalance_lock is not None
        async with self._rebalance_lock:
            wanted: set[MessageQueue] = set()
            if self._manual is not None:  # assign(): the application's queues, as they are
                wanted = set(self._manual)
            for topic in list(self._subscriptions):
                try:
                    wanted |= set(await self._allocate(topic))
                except (ClientError, RemotingError) as exc:
                    log.warning("rebalance of %s for topic %s failed: %s", self.group, topic, exc)
                    wanted |= {mq for mq in self._assigned if mq.topic == topic}
            for mq in [mq for mq in self._assigned if mq not in wanted]:
                await self._release(mq)
            for mq in sorted(wanted - set(self._assigned)):
                sub = self._manual.get(mq) if self._manual is not None else self._subscriptions.get(mq.topic)
                if sub is None:
                    continue
                try:
                    offset = await self._start_offset(mq)
                except (ClientError, RemotingError) as exc:
                    log.warning("no start offset for %s of %s yet: %s", mq, self.group, exc)
                    continue
                if self._stopping:
                    return
                assigned = _Assigned(sub, offset)
                self._assigned[mq] = assigned
                assigned.task = asyncio.create_task(self._pull_loop(mq, assigned))
                log.info("consumer group %s now pulls %s from offset %d", self.group, mq, offset)

    async def _allocate(self, topic: str) -> list[MessageQueue]:
        queues = await self._fetch_queues(topic)
        if self.message_model is MessageModel.BROADCASTING:
            return queues
        cids = await group_consumer_ids(self.instance, self.group, await self.instance.route(topic))
        mq_all, cid_all = sort_for_allocate(queues, cids)
        return self.allocate_strategy.allocate(self.group, self.instance.client_id, mq_all, cid_all)

    async def _start_offset(self, mq: MessageQueue) -> int:
        """The committed offset, else where ``consume_from_where`` says a new queue starts."""
        assert self.offset_store is not None
        return await start_offset(
            self.instance, self.offset_store, mq, self.consume_from_where.value, self.consume_timestamp_ms
        )

    async def _release(self, mq: MessageQueue) -> None:
        """Stop pulling ``mq``, drop what ``poll`` has not returned, commit and forget it."""
        assigned = self._assigned.pop(mq)
        if assigned.task is not None:
            assigned.task.cancel()
            await asyncio.gather(assigned.task, return_exceptions=True)
        assert self.offset_store is not None
        try:
            await self.offset_store.persist(mq)
        except (ClientError, RemotingError) as exc:
            log.warning("committing %s of %s on release failed: %s", mq, self.group, exc)
        self.offset_store.remove(mq)
        log.info("consumer group %s released %s", self.group, mq)

    async def _pull_loop(self, mq: MessageQueue, assigned: _Assigned) -> None:
        """Keep ``mq``'s buffer filled with long polls until the queue is released."""
        assert self._arrived is not None
        while True:
            if assigned.buffered >= self.pull_threshold_for_queue or assigned.paused:
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL / 1000)
                continue
            suspend_ms = self.broker_suspend_max_time_ms
            try:
                result = await self._pull(
                    mq,
                    assigned.subscription,
                    assigned.pull_offset,
                    self.pull_batch_size,
                    suspend_ms,
                    (suspend_ms + self.config.request_timeout_ms) / 1000,
                )
            except (ClientError, RemotingError) as exc:
                log.info("pull of %s for %s failed: %s", mq, self.group, exc)
                await asyncio.sleep(PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION / 1000)
                continue
            if result.status is PullStatus.NO_NEW_MSG:
                continue
            if result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning(
                    "offset %d of %s is illegal for %s; continuing at %d",
                    assigned.pull_offset,
                    mq,
                    self.group,
                    result.next_begin_offset,
                )
            assigned.pull_offset = result.next_begin_offset
            assigned.chunks.append(_Chunk(deque(result.messages), result.next_begin_offset))
            assigned.buffered += len(result.messages)
            self._arrived.set()

    async def _seek(self, mq: MessageQueue, choose: Any) -> None:
        assigned = self._assigned.get(mq)
        if assigned is None:
            raise ClientError(f"{mq} is not assigned to this consumer: seek needs an assigned queue")
        low = await self._offset_query(RequestCode.GET_MIN_OFFSET, mq)
        high = await self._offset_query(RequestCode.GET_MAX_OFFSET, mq)
        offset = int(choose(low, high))
        if not low <= offset <= high:
            raise ClientError(f"offset {offset} of {mq} is outside its stored range {low}..{high}")
        if assigned.task is not None:
            assigned.task.cancel()
            await asyncio.gather(assigned.task, return_exceptions=True)
        assigned.chunks.clear()
        assigned.buffered = 0
        assigned.pull_offset = offset
        assert self.offset_store is not None
        self.offset_store.update(mq, offset, False)
        if self._assigned.get(mq) is assigned and not self._stopping:
            assigned.task = asyncio.create_task(self._pull_loop(mq, assigned))
        log.info("consumer group %s: %s seeks to offset %d", self.group, mq, offset)

    async def _set_paused(self, queues: list[MessageQueue], paused: bool) -> None:
        for mq in queues:
            assigned = self._assigned.get(mq)
            if assigned is not None:
                assigned.paused = paused
        if not paused and self._arrived is not None:
            self._arrived.set()  # a poll waiting may take what the queue still buffers

    async def _poll(self, timeout_s: float) -> list[MessageExt]:
        if not self._subscriptions and self._manual is None:
            raise ClientError(
                f"consumer group {self.group!r} has nothing to poll: subscribe() or assign() first"
            )
        assert self._arrived is not None
        deadline = time.monotonic() + timeout_s
        while True:
            self._arrived.clear()
            taken = self._take(self.poll_batch_size)
            left = deadline - time.monotonic()
            if taken or left <= 0:
                return taken
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    def _take(self, limit: int) -> list[MessageExt]:
        """Up to ``limit`` buffered messages, queue by queue in turn; consumed offsets move."""
        assert self.offset_store is not None
        taken: list[MessageExt] = []
        queues = sorted(self._assigned)
        if not queues:
            return taken
        start = self._cursor % len(queues)
        for mq in queues[start:] + queues[:start]:
            assigned = self._assigned[mq]
            if assigned.paused:
                continue
            while assigned.chunks and len(taken) < limit:
                chunk = assigned.chunks[0]
                while chunk.messages and len(taken) < limit:
                    msg = chunk.messages.popleft()
                    assigned.buffered -= 1
                    taken.append(msg)
                    self.offset_store.update(mq, msg.queue_offset + 1, True)
                if chunk.messages:
                    break
                assigned.chunks.popleft()
                self.offset_store.update(mq, chunk.next_offset, True)
            if len(taken) >= limit:
                break
        self._cursor += 1
        return taken


__all__ = [
    "ConsumeFromWhere",
    "MessageModel",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "SubscriptionData",
    "decode_pull_body",
]
