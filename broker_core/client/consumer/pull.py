"""The pull consumer: the application chooses queues and offsets (RocketMQ's
``DefaultMQPullConsumer``).

``fetch_queues(topic)`` lists the readable queues, ``pull(mq, expression, offset)`` reads
from an offset and returns a ``PullResult`` (FOUND / NO_NEW_MSG / NO_MATCHED_MSG /
OFFSET_ILLEGAL, the next offset, the queue's min and max), ``pull_blocking`` does the same
with long polling (the broker holds the request until a message arrives or the suspension
ends).  Offsets are the application's: ``update_offset`` / ``fetch_offset`` / ``persist``
go through the group's offset store, committed every ``persist_consumer_offset_interval``
(5 s) and at shutdown.  The subscribe-and-poll consumer (``litepull.LitePullConsumer``)
builds on this one.

Offsets live on the brokers in the CLUSTERING model (``RemoteBrokerOffsetStore``) and in a
local file in BROADCASTING (``LocalFileOffsetStore``).

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
import zlib
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, TypeVar

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.assignment import queue_offset, readable_queues
from broker_core.client.consumer.common import (
    ConsumeFromWhere,
    ConsumeType,
    MessageModel,
    MessageSelector,
    SubscriptionData,
    consumer_data,
)
from broker_core.client.consumer.offsetstore import (
    LocalFileOffsetStore,
    OffsetStore,
    ReadOffsetType,
    RemoteBrokerOffsetStore,
    topic_offsets,
)
from broker_core.client.instance import ClientInstance
from broker_core.client.requests import refused
from broker_core.errors import ClientError, NoRouteError
from broker_core.messagequeue import MessageQueue
from broker_core.model.groupconfig import MASTER_ID
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
from broker_core.topics import group_problem

log = logging.getLogger(__name__)

T = TypeVar("T")


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


class PullConsumer:
    """Pulls messages of one consumer group by queue and offset; thread-safe.  ``start()`` before use."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str = "",
        *,
        config: ClientConfig | None = None,
        message_model: MessageModel = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        offset_store_dir: str | os.PathLike[str] | None = None,
        broker_suspend_max_time_ms: int = 20_000,
    ) -> None:
        self.group = group
        self.config = config if config is not None else ClientConfig(namesrv_addr=namesrv_addr)
        try:  # the enums, or their names as strings
            self.message_model = MessageModel(message_model)
            self.consume_from_where = ConsumeFromWhere(consume_from_where)
        except ValueError as exc:
            raise ClientError(str(exc)) from None
        self.offset_store_dir = offset_store_dir
        self.broker_suspend_max_time_ms = broker_suspend_max_time_ms
        self.offset_store: OffsetStore | None = None
        self._instance: ClientInstance | None = None
        self._suggested: dict[MessageQueue, int] = {}
        self._timers: list[asyncio.Task[None]] = []

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
        """Load the offset store, join the group (a heartbeat), start the commit timer."""
        if self.message_model is MessageModel.BROADCASTING:
            self.offset_store = LocalFileOffsetStore(instance.client_id, self.group, self.offset_store_dir)
        else:
            self.offset_store = RemoteBrokerOffsetStore(instance, self.group)
        await self.offset_store.load()
        await instance.register_consumer(self)
        self._timers.append(
            asyncio.create_task(self._every(self.config.persist_consumer_offset_interval, self._persist_all))
        )

    def shutdown(self) -> None:
        """Stop, commit the offsets, leave the group; the last user closes the instance."""
        instance, self._instance = self._instance, None
        if instance is None:
            return
        try:
            instance.submit(self._stop(instance)).result(timeout=15)
        finally:
            instance.release()

    async def _stop(self, instance: ClientInstance) -> None:
        """Stop the timers, commit every offset, leave the group."""
        timers, self._timers = self._timers, []
        for task in timers:
            task.cancel()
        await asyncio.gather(*timers, return_exceptions=True)
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

    def subscription_data(self) -> list[SubscriptionData]:
        """The subscriptions its heartbeat carries: none (queues are chosen per pull)."""
        return []

    def heartbeat_data(self) -> dict[str, Any]:
        """This group's heartbeat entry: a pull consumer with its subscriptions."""
        return consumer_data(
            self.group,
            ConsumeType.CONSUME_ACTIVELY,
            self.message_model,
            self.consume_from_where,
            self.subscription_data(),
        )

    def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        """GET_CONSUMER_STATUS_FROM_CLIENT: the offsets held for ``topic``'s queues."""
        return topic_offsets(self.offset_store, topic)

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
        subscription_expression: str | MessageSelector | None,
        offset: int,
        max_nums: int = 32,
        timeout_ms: int | None = None,
    ) -> PullResult:
        """Read up to ``max_nums`` messages of ``mq`` from ``offset`` without waiting.

        ``subscription_expression``: a tag expression ("TagA || TagB", ``*``) or a
        ``MessageSelector`` (``MessageSelector.by_sql("a > 5")``: the broker filters).

        Raises BrokerRefusedError (with the broker's code), NoRouteError, RemotingError.
        """
        sub = SubscriptionData.of(mq.topic, subscription_expression)
        timeout_s = (timeout_ms or self.config.request_timeout_ms) / 1000
        return self._run(self._pull(mq, sub, offset, max_nums, None, timeout_s))

    def pull_blocking(
        self,
        mq: MessageQueue,
        subscription_expression: str | MessageSelector | None,
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

    # -- on the instance's loop ----------------------------------------------------------------

    async def _every(self, interval_ms: int, job: Callable[[], Awaitable[object]]) -> None:
        while True:
            await asyncio.sleep(interval_ms / 1000)
            await self._quietly(job)

    async def _quietly(self, job: Callable[[], Awaitable[object]]) -> None:
        """``job()``, its failure logged: a timer must outlive one bad round."""
        name = getattr(job, "__name__", job)
        try:
            await job()
        except (ClientError, RemotingError) as exc:
            log.warning("%s of consumer group %s failed: %s", name, self.group, exc)
        except Exception:  # a timer must outlive one bad round
            log.exception("%s of consumer group %s failed", name, self.group)

    async def _persist_all(self) -> None:
        """The commit timer's job: every changed offset."""
        if self.offset_store is not None:
            await self.offset_store.persist_all()

    async def _fetch_queues(self, topic: str) -> list[MessageQueue]:
        queues = readable_queues(await self.instance.route(topic))
        if not queues:
            raise NoRouteError(f"topic {topic!r} has no readable queue")
        return queues

    async def _addr(self, mq: MessageQueue) -> str:
        """The broker to pull ``mq`` from: the one the last pull suggested, else its master,
        else a slave (``ClientInstance.find_broker``)."""
        return await self.instance.find_broker(mq.broker_name, mq.topic, self._suggested.get(mq, MASTER_ID))

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
            expression_type=sub.expression_type,
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


__all__ = ["PullConsumer", "PullResult", "PullStatus", "decode_pull_body"]
