"""The official pull consumer walks every queue and gets every message once, in queue order."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from broker_core.model.message import MessageInner
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "PullTopic"
COUNT = 50


async def test_it_walks_every_queue_with_the_official_pull_consumer(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        for i in range(COUNT):
            tags = "TagA" if i % 2 == 0 else "TagB"
            assert broker.store.put_message(MessageInner(TOPIC, i % 4, f"m-{i}".encode(), {"TAGS": tags})).ok
        assert broker.store.wait_dispatched()

        everything = await run_official_client(
            "pull_consumer_child.py", ns.address, TOPIC, "Puller", "*", home=tmp_path / "a"
        )
        assert sorted(m["body"] for m in everything) == sorted(f"m-{i}" for i in range(COUNT))
        by_queue: dict[int, list[int]] = defaultdict(list)
        for m in everything:
            by_queue[m["queue_id"]].append(m["queue_offset"])
        assert all(offsets == list(range(len(offsets))) for offsets in by_queue.values()), by_queue

        tagged = await run_official_client(
            "pull_consumer_child.py", ns.address, TOPIC, "Puller2", "TagA", home=tmp_path / "b"
        )
        assert sorted(m["body"] for m in tagged) == sorted(f"m-{i}" for i in range(0, COUNT, 2))
        assert {m["tags"] for m in tagged} == {"TagA"}
