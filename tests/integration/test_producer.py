"""Our producer against a real nameserver and broker (``broker_core.client.producer``).

The producer runs its client instance on its own thread; the servers run on the test's
loop, so blocking calls go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import threading
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.message import Message, SendResult, SendStatus
from broker_core.client.msgid import client_ip_of
from broker_core.client.producer.producer import Producer, hash_selector
from broker_core.errors import BrokerRefusedError, ClientError, MessageTooLargeError, NoRouteError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import COMPRESSED_FLAG, MessageExt, decode_record
from broker_core.namesrv.server import NamesrvServer
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import started, wait_until_routed

TOPIC = "ProducerTopic"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        broker.topics.update(_topic(TOPIC, 4))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield ns, broker


def _topic(name: str, queues: int):  # type: ignore[no-untyped-def]
    from broker_core.model.topicconfig import TopicConfig

    return TopicConfig(name, queues, queues, 6)


def stored(broker: BrokerController, queue: MessageQueue) -> list[MessageExt]:
    assert broker.store is not None and broker.store.wait_dispatched()
    return [decode_record(r) for r in broker.store.get_message(queue.topic, queue.queue_id, 0, 64).messages]


async def test_sync_send_stores_the_message_as_sent(cluster: tuple[NamesrvServer, BrokerController]) -> None:
    ns, broker = cluster
    async with started(Producer("test-producers", ns.address)) as producer:
        msg = Message(
            TOPIC, b"hello", tags="TagA", keys=["order-1", "cust-9"], properties={"kind": "greeting"}
        )
        result = await asyncio.to_thread(producer.send, msg)
    assert result.status is SendStatus.SEND_OK and result.queue.broker_name == "broker-a"
    (record,) = stored(broker, result.queue)
    assert record.body == b"hello" and record.tags == "TagA" and record.keys == "order-1 cust-9"
    assert record.properties["kind"] == "greeting"
    assert record.uniq_key == result.msg_id == msg.unique_id and len(result.msg_id) == 32
    assert record.msg_id == result.offset_msg_id and record.queue_offset == result.queue_offset
    assert client_ip_of(result.msg_id) == producer.config.client_ip
    # The broker indexed the keys: the message is found by key.
    assert broker.store is not None and broker.store.query_message(TOPIC, "cust-9")


async def test_async_oneway_orderly_batch_and_compression(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    done = threading.Event()
    seen: list[SendResult | None] = []
    async with started(Producer("test-producers", ns.address)) as producer:

        def callback(result: SendResult | None, error: BaseException | None) -> None:
            seen.append(result)
            done.set()

        future = producer.send_async(Message(TOPIC, b"async"), callback)
        result = await asyncio.to_thread(future.result, 5)
        assert await asyncio.to_thread(done.wait, 5) and seen == [result]

        queue = MessageQueue(TOPIC, "broker-a", 3)
        await asyncio.to_thread(producer.send_oneway, Message(TOPIC, b"oneway"), queue=queue)

        ordered = [
            await asyncio.to_thread(producer.send_orderly, Message(TOPIC, b"o%d" % i), "order-42")
            for i in range(5)
        ]
        assert len({r.queue for r in ordered}) == 1  # one key, one queue
        queues = await asyncio.to_thread(producer.queues_of, TOPIC)
        assert ordered[0].queue == hash_selector(queues, Message(TOPIC, b"x"), "order-42")

        batch = [Message(TOPIC, b"b%d" % i, tags="B") for i in range(10)]
        batch_result = await asyncio.to_thread(
            producer.send_batch, batch, queue=MessageQueue(TOPIC, "broker-a", 2)
        )
        assert batch_result.msg_id.split(",") == [m.unique_id for m in batch]

        big = b"compressible " * 1000  # 13 KB, over the 4 KiB threshold
        big_result = await asyncio.to_thread(producer.send, Message(TOPIC, big), queue=queue)

    for _ in range(50):
        oneway = [m for m in stored(broker, queue) if m.body == b"oneway"]
        if oneway:
            break
        await asyncio.sleep(0.05)
    assert oneway
    assert [m.body for m in stored(broker, ordered[0].queue) if m.body.startswith(b"o")] == [
        b"o%d" % i for i in range(5)
    ]
    assert [m.body for m in stored(broker, batch_result.queue) if m.tags == "B"] == [
        b"b%d" % i for i in range(10)
    ]
    (compressed,) = [m for m in stored(broker, queue) if m.queue_offset == big_result.queue_offset]
    assert compressed.sys_flag & COMPRESSED_FLAG and compressed.uncompressed_body() == big
    assert zlib.decompress(compressed.body) == big


async def test_failures_are_typed(cluster: tuple[NamesrvServer, BrokerController], tmp_path: Path) -> None:
    ns, broker = cluster
    async with started(Producer("test-producers", ns.address, max_message_size=1024)) as producer:
        with pytest.raises(NoRouteError):
            await asyncio.to_thread(producer.send, Message("NoSuchTopic", b"x"))
        with pytest.raises(MessageTooLargeError):
            await asyncio.to_thread(producer.send, Message(TOPIC, b"x" * 1025))
        with pytest.raises(ClientError, match="empty"):
            await asyncio.to_thread(producer.send, Message(TOPIC, b""))
        # A read-only broker refuses: the broker's code and remark reach the caller.
        broker.config = broker.config.__class__(**{**broker.config.__dict__, "broker_permission": 4})
        with pytest.raises((BrokerRefusedError, ClientError)) as refused:
            await asyncio.to_thread(
                producer.send, Message(TOPIC, b"x"), queue=MessageQueue(TOPIC, "broker-a", 0)
            )
        assert "forbidden" in str(refused.value)
    with pytest.raises(ClientError):
        Producer("bad group name!", ns.address).start()


async def test_batches_sent_asynchronously_are_pipelined_and_all_stored(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    queue = MessageQueue(TOPIC, "broker-a", 1)
    called: list[SendResult | None] = []
    async with started(Producer("test-producers", ns.address)) as producer:
        batches = [[Message(TOPIC, b"a%d-%d" % (n, i), keys=f"k{n}") for i in range(8)] for n in range(20)]
        futures = [
            producer.send_batch_async(batch, lambda r, e: called.append(r), queue=queue) for batch in batches
        ]
        results = await asyncio.to_thread(lambda: [f.result(10) for f in futures])
        with pytest.raises(ClientError, match="one topic"):
            producer.send_batch_async([Message(TOPIC, b"x"), Message("OtherTopic", b"y")])
    for batch, result in zip(batches, results, strict=True):
        assert result.msg_id.split(",") == [m.unique_id for m in batch]
        assert result.queue == queue
    async with asyncio.timeout(5):
        while len(called) < 20:
            await asyncio.sleep(0.02)
    assert broker.store is not None and broker.store.wait_dispatched()
    bodies: list[bytes] = []
    while len(bodies) < 160:
        found = broker.store.get_message(TOPIC, queue.queue_id, len(bodies), 32).messages
        assert found, f"only {len(bodies)} stored"
        bodies += [decode_record(r).body for r in found]
    assert sorted(bodies) == sorted(m.body for batch in batches for m in batch)
    # Each batch landed whole and in order, whatever order the batches took.
    for batch in batches:
        at = bodies.index(batch[0].body)
        assert bodies[at : at + 8] == [m.body for m in batch]


async def test_a_topic_created_on_first_send_gets_only_the_queues_the_broker_makes(tmp_path: Path) -> None:
    # TBW102 has 8 queues; the producer asks for 4 (defaultTopicQueueNums): the broker
    # creates 4, so until the real route comes the producer must offer only queues 0-3
    # (a send to queue 4 would be refused once the topic exists).
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "store", ns.address, auto_create_topic_enable=True) as broker,
    ):
        await wait_until_routed(ns, "TBW102")
        async with started(Producer("auto-producers", ns.address, default_topic_queue_nums=4)) as producer:
            assert producer._instance is not None
            offered = await asyncio.to_thread(producer._instance.call, producer._publish_info("AutoCreated"))
            results = [
                await asyncio.to_thread(producer.send, Message("AutoCreated", f"m{i}".encode()))
                for i in range(12)
            ]
        config = broker.topics.get("AutoCreated")
    assert {q.queue_id for q in offered.message_queues} == {0, 1, 2, 3}
    assert config is not None and config.write_queue_nums == 4
    assert {r.queue.queue_id for r in results} == {0, 1, 2, 3}


async def test_a_retry_message_carries_its_counts_in_the_header_and_numbers_only(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    # A consumer's copy of a failed message: RECONSUME_TIME travels as the send header's
    # reconsumeTimes (SendMessageRequestHeader), so it must be a number.
    ns, broker = cluster
    retry = "%RETRY%retry-group"
    broker.topics.update(_topic(retry, 1))
    broker.topics_changed()
    await wait_until_routed(ns, retry)
    async with started(Producer("test-producers", ns.address)) as producer:
        sent = Message(retry, b"again", properties={"RECONSUME_TIME": "2", "MAX_RECONSUME_TIMES": "5"})
        result = await asyncio.to_thread(producer.send, sent)
        (record,) = stored(broker, result.queue)
        assert record.reconsume_times == 2 and "RECONSUME_TIME" not in record.properties
        bad = Message(retry, b"again", properties={"RECONSUME_TIME": "two"})
        with pytest.raises(ClientError, match="RECONSUME_TIME 'two'"):
            await asyncio.to_thread(producer.send, bad)
