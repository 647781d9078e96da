"""Our pull consumers against a real nameserver and broker: pulls by queue and offset
(``broker_core.client.consumer.pull``), subscribe and poll (``...consumer.litepull``).

The consumer runs its client instance on its own thread; the servers run on the test's
loop, so every blocking call (start and shutdown too) goes through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import time
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.common import MessageModel
from broker_core.client.consumer.litepull import LitePullConsumer
from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.errors import ClientError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import COMPRESSED_FLAG, MessageExt, MessageInner
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import put, started, wait_until_routed
from .test_push_consumer import RefusingStrategy

TOPIC = "PullTopic"
GROUP = "pull-group"
QUEUES = 4


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        broker.topics.update(TopicConfig(TOPIC, QUEUES, QUEUES, 6))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield ns, broker


def consumer(ns: NamesrvServer, instance: str = "one", **kwargs: object) -> PullConsumer:
    config = ClientConfig(namesrv_addr=ns.address, instance_name=instance, client_ip="127.0.0.1")
    return PullConsumer(kwargs.pop("group", GROUP), config=config, **kwargs)  # type: ignore[arg-type]


def lite_consumer(ns: NamesrvServer, instance: str = "one", **kwargs: object) -> LitePullConsumer:
    config = ClientConfig(namesrv_addr=ns.address, instance_name=instance, client_ip="127.0.0.1")
    return LitePullConsumer(kwargs.pop("group", GROUP), config=config, **kwargs)  # type: ignore[arg-type]


def fill(broker: BrokerController, per_queue: int = 3) -> None:
    """``per_queue`` messages in every queue, tags alternating TagA / TagB."""
    for queue_id in range(QUEUES):
        for i in range(per_queue):
            tag = "TagA" if i % 2 == 0 else "TagB"
            put(broker, TOPIC, queue_id, f"q{queue_id}-m{i}".encode(), TAGS=tag, KEYS=f"k{queue_id}-{i}")
    assert broker.store is not None and broker.store.wait_dispatched()


async def test_pull_every_queue_from_zero_with_and_without_tags(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    fill(broker)
    async with started(consumer(ns)) as c:
        queues = await asyncio.to_thread(c.fetch_queues, TOPIC)
        assert queues == [MessageQueue(TOPIC, "broker-a", i) for i in range(QUEUES)]
        for mq in queues:
            everything = await asyncio.to_thread(c.pull, mq, "*", 0)
            assert everything.status is PullStatus.FOUND
            assert [m.body for m in everything.messages] == [
                f"q{mq.queue_id}-m{i}".encode() for i in range(3)
            ]
            assert (
                everything.next_begin_offset == 3
                and everything.min_offset == 0
                and everything.max_offset == 3
            )
            assert [m.queue_offset for m in everything.messages] == [0, 1, 2]
            assert everything.messages[1].keys == f"k{mq.queue_id}-1"
            assert everything.messages[0].properties["MAX_OFFSET"] == "3"
            only_a = await asyncio.to_thread(c.pull, mq, "TagA", 0)
            assert [m.tags for m in only_a.messages] == ["TagA", "TagA"]
            assert only_a.next_begin_offset == 3
            both = await asyncio.to_thread(c.pull, mq, "TagA || TagB", 1, 1)
            assert [m.body for m in both.messages] == [f"q{mq.queue_id}-m1".encode()]
            assert both.next_begin_offset == 2
            none = await asyncio.to_thread(c.pull, mq, "TagC", 0)
            assert none.status is PullStatus.NO_MATCHED_MSG and not none.messages
            at_end = await asyncio.to_thread(c.pull, mq, "*", 3)
            assert at_end.status is PullStatus.NO_NEW_MSG and at_end.next_begin_offset == 3
        assert await asyncio.to_thread(c.min_offset, queues[0]) == 0
        assert await asyncio.to_thread(c.max_offset, queues[0]) == 3
        assert await asyncio.to_thread(c.search_offset, queues[0], 0) == 0


async def test_compressed_bodies_come_back_as_sent(cluster: tuple[NamesrvServer, BrokerController]) -> None:
    ns, broker = cluster
    body = b"compress me " * 1000
    assert broker.store is not None
    inner = MessageInner(TOPIC, 0, zlib.compress(body), {"TAGS": "Z"})
    inner.sys_flag |= COMPRESSED_FLAG
    assert broker.store.put_message(inner).ok and broker.store.wait_dispatched()
    async with started(consumer(ns)) as c:
        result = await asyncio.to_thread(c.pull, MessageQueue(TOPIC, "broker-a", 0), "*", 0)
    (msg,) = result.messages
    assert msg.body == body and not msg.sys_flag & COMPRESSED_FLAG


async def test_offset_past_the_end_is_illegal(cluster: tuple[NamesrvServer, BrokerController]) -> None:
    ns, broker = cluster
    fill(broker)
    async with started(consumer(ns)) as c:
        result = await asyncio.to_thread(c.pull, MessageQueue(TOPIC, "broker-a", 0), "*", 50)
    # The broker corrects the offset as Java's does (to the min while it is still 0).
    assert result.status is PullStatus.OFFSET_ILLEGAL and not result.messages
    assert result.max_offset == 3 and result.next_begin_offset in (0, 3)


async def test_long_poll_returns_when_a_message_arrives(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    mq = MessageQueue(TOPIC, "broker-a", 2)
    async with started(consumer(ns)) as c:
        began = time.monotonic()
        waiting = asyncio.create_task(asyncio.to_thread(c.pull_blocking, mq, "*", 0, 32, 10_000))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        put(broker, TOPIC, 2, b"late arrival", TAGS="TagA")
        result = await asyncio.wait_for(waiting, 5)
        assert time.monotonic() - began < 5
        assert result.status is PullStatus.FOUND and [m.body for m in result.messages] == [b"late arrival"]
        # Nothing arrives: the suspension ends with NO_NEW_MSG.
        quiet = await asyncio.to_thread(c.pull_blocking, mq, "*", 1, 32, 300)
        assert quiet.status is PullStatus.NO_NEW_MSG and quiet.next_begin_offset == 1


async def test_offsets_are_committed_to_the_broker_and_read_back(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    fill(broker)
    mq0, mq1 = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)
    assert broker.store is not None
    async with started(consumer(ns)) as c:
        assert await asyncio.to_thread(c.fetch_offset, mq0) == 0  # a young queue: the broker says 0
        await asyncio.to_thread(c.update_offset, mq0, 2)
        await asyncio.to_thread(c.update_offset, mq1, 3)
        await asyncio.to_thread(c.persist, mq0)
        assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 2
        assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 1) == -1
        await asyncio.to_thread(c.persist)
        assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 1) == 3
        await asyncio.to_thread(c.update_offset, mq1, 1)
    # Shutdown committed the last change.
    assert broker.store.consumer_offsets.query_offsets(GROUP, TOPIC) == {0: 2, 1: 1}
    async with started(consumer(ns, "two")) as again:
        assert await asyncio.to_thread(again.fetch_offset, mq0) == 2
        assert await asyncio.to_thread(again.fetch_offset, mq1, False) == 1


async def test_broadcasting_offsets_survive_a_restart(
    cluster: tuple[NamesrvServer, BrokerController], tmp_path: Path
) -> None:
    ns, broker = cluster
    fill(broker)
    offsets_dir = tmp_path / "offsets"

    def make() -> PullConsumer:
        return consumer(ns, message_model=MessageModel.BROADCASTING, offset_store_dir=offsets_dir)

    mq = MessageQueue(TOPIC, "broker-a", 3)
    async with started(make()) as c:
        await asyncio.to_thread(c.update_offset, mq, 2)
    assert broker.store is not None
    assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 3) == -1  # never on the broker
    (path,) = offsets_dir.glob(f"*/{GROUP}/offsets.json")
    assert path.parent.parent.name == "127.0.0.1@one"
    async with started(make()) as again:
        assert await asyncio.to_thread(again.fetch_offset, mq, False) == 2
        result = await asyncio.to_thread(again.pull, mq, "*", 2)
        assert [m.body for m in result.messages] == [b"q3-m2"]


async def test_lite_poll_splits_the_queues_of_a_group(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    first = lite_consumer(ns, "one")
    second = lite_consumer(ns, "two")
    for c in (first, second):  # no rebalance timer in the test's time: the broker's notice does it
        c.subscribe(TOPIC, "*")
    async with started(first), started(second):
        async with asyncio.timeout(10):
            while True:
                a, b = await asyncio.gather(
                    asyncio.to_thread(first.assignment), asyncio.to_thread(second.assignment)
                )
                if len(a) == 2 and len(b) == 2:
                    break
                await asyncio.sleep(0.1)
        assert sorted(a + b) == [MessageQueue(TOPIC, "broker-a", i) for i in range(QUEUES)]
        assert [mq.queue_id for mq in a] == [0, 1]  # "127.0.0.1@one" sorts first: AVG blocks
        fill(broker, per_queue=25)
        got: dict[str, list[bytes]] = {"one": [], "two": []}
        async with asyncio.timeout(15):
            while len(got["one"]) + len(got["two"]) < QUEUES * 25:
                polled = await asyncio.gather(
                    asyncio.to_thread(first.poll, 200), asyncio.to_thread(second.poll, 200)
                )
                got["one"] += [m.body for m in polled[0]]
                got["two"] += [m.body for m in polled[1]]
        extra = await asyncio.to_thread(first.poll, 300) + await asyncio.to_thread(second.poll, 300)
        assert not extra
    everything = got["one"] + got["two"]
    assert len(everything) == len(set(everything)) == QUEUES * 25
    assert {b.split(b"-")[0] for b in got["one"]} == {b"q0", b"q1"}
    # Shutdown committed what was polled.
    assert broker.store is not None
    assert broker.store.consumer_offsets.query_offsets(GROUP, TOPIC) == {i: 25 for i in range(QUEUES)}


async def test_lite_poll_starts_where_the_group_stopped(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    fill(broker, per_queue=2)
    c = lite_consumer(ns, poll_batch_size=100)
    c.subscribe(TOPIC, "TagA")
    async with started(c):
        got = await poll_until(c, QUEUES)
    assert sorted(m.body for m in got) == [f"q{i}-m0".encode() for i in range(QUEUES)]
    fill(broker, per_queue=1)
    again = lite_consumer(ns, "two", poll_batch_size=100)
    again.subscribe(TOPIC, "*")
    async with started(again):
        later = await poll_until(again, QUEUES)
    assert sorted(m.queue_offset for m in later) == [2] * QUEUES


async def poll_until(c: LitePullConsumer, count: int) -> list[MessageExt]:
    """Poll until ``count`` messages came, then once more to see that nothing else does."""
    got: list[MessageExt] = []
    async with asyncio.timeout(10):
        while len(got) < count:
            got += await asyncio.to_thread(c.poll, 500)
    got += await asyncio.to_thread(c.poll, 300)
    return got


async def test_lite_assign_seek_pause_and_resume(cluster: tuple[NamesrvServer, BrokerController]) -> None:
    ns, broker = cluster
    fill(broker, per_queue=6)
    q0, q1 = MessageQueue(TOPIC, "broker-a", 0), MessageQueue(TOPIC, "broker-a", 1)
    c = lite_consumer(ns, poll_batch_size=100, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    c.assign([q0, q1])
    with pytest.raises(ClientError, match="exclusive"):
        c.subscribe(TOPIC, "*")
    async with started(c):
        assert await asyncio.to_thread(c.assignment) == [q0, q1]
        got = await poll_until(c, 12)
        assert sorted((m.queue_id, m.queue_offset) for m in got) == [(q, o) for q in (0, 1) for o in range(6)]

        # Seek q0 back: its messages from offset 2 come again, q1's do not.
        await asyncio.to_thread(c.seek, q0, 2)
        again = await poll_until(c, 4)
        assert sorted((m.queue_id, m.queue_offset) for m in again) == [(0, o) for o in range(2, 6)]
        with pytest.raises(ClientError, match="outside its stored range"):
            await asyncio.to_thread(c.seek, q0, 99)
        with pytest.raises(ClientError, match="not assigned"):
            await asyncio.to_thread(c.seek, MessageQueue(TOPIC, "broker-a", 3), 0)

        # Paused: q1's new messages wait; q0's flow.  Resumed: q1's come.
        await asyncio.to_thread(c.pause, [q1])
        fill(broker, per_queue=1)  # one more message in every queue (offset 6)
        paused = await poll_until(c, 1)
        assert [(m.queue_id, m.queue_offset) for m in paused] == [(0, 6)]
        await asyncio.to_thread(c.resume, [q1])
        resumed = await poll_until(c, 1)
        assert [(m.queue_id, m.queue_offset) for m in resumed] == [(1, 6)]

        await asyncio.to_thread(c.seek_to_begin, q1)
        assert {m.queue_offset for m in await poll_until(c, 7)} == set(range(7))
        await asyncio.to_thread(c.seek_to_end, q0)
        assert await asyncio.to_thread(c.poll, 300) == []
        await asyncio.to_thread(c.commit)
        assert await asyncio.to_thread(c.committed, q0) == 7
        assert await asyncio.to_thread(c.committed, q1) == 7
    # Queues never assigned were never pulled or committed.
    assert broker.store is not None
    assert broker.store.consumer_offsets.query_offsets(GROUP, TOPIC) == {0: 7, 1: 7}


async def test_lite_rebalance_keeps_its_queues_when_the_strategy_refuses(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    """The push consumer's rebalance (``assignment.Rebalance``): a topic the strategy cannot
    allocate keeps its queues, and they are still polled."""
    ns, broker = cluster
    strategy = RefusingStrategy()
    c = lite_consumer(ns, allocate_strategy=strategy, poll_batch_size=100)
    c.subscribe(TOPIC, "*")
    every_queue = [MessageQueue(TOPIC, "broker-a", i) for i in range(QUEUES)]
    async with started(c):
        assert await asyncio.to_thread(c.assignment) == every_queue
        strategy.refuse = True
        assert await asyncio.to_thread(c.rebalance) == every_queue
        fill(broker, per_queue=1)
        got = await poll_until(c, QUEUES)
    assert sorted(m.queue_id for m in got) == list(range(QUEUES))
