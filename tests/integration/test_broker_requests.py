"""The typed request layer (``broker_core.client.requests``) against a real broker.

Each request is built from its declared header (``broker_core.remoting.headers``), which
the broker parses with the same class; the answers come back typed.  The consumer-list
fetch both consumers rebalance with (``group_consumer_ids``) asks the brokers of a route
until one answers and raises, rather than returning nothing, when none can tell.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client import AdminClient, AdminError
from broker_core.client.consumer.assignment import group_consumer_ids
from broker_core.client.requests import BrokerRequests
from broker_core.client.routes import BrokerData, TopicRoute
from broker_core.errors import BrokerRefusedError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import iter_records
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.errors import RemotingError
from broker_core.remoting.headers import (
    PullMessageRequestHeader,
    PullSysFlag,
    QueryConsumerOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)
from broker_core.routedata import QueueData
from broker_core.testing import run_broker

from .clusterhelpers import dead_addr, heartbeat, put

TOPIC = "RequestsTopic"
GROUP = "requests-group"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    async with run_broker(tmp_path / "store", "") as broker:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        yield broker


@pytest.fixture
async def requests() -> AsyncIterator[BrokerRequests]:
    client = RemotingClient()

    async def send(addr: str, request: RemotingCommand, timeout_s: float | None) -> RemotingCommand:
        return await client.invoke(addr, request, timeout_s or 5.0)

    try:
        yield BrokerRequests(send)
    finally:
        await client.close()


class _Instance:
    """The part of a ``ClientInstance`` that ``group_consumer_ids`` uses: its requests."""

    def __init__(self, requests: BrokerRequests) -> None:
        self.requests = requests


def route_over(*addrs: str) -> TopicRoute:
    brokers = tuple(BrokerData(f"broker-{i}", "DefaultCluster", {0: addr}) for i, addr in enumerate(addrs))
    return TopicRoute(TOPIC, tuple(QueueData(b.broker_name, 2, 2, 6) for b in brokers), brokers)


async def test_a_typed_pull_reads_the_stored_messages(
    broker: BrokerController, requests: BrokerRequests
) -> None:
    for body in (b"a", b"b", b"c"):
        put(broker, TOPIC, 1, body)
    assert broker.store is not None and broker.store.wait_dispatched()
    header = PullMessageRequestHeader(GROUP, TOPIC, 1, 1, sys_flag=PullSysFlag.SUBSCRIPTION)
    reply = await requests.pull_message(broker.address, header)
    assert reply.code == ResponseCode.SUCCESS
    assert [m.body for m in iter_records(reply.body)] == [b"b", b"c"]
    assert (reply.header.next_begin_offset, reply.header.min_offset, reply.header.max_offset) == (3, 0, 3)


async def test_a_pull_past_the_end_answers_with_where_to_go_on(
    broker: BrokerController, requests: BrokerRequests
) -> None:
    header = PullMessageRequestHeader(GROUP, TOPIC, 0, 0, sys_flag=PullSysFlag.SUBSCRIPTION)
    reply = await requests.pull_message(broker.address, header)
    assert reply.code == ResponseCode.PULL_NOT_FOUND
    assert reply.header.next_offset_or(99) == 0


async def test_offsets_are_committed_and_read_back(
    broker: BrokerController, requests: BrokerRequests
) -> None:
    for body in (b"a", b"b"):
        put(broker, TOPIC, 0, body)
    update = UpdateConsumerOffsetRequestHeader(GROUP, TOPIC, 0, 2)
    assert (await requests.update_consumer_offset(broker.address, update)).code == ResponseCode.SUCCESS
    response, answer = await requests.query_consumer_offset(
        broker.address, QueryConsumerOffsetRequestHeader(GROUP, TOPIC, 0)
    )
    assert response.code == ResponseCode.SUCCESS and answer.offset == 2


async def test_the_consumer_list_names_the_members_and_refuses_an_empty_group(
    broker: BrokerController, requests: BrokerRequests
) -> None:
    with pytest.raises(BrokerRefusedError) as refused:
        await requests.get_consumer_list_by_group(broker.address, GROUP)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    client = RemotingClient()
    try:
        await heartbeat(client, broker, "member-1", consumer_group=GROUP, subscriptions={TOPIC: "*"})
        assert await requests.get_consumer_list_by_group(broker.address, GROUP) == ["member-1"]
    finally:
        await client.close()


async def test_both_consumers_ask_the_next_broker_when_one_does_not_answer(
    broker: BrokerController, requests: BrokerRequests
) -> None:
    client = RemotingClient()
    try:
        await heartbeat(client, broker, "member-1", consumer_group=GROUP, subscriptions={TOPIC: "*"})
        route = route_over(dead_addr(), broker.address)
        for _ in range(4):  # the brokers are asked in random order: the dead one now and then first
            assert await group_consumer_ids(_Instance(requests), GROUP, route) == ["member-1"]  # type: ignore[arg-type]
    finally:
        await client.close()


async def test_the_consumer_list_fails_when_no_broker_can_tell(requests: BrokerRequests) -> None:
    with pytest.raises(RemotingError):
        await group_consumer_ids(_Instance(requests), GROUP, route_over(dead_addr()))  # type: ignore[arg-type]


async def test_a_tool_pull_of_a_missing_topic_is_an_admin_error(broker: BrokerController) -> None:
    async with AdminClient(None) as admin:
        reply = await admin.pull_tool(broker.address, MessageQueue(TOPIC, "broker-a", 0), 0, 32)
        assert reply.code == ResponseCode.PULL_NOT_FOUND
        with pytest.raises(AdminError) as refused:
            await admin.pull_tool(broker.address, MessageQueue("NoSuchTopic", "broker-a", 0), 0, 32)
    assert refused.value.code == ResponseCode.TOPIC_NOT_EXIST
