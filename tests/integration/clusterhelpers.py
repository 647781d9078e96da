"""Helpers for the admin tests: a nameserver + broker pair, and the frames clients send.

Offsets are committed and clients announced with the raw frames RocketMQ clients send
(UPDATE_CONSUMER_OFFSET, HEART_BEAT), so the admin side reads what real clients left.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import orjson

from broker_core.broker.controller import BrokerController
from broker_core.model.message import MessageInner
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv


def dead_addr() -> str:
    """A loopback address nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


@contextlib.asynccontextmanager
async def cluster(store_dir: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    """A nameserver and a broker ``broker-a`` of ``DefaultCluster`` registered with it."""
    async with run_namesrv() as ns, run_broker(store_dir, ns.address) as broker:
        yield ns, broker


@contextlib.asynccontextmanager
async def routed_cluster(
    store_dir: Path, topic: str, queues: int
) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    """A nameserver and a broker with ``topic`` routed, every delay level 1 s (so a retry,
    at level 3 + reconsume times, comes back quickly; the broker's own scan delivers it)."""
    store = {"message_delay_level": " ".join(["1s"] * 18)}
    async with run_namesrv() as ns, run_broker(store_dir, ns.address, store=store) as broker:
        broker.topics.update(TopicConfig(topic, queues, queues))
        broker.topics_changed()
        await wait_until_routed(ns, topic)
        yield ns, broker


@contextlib.asynccontextmanager
async def raw_client() -> AsyncIterator[RemotingClient]:
    """A remoting client for the frames a producer or consumer would send."""
    client = RemotingClient()
    try:
        yield client
    finally:
        await client.close()


async def wait_until_routed(ns: NamesrvServer, topic: str, present: bool = True) -> None:
    """Wait for the broker's re-registration to (un)publish ``topic`` on the nameserver (a
    generous bound: on a busy machine a registration round can take several seconds)."""
    await _wait_for_route(ns, topic, lambda route: (route is not None) == present, 30)


async def wait_until_master_routed(ns: NamesrvServer, topic: str) -> None:
    """Wait until ``topic``'s route names a master again (a restarted master registered;
    its first registration may time out on a busy machine, and the next comes a period
    later)."""

    def names_master(route: dict[str, Any] | None) -> bool:
        return route is not None and any("0" in data["brokerAddrs"] for data in route["brokerDatas"])

    await _wait_for_route(ns, topic, names_master, 45)


async def _wait_for_route(
    ns: NamesrvServer, topic: str, wanted: Callable[[dict[str, Any] | None], bool], timeout: float
) -> None:
    async with asyncio.timeout(timeout):
        while not wanted(ns.routes.pickup_topic_route(topic)):
            await asyncio.sleep(0.02)


def put(broker: BrokerController, topic: str, queue_id: int, body: bytes, **properties: str) -> str:
    """Store one message through the broker's store; return its offset msgId."""
    assert broker.store is not None
    result = broker.store.put_message(MessageInner(topic, queue_id, body, properties))
    assert result.ok, result
    return result.msg_id


async def commit_offset(
    client: RemotingClient, broker: BrokerController, group: str, topic: str, queue_id: int, offset: int
) -> None:
    fields = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "commitOffset": str(offset)}
    request = RemotingCommand.request(RequestCode.UPDATE_CONSUMER_OFFSET, fields)
    assert (await client.invoke(broker.address, request)).code == ResponseCode.SUCCESS


async def heartbeat(
    client: RemotingClient,
    broker: BrokerController,
    client_id: str,
    *,
    consumer_group: str | None = None,
    subscriptions: dict[str, str] | None = None,
    producer_group: str | None = None,
) -> None:
    """Announce a consumer (with its subscriptions) and/or a producer, as a Java client does."""
    body: dict[str, object] = {"clientID": client_id, "producerDataSet": [], "consumerDataSet": []}
    if producer_group:
        body["producerDataSet"] = [{"groupName": producer_group}]
    if consumer_group:
        body["consumerDataSet"] = [
            {
                "groupName": consumer_group,
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": topic, "subString": expression, "subVersion": 1}
                    for topic, expression in (subscriptions or {}).items()
                ],
            }
        ]
    request = RemotingCommand.request(RequestCode.HEART_BEAT, {}, orjson.dumps(body))
    assert (await client.invoke(broker.address, request)).code == ResponseCode.SUCCESS


class _Startable(Protocol):
    def start(self) -> object: ...

    def shutdown(self) -> None: ...


C = TypeVar("C", bound=_Startable)


@contextlib.asynccontextmanager
async def started(client: C) -> AsyncIterator[C]:
    """Start and shut down a producer or consumer off the test's loop: the servers on it
    must answer meanwhile (its blocking calls wait for them)."""
    await asyncio.to_thread(client.start)
    try:
        yield client
    finally:
        await asyncio.to_thread(client.shutdown)
