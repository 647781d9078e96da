"""Interop: messages from our producer reach the official C++ push consumer intact."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "FromQuiverProducer"
GROUP = "OfficialConsumerOfQuiver"


async def test_the_official_consumer_receives_what_our_producer_sent(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()

        def produce() -> list[str]:
            ids = []
            with Producer("QuiverProducers", ns.address) as producer:
                for i in range(12):
                    body = (b"big-%d " % i) * 1000 if i % 4 == 0 else b"m-%d" % i  # some compressed
                    msg = Message(TOPIC, body, tags="TagA", keys=f"key-{i}", properties={"kind": f"k{i}"})
                    ids.append(producer.send(msg).msg_id)
            return ids

        ids = await asyncio.to_thread(produce)
        received = await run_official_client(
            "consumer_child.py", ns.address, TOPIC, GROUP, "12", "*", home=tmp_path / "c"
        )
    by_key = {m["keys"]: m for m in received}
    assert sorted(by_key) == sorted(f"key-{i}" for i in range(12))
    for i in range(12):
        got = by_key[f"key-{i}"]
        expected = ((f"big-{i} ") * 1000) if i % 4 == 0 else f"m-{i}"
        assert got["body"] == expected and got["tags"] == "TagA" and got["kind"] == f"k{i}"
    assert sorted(m["id"] for m in received) == sorted(ids)  # the client id is the official msg id
