"""What both consumers (push and pull) need to take a queue on: which queues a topic
offers for reading, who the group's members are, and where a queue with no committed
offset starts.

RocketMQ's rules: a new group starts at the queue's end (CONSUME_FROM_LAST_OFFSET), its
start (FIRST/MIN) or the first message stored after a time (TIMESTAMP, half an hour ago
by default); the group's own retry topic always starts at 0, so no redelivery is skipped.
"""

from __future__ import annotations

import logging
import random
import time
from typing import TYPE_CHECKING

from broker_core.client.consumer.offsetstore import NO_OFFSET, OffsetStore, ReadOffsetType
from broker_core.client.requests import refused
from broker_core.client.routes import TopicRoute
from broker_core.errors import NoRouteError
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
    """GET_MAX_OFFSET / GET_MIN_OFFSET / SEARCH_OFFSET_BY_TIMESTAMP of ``mq`` at its master.

    Raises NoRouteError (no master) or BrokerRefusedError.
    """
    addr = await instance.find_master(mq.broker_name, mq.topic)
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
