"""The subscribe-and-poll consumer (RocketMQ's ``DefaultLitePullConsumer``).

``subscribe(topic, expression)`` then ``poll(timeout_ms)``.  The consumer takes its share
of the topic's queues through the rebalance it shares with the push consumer
(``assignment.Rebalance``: GET_CONSUMER_LIST_BY_GROUP, ``AllocateMessageQueueAveragely``
by default), pulls its queues in the background with long polling into a bounded buffer,
and ``poll`` returns what is buffered.  Returning messages marks them consumed; offsets
are committed every ``persist_consumer_offset_interval`` (5 s) and at shutdown, so a
consumer that dies between two commits has the last few seconds of messages redelivered
(at-least-once).  It rebalances every ``rebalance_interval_ms`` (20 s) and at once when a
broker reports the group's members changed.  ``assign(queues)`` instead pulls exactly
the application's queues, with no rebalance; ``seek``, ``pause`` and ``resume`` act on
one assigned queue.

It is a ``pull.PullConsumer`` too (the pulls, the offset store, ``pull`` by queue and
offset); a queue with no committed offset starts as ``consume_from_where`` says
(``assignment.start_offset``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.assignment import Rebalance, start_offset
from broker_core.client.consumer.common import (
    ConsumeFromWhere,
    MessageModel,
    MessageSelector,
    SubscriptionData,
)
from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.client.consumer.rebalance import AllocateMessageQueueAveragely, AllocateMessageQueueStrategy
from broker_core.client.instance import ClientInstance
from broker_core.errors import ClientError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageExt
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.errors import RemotingError
from broker_core.tags import SUB_ALL
from broker_core.topics import topic_problem

log = logging.getLogger(__name__)

# How long a background pull waits after a failure before trying the queue again.
PULL_TIME_DELAY_MILLS_WHEN_EXCEPTION = 1_000
# How long a background pull waits when its queue's buffer is full.
PULL_TIME_DELAY_MILLS_WHEN_FLOW_CONTROL = 50


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


class LitePullConsumer(PullConsumer):
    """Polls the messages of subscribed topics (or assigned queues); thread-safe.  ``start()`` before use."""

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
        super().__init__(
            group,
            namesrv_addr,
            config=config,
            message_model=message_model,
            consume_from_where=consume_from_where,
            offset_store_dir=offset_store_dir,
            broker_suspend_max_time_ms=broker_suspend_max_time_ms,
        )
        # RocketMQ's default: half an hour ago.
        self.consume_timestamp_ms = consume_timestamp_ms
        self.allocate_strategy: AllocateMessageQueueStrategy = (
            allocate_strategy or AllocateMessageQueueAveragely()
        )
        self.pull_batch_size = pull_batch_size
        self.poll_batch_size = poll_batch_size
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.rebalance_interval_ms = rebalance_interval_ms
        self.auto_commit = auto_commit
        self._subscriptions: dict[str, SubscriptionData] = {}
        # assign(): queues chosen by the application, no rebalance (exclusive with subscribe).
        self._manual: dict[MessageQueue, SubscriptionData] | None = None
        self._assigned: dict[MessageQueue, _Assigned] = {}
        self._arrived: asyncio.Event | None = None
        self._rebalancer: Rebalance | None = None
        self._cursor = 0
        self._stopping = False  # set by shutdown: no rebalance may start a pull after it

    # -- lifecycle ---------------------------------------------------------------------------

    async def _start(self, instance: ClientInstance) -> None:
        """Route the subscribed topics, join the group, then rebalance now and on a timer."""
        self._arrived = asyncio.Event()
        self._rebalancer = Rebalance(
            instance,
            self.group,
            self.allocate_strategy,
            self,
            broadcasting=self.message_model is MessageModel.BROADCASTING,
        )
        for topic, sub in self._subscriptions.items():
            await instance.route(topic)
            await instance.check_subscription(self.group, sub)  # a SQL92 one: served?
        await super()._start(instance)
        self._timers.append(asyncio.create_task(self._every(self.rebalance_interval_ms, self._rebalance)))
        if self._subscriptions or self._manual is not None:
            await self._rebalance()

    async def _stop(self, instance: ClientInstance) -> None:
        """Stop rebalancing and pulling, then commit and leave as every pull consumer does."""
        self._stopping = True
        if self._rebalancer is not None:
            async with self._rebalancer.lock:  # a rebalance under way finishes first
                pass
            await self._rebalancer.cancel()
        tasks = [*self._timers, *(a.task for a in self._assigned.values() if a.task is not None)]
        self._timers = []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for assigned in self._assigned.values():
            assigned.task = None
        await super()._stop(instance)

    def subscription_data(self) -> list[SubscriptionData]:
        """The subscribed topics, as its heartbeat carries them."""
        return list(self._subscriptions.values())

    def on_consumer_ids_changed(self) -> None:
        """The group's members changed (the instance relays the broker's notice): rebalance now."""
        if self._instance is not None and self._subscriptions:
            self._instance.call_soon(self._rebalance_soon)

    def _rebalance_soon(self) -> None:
        if self._rebalancer is not None:
            self._rebalancer.soon(self._rebalance)

    # -- subscribe and poll -------------------------------------------------------------------

    def subscribe(self, topic: str, expression: str | MessageSelector | None = SUB_ALL) -> None:
        """Consume ``topic`` (messages whose tag matches ``expression``, or that a
        ``MessageSelector.by_sql`` selector accepts) through ``poll``.

        A SQL92 selector is checked with a broker first (CHECK_CLIENT_CONFIG), as Java's
        lite-pull consumer does when it starts: BrokerRefusedError when the broker does
        not filter by SQL92 (``enablePropertyFilter``) or refuses the expression."""
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

    def assign(self, queues: list[MessageQueue], expression: str | MessageSelector | None = SUB_ALL) -> None:
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

    async def _persist_all(self) -> None:
        """The commit timer's job: with ``auto_commit`` (or assigned queues), every changed offset."""
        if self.auto_commit or not self._subscriptions:
            await super()._persist_all()

    # -- subscribe and poll, on the loop -------------------------------------------------------

    async def _subscribe(self, sub: SubscriptionData) -> None:
        await self.instance.route(sub.topic)
        await self.instance.check_subscription(self.group, sub)
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
        """Take this consumer's share of each subscribed topic's queues (or the assigned ones)."""
        assert self._rebalancer is not None
        await self._rebalancer.run(self._subscriptions, self._manual or ())

    def held_queues(self) -> list[MessageQueue]:
        """The queues this consumer pulls now (for the rebalance)."""
        return list(self._assigned)

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start pulling ``mq`` from its committed offset, else from ``consume_from_where``;
        a queue without a start offset now is left to the next rebalance.  Always True."""
        sub = self._manual.get(mq) if self._manual is not None else self._subscriptions.get(mq.topic)
        if sub is None or self._stopping:
            return True
        assert self.offset_store is not None
        try:
            offset = await start_offset(
                self.instance, self.offset_store, mq, self.consume_from_where.value, self.consume_timestamp_ms
            )
        except (ClientError, RemotingError) as exc:
            log.warning("no start offset for %s of %s yet: %s", mq, self.group, exc)
            return True
        if self._stopping:
            return True
        assigned = _Assigned(sub, offset)
        self._assigned[mq] = assigned
        assigned.task = asyncio.create_task(self._pull_loop(mq, assigned))
        log.info("consumer group %s now pulls %s from offset %d", self.group, mq, offset)
        return True

    async def release_queue(self, mq: MessageQueue) -> None:
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

    async def _seek(self, mq: MessageQueue, choose: Callable[[int, int], int]) -> None:
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


__all__ = ["LitePullConsumer"]
