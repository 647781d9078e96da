"""The official orderly consumer (LOCK_BATCH_MQ before pulling) receives each queue's
messages in order."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from broker_core.model.message import MessageInner
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "OrderlyTopic"
COUNT = 40


async def test_it_locks_queues_and_delivers_each_queue_in_order(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        for i in range(COUNT):
            assert broker.store.put_message(MessageInner(TOPIC, i % 4, f"m-{i}".encode(), {"TAGS": "T"})).ok
        received = await run_official_client(
            "consumer_child.py",
            ns.address,
            TOPIC,
            "OrderlyGroup",
            str(COUNT),
            "*",
            "orderly",
            home=tmp_path / "c",
        )
        assert sorted(m["body"] for m in received) == sorted(f"m-{i}" for i in range(COUNT))
        per_queue: dict[int, list[int]] = defaultdict(list)
        for m in received:
            per_queue[m["queue_id"]].append(m["queue_offset"])
        assert all(offsets == sorted(offsets) for offsets in per_queue.values()), per_queue
        # The consumer held every queue's lock while it consumed.
        holders = {broker.locks.holder("OrderlyGroup", (TOPIC, "broker-a", q)) for q in range(4)}
        assert len(holders) == 1 and None not in holders
