"""Interop: what the official C++ producer sends, our push consumer receives intact."""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from pathlib import Path

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.model.message import MessageExt
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "FromOfficialProducer"
COUNT = 6  # per kind: sync, async, oneway, orderly, batch
KINDS = ("sync", "async", "oneway", "orderly", "batch")


async def test_our_push_consumer_receives_what_the_official_producer_sent(tmp_path: Path) -> None:
    got: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        with lock:
            got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        await run_official_client("producer_child.py", ns.address, TOPIC, str(COUNT), home=tmp_path / "home")
        config = ClientConfig(namesrv_addr=ns.address, instance_name="interop")
        push = PushConsumer(
            "OurConsumerOfOfficial", config=config, consume_from_where="CONSUME_FROM_FIRST_OFFSET"
        )
        push.subscribe(TOPIC, "TagA || TagB").register_listener(listener)
        await asyncio.to_thread(push.start)
        try:
            async with asyncio.timeout(20):
                while len(got) < COUNT * len(KINDS):
                    await asyncio.sleep(0.05)
        finally:
            await asyncio.to_thread(push.shutdown)
    assert Counter(m.properties["kind"] for m in got) == {kind: COUNT for kind in KINDS}
    for msg in got:
        i, kind = int(msg.properties["index"]), msg.properties["kind"]
        assert msg.body == f"{kind}-{i}-é".encode()
        assert msg.tags == ("TagA" if i % 2 == 0 else "TagB")
        assert msg.keys == f"key-{kind}-{i} order-{i}"
        assert msg.uniq_key and msg.born_timestamp > 0
