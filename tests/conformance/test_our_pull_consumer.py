"""Interop: what the official C++ producer sends, our pull consumer reads intact.

The official client (PyPI rocketmq 0.4.4) sends sync, async, oneway, orderly and batch
messages in a child process (``producer_child.py``); our ``PullConsumer`` then pulls every
queue from offset 0, with and without a tag expression.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.model.message import MessageExt
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "PullInteropTopic"
QUEUES = 4
COUNT = 6


def pull_all(consumer: PullConsumer, expression: str) -> list[MessageExt]:
    """Every message of the topic matching ``expression``, queue by queue from offset 0."""
    found: list[MessageExt] = []
    for mq in consumer.fetch_queues(TOPIC):
        offset = 0
        while True:
            result = consumer.pull(mq, expression, offset, 4)
            found.extend(result.messages)
            if result.status is PullStatus.NO_NEW_MSG:
                break
            offset = result.next_begin_offset
    return found


async def test_our_pull_consumer_reads_what_the_official_producer_sent(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, QUEUES)
        await broker.registration.register_all()
        await run_official_client("producer_child.py", ns.address, TOPIC, str(COUNT), home=tmp_path / "home")
        assert broker.store is not None and broker.store.wait_dispatched(10)

        consumer = PullConsumer(
            "InteropPullGroup", config=ClientConfig(namesrv_addr=ns.address, client_ip="127.0.0.1")
        )
        await asyncio.to_thread(consumer.start)
        try:
            everything = await asyncio.to_thread(pull_all, consumer, "*")
            only_a = await asyncio.to_thread(pull_all, consumer, "TagA")
        finally:
            await asyncio.to_thread(consumer.shutdown)

    kinds = Counter(m.properties.get("kind") for m in everything)
    assert kinds == {"sync": COUNT, "async": COUNT, "oneway": COUNT, "orderly": COUNT, "batch": COUNT}
    for msg in everything:
        i, kind = int(msg.properties["index"]), msg.properties["kind"]
        assert msg.topic == TOPIC
        assert msg.body == f"{kind}-{i}-é".encode()
        assert msg.tags == ("TagA" if i % 2 == 0 else "TagB")
        assert msg.keys == f"key-{kind}-{i} order-{i}"
        assert msg.uniq_key and len(msg.msg_id) == 32
    assert len({m.uniq_key for m in everything}) == len(everything)
    assert only_a and all(m.tags == "TagA" for m in only_a)
    assert sorted(m.uniq_key or "" for m in only_a) == sorted(
        m.uniq_key or "" for m in everything if m.tags == "TagA"
    )
