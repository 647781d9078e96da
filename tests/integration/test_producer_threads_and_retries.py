"""Regression tests for the producer review (issue 4): each pins one RocketMQ behaviour
that the first producer missed.

- a callback runs off the client's event loop, so it may send synchronously;
- a blocking call made on that loop is refused instead of deadlocking the instance;
- ``send_async`` retries ``retry_times_when_send_async_failed`` times, callback or not;
- a broker gone from the refreshed route is retried on another broker (Java's
  MQClientException path), for single sends and for batches;
- shutting the instance down fails what is still running, never leaves a caller waiting.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.instance import ClientInstance
from broker_core.client.message import Message, SendResult
from broker_core.client.producer.producer import BLOCKING_SENDERS_MAX, Producer
from broker_core.client.producer.queues import RoundRobinIndex, TopicPublishInfo
from broker_core.errors import ClientError
from broker_core.messagequeue import MessageQueue
from broker_core.namesrv.server import NamesrvServer

from .test_producer import TOPIC, cluster, started  # noqa: F401  (the fixture)


async def test_callback_may_send_synchronously(cluster: tuple[NamesrvServer, BrokerController]) -> None:  # noqa: F811
    ns, _ = cluster
    outcome: list[Any] = []
    done = threading.Event()
    async with started(Producer("review-producers", ns.address)) as producer:

        def callback(result: SendResult | None, error: BaseException | None) -> None:
            try:  # on the client's loop thread this send would deadlock the whole instance
                outcome.append(producer.send(Message(TOPIC, b"from the callback")))
            except BaseException as exc:  # noqa: BLE001
                outcome.append(exc)
            done.set()

        producer.send_async(Message(TOPIC, b"first"), callback)
        assert await asyncio.to_thread(done.wait, 10)
    assert isinstance(outcome[0], SendResult), outcome


async def test_blocking_call_on_the_loop_thread_is_refused(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
) -> None:
    ns, _ = cluster
    async with started(Producer("review-producers", ns.address)) as producer:

        async def on_the_loop() -> None:
            producer.send(Message(TOPIC, b"x"))

        future = producer.instance.submit(on_the_loop())
        with pytest.raises(ClientError, match="deadlock"):
            await asyncio.to_thread(future.result, 5)


async def test_send_async_uses_the_async_retry_count(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns, _ = cluster
    producer = Producer("review-producers", ns.address, retry_times_when_send_failed=5)
    producer.retry_times_when_send_async_failed = 1
    seen: list[int] = []
    real, real_blocking = producer._send, producer._send_blocking

    async def spy(*args: Any, **kwargs: Any) -> SendResult:
        seen.append(args[5])
        return await real(*args, **kwargs)

    def blocking_spy(*args: Any, **kwargs: Any) -> SendResult:
        seen.append(args[5])
        return real_blocking(*args, **kwargs)

    async with started(producer):
        monkeypatch.setattr(producer, "_send", spy)
        monkeypatch.setattr(producer, "_send_blocking", blocking_spy)
        await asyncio.to_thread(producer.send_async(Message(TOPIC, b"a")).result, 5)
        await asyncio.to_thread(producer.send, Message(TOPIC, b"s"))
    assert seen == [1, 5]


def _with_ghost_first(producer: Producer) -> None:
    """Make the next pick a queue of a broker no nameserver knows, then broker-a's."""
    route = producer.instance.routes[TOPIC]
    queues = (MessageQueue(TOPIC, "broker-ghost", 0), MessageQueue(TOPIC, "broker-a", 1))
    producer._publish[TOPIC] = TopicPublishInfo(TOPIC, route, queues, False, RoundRobinIndex(1))


async def test_a_broker_gone_from_the_route_is_retried_elsewhere(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
) -> None:
    ns, _ = cluster
    async with started(Producer("review-producers", ns.address)) as producer:
        await asyncio.to_thread(producer.queues_of, TOPIC)  # the route is cached
        _with_ghost_first(producer)
        result = await asyncio.to_thread(producer.send, Message(TOPIC, b"single"))
        assert result.queue == MessageQueue(TOPIC, "broker-a", 1)
        _with_ghost_first(producer)
        batch = [Message(TOPIC, b"b%d" % i) for i in range(3)]
        result = await asyncio.to_thread(producer.send_batch, batch)
        assert result.queue == MessageQueue(TOPIC, "broker-a", 1)
        assert result.msg_id.split(",") == [m.unique_id for m in batch]


@contextlib.asynccontextmanager
async def _instance(ns: NamesrvServer) -> AsyncIterator[ClientInstance]:
    config = ClientConfig(namesrv_addr=ns.address, instance_name="review-shutdown")
    instance = await asyncio.to_thread(ClientInstance.acquire, config)
    try:
        yield instance
    finally:
        await asyncio.to_thread(instance.release)


async def test_shutdown_fails_requests_still_running(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
) -> None:
    ns, _ = cluster
    async with _instance(ns) as instance:
        stuck = instance.submit(asyncio.sleep(60))
    # Before the fix the loop stopped under it and this future never completed.
    with pytest.raises(ClientError, match="shut down"):
        await asyncio.to_thread(stuck.result, 5)
    with pytest.raises(ClientError):
        instance.submit(asyncio.sleep(0))


async def test_many_threads_share_one_producer(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
) -> None:
    ns, _ = cluster
    async with started(Producer("review-producers", ns.address)) as producer:

        def worker(n: int) -> list[str]:
            return [producer.send(Message(TOPIC, b"%d-%d" % (n, i))).msg_id for i in range(20)]

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ids = await asyncio.to_thread(lambda: [i for ids in pool.map(worker, range(8)) for i in ids])
    assert len(ids) == len(set(ids)) == 160


async def test_a_broker_hears_of_the_producer_at_its_first_send(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
) -> None:
    ns, broker = cluster
    async with started(Producer("review-heartbeat", ns.address)) as producer:
        assert "review-heartbeat" not in broker.clients.producers  # no route known at start
        await asyncio.to_thread(producer.send, Message(TOPIC, b"hello"))
        # Not 30 s later at the timer's round: the route lookup greets the new broker.
        async with asyncio.timeout(2):
            while not broker.clients.producers.get("review-heartbeat"):
                await asyncio.sleep(0.02)


async def test_a_few_threads_send_on_their_own_sockets_and_more_share_the_loop(
    cluster: tuple[NamesrvServer, BrokerController],  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ns, broker = cluster
    producer = Producer("review-producers", ns.address)
    paths: list[str] = []
    real, real_blocking = producer._send, producer._send_blocking

    async def via_loop(*args: Any, **kwargs: Any) -> SendResult:
        paths.append("loop")
        return await real(*args, **kwargs)

    def by_caller(*args: Any, **kwargs: Any) -> SendResult:
        paths.append("caller")
        return real_blocking(*args, **kwargs)

    async with started(producer):
        monkeypatch.setattr(producer, "_send", via_loop)
        monkeypatch.setattr(producer, "_send_blocking", by_caller)
        alone = await asyncio.to_thread(producer.send, Message(TOPIC, b"alone"))
        assert paths == ["caller"]
        threads = BLOCKING_SENDERS_MAX + 4
        go = threading.Barrier(threads, timeout=5)

        def sender(n: int) -> list[SendResult]:
            go.wait()
            return [producer.send(Message(TOPIC, b"t%d-%d" % (n, i))) for i in range(40)]

        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            results = await asyncio.to_thread(
                lambda: [r for f in [pool.submit(sender, n) for n in range(threads)] for r in f.result()]
            )
    assert alone.status.name == "SEND_OK"
    total = 40 * threads
    assert len(results) == total and {r.status.name for r in results} == {"SEND_OK"}
    assert len({(r.queue, r.queue_offset) for r in results}) == total  # each stored once, apart
    # Up to BLOCKING_SENDERS_MAX at once used their own sockets; those beyond went through
    # the loop, pipelined there.
    assert paths.count("caller") > 1 and "loop" in paths
    assert broker.store is not None and broker.store.wait_dispatched()
