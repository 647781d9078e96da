"""The official C++ push consumer receives from Quiver exactly what the official producer sent."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "ConsumeTopic"
COUNT = 6


async def test_it_delivers_every_message_to_a_push_consumer_exactly_as_sent(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        sent = await run_official_client(
            "producer_child.py", ns.address, TOPIC, str(COUNT), home=tmp_path / "p"
        )
        assert all(r.get("status") == 0 for r in sent), sent
        total = 5 * COUNT  # sync, async, oneway, orderly and batch
        received = await run_official_client(
            "consumer_child.py",
            ns.address,
            TOPIC,
            "ConformanceConsumer",
            str(total),
            "*",
            home=tmp_path / "c",
        )
        assert len(received) == total, received
        assert Counter(m["kind"] for m in received) == {
            k: COUNT for k in ("sync", "async", "oneway", "orderly", "batch")
        }
        for m in received:
            i = int(m["body"].split("-")[1])
            assert m["topic"] == TOPIC
            assert m["body"] == f"{m['kind']}-{i}-é"
            assert m["tags"] == ("TagA" if i % 2 == 0 else "TagB")
            assert m["keys"] == f"key-{m['kind']}-{i} order-{i}"
            assert m["born_timestamp"] > 0 and m["reconsume_times"] == 0
        # Each message once: no duplicates by (queue, offset).
        assert len({(m["queue_id"], m["queue_offset"]) for m in received}) == total
        # It left: once the broker sees its connection close, the group is empty again.
        for _ in range(100):
            if not broker.clients.consumer_ids("ConformanceConsumer"):
                break
            await asyncio.sleep(0.02)
        assert broker.clients.consumer_ids("ConformanceConsumer") == []


async def test_it_filters_by_tag_on_the_broker(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 2)
        await broker.registration.register_all()
        await run_official_client("producer_child.py", ns.address, TOPIC, str(COUNT), home=tmp_path / "p")
        tagged = (5 * COUNT) // 2  # even indexes carry TagA
        received = await run_official_client(
            "consumer_child.py", ns.address, TOPIC, "TagConsumer", str(tagged), "TagA", home=tmp_path / "c"
        )
        assert len(received) == tagged
        assert {m["tags"] for m in received} == {"TagA"}
