"""Our push consumer giving up on a message, and handing one back when the broker will not.

A real nameserver and broker on loopback, with one-second delay levels so redeliveries
come back quickly.  The orderly consumer sends a message refused ``max_reconsume_times``
times to its retry topic with the count at the maximum, and the broker stores it in the
group's DLQ; the concurrent consumer, refused a send-back, sends the message to the
retry topic itself.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.model.message import MessageExt, decode_record
from broker_core.namesrv.server import NamesrvServer
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.topics import dlq_topic, retry_topic

from .clusterhelpers import put, routed_cluster

TOPIC = "GiveUpTopic"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    async with routed_cluster(tmp_path / "store", TOPIC, 1) as servers:
        yield servers


class Refuser:
    """A listener that refuses ``poison`` every time (or only ``times`` times) and takes
    everything else; it records what it was given, in order."""

    def __init__(self, poison: bytes, times: int | None = None) -> None:
        self.poison = poison
        self.times = times
        self.got: list[MessageExt] = []
        self.tries: list[tuple[bytes, int]] = []  # the body and its reconsume times, at the call
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.got.extend(msgs)
            self.tries.extend((m.body, m.reconsume_times) for m in msgs)
            refusals = sum(m.body == self.poison for m in self.got)
        if any(m.body == self.poison for m in msgs) and (self.times is None or refusals <= self.times):
            return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> list[bytes]:
        with self.lock:
            return [m.body for m in self.got]


async def until(predicate, timeout: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


def consumer(ns: NamesrvServer, group: str, listener: Refuser, **options: Any) -> PushConsumer:
    config = ClientConfig(namesrv_addr=ns.address, instance_name=group)
    push = PushConsumer(group, config=config, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **options)
    return push.subscribe(TOPIC, "*").register_listener(listener)


def stored(broker: BrokerController, topic: str) -> list[MessageExt]:
    assert broker.store is not None and broker.store.wait_dispatched()
    return [decode_record(r) for r in broker.store.get_message(topic, 0, 0, 32).messages]


async def test_an_orderly_consumer_gives_up_after_max_reconsume_times_and_goes_on_in_order(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    group = "orderly-dlq"
    for i in range(6):
        put(broker, TOPIC, 0, f"m-{i}".encode(), UNIQ_KEY=f"U{i}", KEYS=f"k-{i}")
    listener = Refuser(b"m-2")
    push = consumer(
        ns, group, listener, orderly=True, max_reconsume_times=2, suspend_current_queue_time_ms=50
    )
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: b"m-5" in listener.bodies())
    finally:
        await asyncio.to_thread(push.shutdown)
    # Tried once and retried twice in place, then given up; the queue went on in order.
    assert listener.bodies() == [b"m-0", b"m-1", b"m-2", b"m-2", b"m-2", b"m-3", b"m-4", b"m-5"]
    assert [times for body, times in listener.tries if body == b"m-2"] == [0, 1, 2]
    (dead,) = stored(broker, dlq_topic(group))
    assert dead.body == b"m-2" and dead.reconsume_times == 2
    assert dead.properties["RETRY_TOPIC"] == TOPIC and dead.properties["ORIGIN_MESSAGE_ID"] == "U2"
    assert dead.properties["KEYS"] == "k-2" and "DELAY" not in dead.properties
    assert stored(broker, retry_topic(group)) == []
    assert broker.store is not None
    assert broker.store.consumer_offsets.query_offset(group, TOPIC, 0) == 6


async def test_a_concurrent_consumer_refused_a_send_back_sends_the_message_to_its_retry_topic(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    group = "fallback-group"
    refused: list[RemotingCommand] = []

    def refuse_send_back(request: RemotingCommand, conn: Any) -> RemotingCommand:
        """The fault injected: this broker will not take a message back."""
        refused.append(request)
        return request.response(ResponseCode.SYSTEM_ERROR, "send-back refused by the test")

    broker.server.register(RequestCode.CONSUMER_SEND_MSG_BACK, refuse_send_back)
    put(broker, TOPIC, 0, b"m-0", UNIQ_KEY="U0", TAGS="TagA")
    put(broker, TOPIC, 0, b"m-1", UNIQ_KEY="U1")
    listener = Refuser(b"m-0", times=1)
    push = consumer(ns, group, listener)
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: listener.bodies().count(b"m-0") >= 2)
    finally:
        await asyncio.to_thread(push.shutdown)
    first, again = [m for m in listener.got if m.body == b"m-0"]  # two deliveries: two objects
    assert len(refused) == 1 and refused[0].ext_fields["maxReconsumeTimes"] == "16"
    # Redelivered through the retry topic, as the broker would have done it.
    assert (first.reconsume_times, again.reconsume_times) == (0, 1)
    assert again.topic == TOPIC and again.tags == "TagA"
    assert again.properties["ORIGIN_MESSAGE_ID"] == "U0" and again.properties["RETRY_TOPIC"] == TOPIC
    assert "RECONSUME_TIME" not in again.properties  # it travelled in the send header
    (copy,) = stored(broker, retry_topic(group))
    assert copy.body == b"m-0" and copy.reconsume_times == 1
    assert listener.bodies().count(b"m-1") == 1
