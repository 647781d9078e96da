"""Producer failover: two nameservers, two brokers, one of them stopped mid-stream.

broker-a and broker-b (one cluster) each register with both nameservers and hold the
topic with 4 queues.  A producer thread sends a paced stream; midway broker-a is closed.
The producer must keep succeeding through broker-b within seconds (a failed attempt is
retried on the other broker; the route refresh then drops broker-a), and every message
it acknowledged must be in the store of the broker its SendResult names.  broker-a is
then started again on the same store (a new port; it re-registers) and, after the
producer's next route refresh, receives traffic again.

broker-a stops either cleanly (it unregisters from the nameservers, so the next route
refresh drops it) or as in a crash (the nameservers keep routing to its dead address:
every attempt there fails to connect and is retried on broker-b).  With
``send_latency_fault_enable`` the failed broker is also isolated by the latency
fault tolerance.  RocketMQ isolates a failed broker for 10 minutes; the test shortens the
``notAvailableDuration`` table (RocketMQ's ``setNotAvailableDuration``) so that the return
of traffic fits in the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.message import Message, SendResult
from broker_core.client.producer.faulttolerance import FaultStrategy
from broker_core.client.producer.producer import Producer
from broker_core.model.message import decode_record
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.testing import run_broker, run_namesrv

from .test_producer import started

TOPIC = "FailoverTopic"
TOTAL = 400
PACE_S = 0.01
STOP_AT = 60  # results seen before broker-a is closed
DOWN_S = 1.5  # how long broker-a stays down
SETTLE_S = 0.75  # from this long after the stop, every send must go through broker-b
MAX_FAILED = 5  # sends allowed to fail outright during the switch


@dataclass
class Stream:
    """What the producer thread saw, in send order (appended by that thread only)."""

    results: list[tuple[float, SendResult]] = field(default_factory=list)
    failures: list[tuple[float, BaseException]] = field(default_factory=list)
    a_isolated: bool = False  # the fault tolerance was seen avoiding broker-a
    done: threading.Event = field(default_factory=threading.Event)

    @property
    def seen(self) -> int:
        return len(self.results) + len(self.failures)


def send_stream(producer: Producer, stream: Stream) -> None:
    """The application thread: TOTAL paced sync sends, each outcome recorded."""
    try:
        for i in range(TOTAL):
            try:
                result = producer.send(Message(TOPIC, b"m%d" % i, keys=f"k{i}"))
                stream.results.append((time.monotonic(), result))
            except Exception as exc:  # noqa: BLE001 - counted and asserted on
                stream.failures.append((time.monotonic(), exc))
            if not producer.fault_strategy.tolerance.is_available("broker-a"):
                stream.a_isolated = True
            time.sleep(PACE_S)
    finally:
        stream.done.set()


async def add_topic(broker: BrokerController) -> None:
    broker.topics.update(TopicConfig(TOPIC, 4, 4, 6))
    broker.topics_changed()


async def wait_brokers_routed(servers: list[NamesrvServer], names: set[str]) -> None:
    """Wait until every nameserver routes TOPIC to exactly ``names``."""
    async with asyncio.timeout(5):
        while True:
            routes = [ns.routes.pickup_topic_route(TOPIC) for ns in servers]
            if all(r is not None and {b["brokerName"] for b in r["brokerDatas"]} == names for r in routes):
                return
            await asyncio.sleep(0.02)


async def wait_seen(stream: Stream, count: int) -> None:
    async with asyncio.timeout(10):
        while stream.seen < count and not stream.done.is_set():
            await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def broker_a_at(store: Path, namesrv: str) -> AsyncIterator[BrokerController]:
    async with run_broker(store, namesrv, broker_name="broker-a") as broker:
        await add_topic(broker)
        yield broker


def assert_stored(broker: BrokerController, result: SendResult) -> None:
    """The acknowledged message is at the queue and offset its result names."""
    assert broker.store is not None
    found = broker.store.get_message(TOPIC, result.queue.queue_id, result.queue_offset, 1).messages
    assert found, f"acknowledged {result.msg_id} missing at {result.queue}@{result.queue_offset}"
    assert decode_record(found[0]).uniq_key == result.msg_id


async def _no_unregister(addr: str, header: dict[str, str]) -> None:
    """A crashed broker says goodbye to no nameserver."""


@pytest.mark.parametrize(
    ("fault_enable", "crash"),
    [(False, False), (False, True), (True, True)],
    ids=["plain-close", "plain-crash", "latency-fault-crash"],
)
async def test_stop_one_broker_mid_stream(tmp_path: Path, fault_enable: bool, crash: bool) -> None:
    """``crash``: broker-a stops without unregistering, so the nameservers keep routing to
    its dead address until it comes back; otherwise it unregisters as it closes."""
    async with contextlib.AsyncExitStack() as stack:
        ns1 = await stack.enter_async_context(run_namesrv())
        ns2 = await stack.enter_async_context(run_namesrv())
        namesrv = f"{ns1.address};{ns2.address}"
        broker_b = await stack.enter_async_context(
            run_broker(tmp_path / "b", namesrv, broker_name="broker-b")
        )
        await add_topic(broker_b)
        a_context = broker_a_at(tmp_path / "a", namesrv)
        broker_a = await a_context.__aenter__()
        a_open = True
        try:
            await wait_brokers_routed([ns1, ns2], {"broker-a", "broker-b"})
            config = ClientConfig(
                namesrv_addr=namesrv, instance_name=f"failover-{fault_enable}", poll_name_server_interval=200
            )
            producer = Producer("failover-producers", config=config, send_msg_timeout_ms=2_000)
            # RocketMQ's setNotAvailableDuration: a failed broker is avoided for 1 s, not 10 min.
            producer.fault_strategy = FaultStrategy(
                send_latency_fault_enable=fault_enable,
                not_available_duration_ms=(0, 0, 500, 1000, 1000, 1000, 1000),
            )
            stream = Stream()
            async with started(producer):
                sender = asyncio.create_task(asyncio.to_thread(send_stream, producer, stream))
                await wait_seen(stream, STOP_AT)
                stopped_at = time.monotonic()
                a_open = False
                if crash:
                    assert broker_a.registration is not None
                    broker_a.registration._unregister = _no_unregister  # type: ignore[method-assign]
                await a_context.__aexit__(None, None, None)
                await asyncio.sleep(DOWN_S)
                a_context = broker_a_at(tmp_path / "a", namesrv)
                broker_a = await a_context.__aenter__()
                a_open = True
                restarted_at = time.monotonic()
                async with asyncio.timeout(20):
                    await sender
            # Nothing acknowledged is lost: each result's broker holds the message there
            # (broker-a's acknowledged messages from before the stop in its reopened store).
            for broker in (broker_a, broker_b):
                assert broker.store is not None and broker.store.wait_dispatched()
            for _, result in stream.results:
                assert_stored(broker_a if result.queue.broker_name == "broker-a" else broker_b, result)
        finally:
            if a_open:
                await a_context.__aexit__(None, None, None)

    assert stream.seen == TOTAL
    assert len(stream.failures) <= MAX_FAILED, stream.failures
    before = [r for t, r in stream.results if t < stopped_at]
    down = [(t, r) for t, r in stream.results if stopped_at <= t < restarted_at]
    after = [r for t, r in stream.results if t >= restarted_at]
    assert {r.queue.broker_name for r in before} == {"broker-a", "broker-b"}
    # Soon after the stop every send succeeds through broker-b.
    settled = [r for t, r in down if t >= stopped_at + SETTLE_S]
    assert len(settled) > 20 and {r.queue.broker_name for r in settled} == {"broker-b"}
    # After the restart and a route refresh, broker-a takes traffic again.
    assert sum(r.queue.broker_name == "broker-a" for r in after) >= 10
    if fault_enable:
        assert stream.a_isolated
