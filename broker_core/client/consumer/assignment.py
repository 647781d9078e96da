"""How a consumer takes queues on: the one rebalance of the push and the subscribe-and-poll
consumers, and what it needs (which queues a topic offers for reading, who the group's
members are, where a queue with no committed offset starts).

The rebalance is RocketMQ's ``RebalanceImpl``: for each subscribed topic it reads the
route's readable queues and (CLUSTERING) the group's client ids from a broker, sorts
both as Java does, and keeps the share the allocation strategy (``rebalance``) gives this
client; BROADCASTING takes every queue.  A topic it cannot rebalance now (no route, no
member list, a strategy refusing its input) keeps its current queues, as RocketMQ's
``rebalanceByTopic`` returns without change.  Queues no longer allocated are released
(their offsets committed) before new ones are taken, so two members never both hold a
queue for long.  What releasing and taking mean is the consumer's (``QueueHolder``).

RocketMQ's rules for a new queue: a new group starts at the queue's end
(CONSUME_FROM_LAST_OFFSET), its start (FIRST/MIN) or the first message stored after a
time (TIMESTAMP, half an hour ago by default); the group's own retry topic always starts
at 0, so no redelivery is skipped.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Collection, Iterable
from typing import TYPE_CHECKING, Protocol

from broker_core.client.consumer.offsetstore import NO_OFFSET, OffsetStore, ReadOffsetType
from broker_core.client.consumer.rebalance import AllocateMessageQueueStrategy, sort_for_allocate
from broker_core.client.requests import refused
from broker_core.client.routes import TopicRoute
from broker_core.errors import ClientError, NoRouteError
from broker_core.messagequeue import MessageQueue
from broker_core.model.topicconfig import PERM_READ
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.topics import RETRY_GROUP_TOPIC_PREFIX

if TYPE_CHECKING:
    from broker_core.client.instance import ClientInstance

log = logging.getLogger(__name__)

DEFAULT_CONSUME_TIMESTAMP_AGO_MS = 30 * 60 * 1000
_FROM_START = ("CONSUME_FROM_FIRST_OFFSET", "CONSUME_FROM_MIN_OFFSET")


def readable_queues(route: TopicRoute) -> list[MessageQueue]:
    """The topic's queues on brokers that allow reading, sorted."""
    return sorted(
        MessageQueue(route.topic, qd.broker_name, queue_id)
        for qd in route.queue_datas
        if qd.perm & PERM_READ
        for queue_id in range(qd.read_queue_nums)
    )


async def group_consumer_ids(instance: ClientInstance, group: str, route: TopicRoute) -> list[str]:
    """The client ids of ``group``'s consumers, from one broker of the topic (any: every
    broker a member heartbeats knows them), as RocketMQ's ``findConsumerIdList``.

    The brokers are asked in random order (load spread over them) until one answers.
    Raises NoRouteError (no broker), RemotingError (none answered), BrokerRefusedError or
    ClientError (a refusal, a malformed or empty list): the caller then keeps its current
    queues of the topic, as RocketMQ's rebalance skips a topic it has no member list for.
    """
    addrs = sorted(route.read_addrs().values())
    if not addrs:
        raise NoRouteError(f"topic {route.topic!r} has no broker address")
    random.shuffle(addrs)
    for addr in addrs[:-1]:
        try:
            return await instance.requests.get_consumer_list_by_group(addr, group)
        except RemotingError as exc:
            log.info("no consumer list of %s from %s: %s", group, addr, exc)
    return await instance.requests.get_consumer_list_by_group(addrs[-1], group)


async def queue_offset(
    instance: ClientInstance, code: int, mq: MessageQueue, timestamp_ms: int | None = None
) -> int:
    """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP of ``mq`` at its master
    (at a slave while the master is down).

    Raises NoRouteError (no broker of that name) or BrokerRefusedError.
    """
    addr = await instance.find_broker(mq.broker_name, mq.topic)
    fields = {"topic": mq.topic, "queueId": str(mq.queue_id)}
    if timestamp_ms is not None:
        fields["timestamp"] = str(timestamp_ms)
    response = await instance.invoke(addr, RemotingCommand.request(code, fields))
    if response.code != ResponseCode.SUCCESS:
        raise refused(addr, f"{RequestCode(code).name} of {mq}", response)
    return int(response.ext_fields.get("offset") or 0)


async def start_offset(
    instance: ClientInstance,
    store: OffsetStore,
    mq: MessageQueue,
    consume_from_where: str,
    consume_timestamp_ms: int | None = None,
) -> int:
    """The committed offset of ``mq``, else (none yet) where ``consume_from_where`` starts."""
    offset = await store.read(mq, ReadOffsetType.READ_FROM_STORE)
    if offset != NO_OFFSET:
        return offset
    if mq.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or consume_from_where in _FROM_START:
        return 0
    if consume_from_where == "CONSUME_FROM_TIMESTAMP":
        when = consume_timestamp_ms
        if when is None:
            when = time.time_ns() // 1_000_000 - DEFAULT_CONSUME_TIMESTAMP_AGO_MS
        return await queue_offset(instance, RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, mq, when)
    return await queue_offset(instance, RequestCode.GET_MAX_OFFSET, mq)


class QueueHolder(Protocol):
    """What a consumer lets its rebalance do with the queues it consumes."""

    def held_queues(self) -> Collection[MessageQueue]:
        """The queues it consumes now."""
        ...

    async def release_queue(self, mq: MessageQueue) -> None:
        """Stop consuming ``mq``: commit its offset and forget it."""
        ...

    async def take_queue(self, mq: MessageQueue) -> bool:
        """Start consuming ``mq`` (from ``start_offset``); False when it is refused for now
        (an orderly queue whose broker lock another member still holds).  A queue it cannot
        start now for another reason is skipped (True): the next rebalance tries again."""
        ...


class Rebalance:
    """One consumer group's rebalance in this client (RocketMQ ``RebalanceImpl``).

    ``run`` is serialised by ``lock``, which the consumer also holds for other changes of
    its queues (an offset reset, shutdown) so that they never interleave with a rebalance.
    """

    def __init__(
        self,
        instance: ClientInstance,
        group: str,
        strategy: AllocateMessageQueueStrategy,
        holder: QueueHolder,
        *,
        broadcasting: bool,
    ) -> None:
        self.instance = instance
        self.group = group
        self.strategy = strategy
        self.holder = holder
        self.broadcasting = broadcasting
        self.lock = asyncio.Lock()
        self._background: set[asyncio.Task[None]] = set()

    async def allocate(self, topic: str) -> list[MessageQueue]:
        """This client's share of ``topic``'s readable queues, from a fresh route.

        Raises NoRouteError (no route or, in CLUSTERING, no readable queue), RemotingError
        or ClientError (no member list), ValueError (the strategy refused its input).
        """
        route = await self.instance.update_route(topic)
        mq_all = readable_queues(route)
        if self.broadcasting:
            return mq_all
        if not mq_all:
            raise NoRouteError(f"topic {topic!r} has no readable queue")
        cid_all = await group_consumer_ids(self.instance, self.group, route)
        mq_sorted, cid_sorted = sort_for_allocate(mq_all, cid_all)
        return list(self.strategy.allocate(self.group, self.instance.client_id, mq_sorted, cid_sorted))

    async def run(self, topics: Iterable[str], fixed: Iterable[MessageQueue] = ()) -> list[MessageQueue]:
        """Allocate each of ``topics``; release the queues no longer ours, take the new ones
        (sorted) and the ``fixed`` ones (queues the application assigned).  The queues the
        holder refused to take, to be asked for again.
        """
        async with self.lock:
            wanted: set[MessageQueue] = set(fixed)
            for topic in list(topics):
                try:
                    wanted.update(await self.allocate(topic))
                except (ClientError, RemotingError, ValueError) as exc:
                    level = logging.INFO if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else logging.WARNING
                    log.log(level, "consumer %s: no rebalance of %s now: %s", self.group, topic, exc)
                    wanted.update(mq for mq in self.holder.held_queues() if mq.topic == topic)
            for mq in [mq for mq in self.holder.held_queues() if mq not in wanted]:
                await self.holder.release_queue(mq)
            new = sorted(wanted.difference(self.holder.held_queues()))
            return [mq for mq in new if not await self.holder.take_queue(mq)]

    def soon(self, job: Callable[[], Awaitable[object]]) -> None:
        """Run ``job`` (a rebalance the broker asked for) in a task of its own, on the loop;
        a failure is logged.  ``cancel`` stops the ones still running."""

        async def quietly() -> None:
            try:
                await job()
            except Exception:
                log.exception("consumer %s: rebalance failed", self.group)

        task = asyncio.get_running_loop().create_task(quietly(), name=f"rebalance-{self.group}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def cancel(self) -> None:
        """Cancel the rebalances ``soon`` started and wait for them to end."""
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
