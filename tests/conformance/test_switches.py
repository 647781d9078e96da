"""Group and broker switches as the official C++ push consumer meets them: a group with
consumeEnable = false receives nothing until it is set back, a broadcasting consumer of a
group with consumeBroadcastEnable = false receives nothing, and under
autoCreateSubscriptionGroup = false an unknown group's consumer is refused (and keeps
running, to be served once the group exists).

The C++ client cannot itself send to ``%RETRY%<group>`` (its topic check refuses ``%``), so
retries sent straight there are covered by tests/integration/test_switches.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import orjson

from broker_core.broker.controller import BrokerController
from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.model.message import MessageInner
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "SwitchedTopic"
GROUP = "SwitchedConsumers"


async def update_group(broker: BrokerController, config: SubscriptionGroupConfig) -> None:
    """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, as the console and mqadmin send it."""
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, orjson.dumps(config.to_json())
        )
        response = await client.invoke(broker.address, request)
    finally:
        await client.close()
    assert response.code == ResponseCode.SUCCESS, response.remark


def store_one(broker: BrokerController, body: bytes = b"switched") -> None:
    assert broker.store is not None
    assert broker.store.put_message(MessageInner(TOPIC, 0, body, {"TAGS": "T", "KEYS": "k"})).ok
    assert broker.store.wait_dispatched()


async def until_registered(broker: BrokerController, group: str) -> None:
    """Wait for the consumer's first heartbeat to reach the broker."""
    async with asyncio.timeout(30):
        while not broker.clients.consumer_ids(group):
            await asyncio.sleep(0.1)


def consumer(ns_address: str, group: str, tmp: Path, seconds: float, *model: str) -> asyncio.Task[list[dict]]:
    """The official push consumer of ``group`` waiting for one message, in the background."""
    return asyncio.create_task(
        run_official_client(
            "consumer_child.py",
            ns_address,
            TOPIC,
            group,
            "1",
            "*",
            *model,
            home=tmp,
            extra_env={"QUIVER_CONSUMER_SECONDS": str(seconds)},
        )
    )


async def test_a_disabled_group_receives_nothing_until_consume_enable_is_set_back(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 1)
        await update_group(broker, SubscriptionGroupConfig(GROUP, consume_enable=False))
        await broker.registration.register_all()
        store_one(broker)

        running = consumer(ns.address, GROUP, tmp_path / "c", 45)
        await until_registered(broker, GROUP)
        await asyncio.sleep(4)  # the consumer rebalances and pulls, and is refused
        enabled_at = time.time()
        await update_group(broker, SubscriptionGroupConfig(GROUP, consume_enable=True))

        received = await running
    assert [m["body"] for m in received] == ["switched"], received
    assert received[0]["received_at"] >= enabled_at, "delivered while consumeEnable was false"


async def test_a_broadcasting_consumer_receives_nothing_when_the_group_forbids_it(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 1)
        await update_group(broker, SubscriptionGroupConfig(GROUP, consume_broadcast_enable=False))
        await broker.registration.register_all()

        running = consumer(ns.address, GROUP, tmp_path / "c", 14, "broadcasting")
        await until_registered(broker, GROUP)
        await asyncio.sleep(4)  # it rebalances and pulls (from the end: a new broadcasting consumer)
        store_one(broker)  # what it would get, were its pulls not refused
        assert await running == []
        # The same group consuming by clustering gets the message.
        received = await consumer(ns.address, GROUP, tmp_path / "c2", 40)
    assert [m["body"] for m in received] == ["switched"], received


async def test_an_unknown_group_is_refused_without_auto_create_and_served_once_created(
    tmp_path: Path,
) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "store", ns.address, auto_create_subscription_group=False) as broker,
    ):
        await create_topic(broker.address, TOPIC, 1)
        await broker.registration.register_all()
        store_one(broker)

        running = consumer(ns.address, GROUP, tmp_path / "c", 45)
        await asyncio.sleep(6)  # its heartbeats and any pulls are refused meanwhile
        assert broker.clients.consumer_ids(GROUP) == [], "the unknown group was registered"
        assert GROUP not in broker.groups.all()
        created_at = time.time()
        await update_group(broker, SubscriptionGroupConfig(GROUP))

        # The client carries on: its next heartbeat (every 30 s) is accepted, then it consumes.
        received = await running
    assert [m["body"] for m in received] == ["switched"], received
    assert received[0]["received_at"] >= created_at
