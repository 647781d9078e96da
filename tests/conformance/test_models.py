"""Consumer models with the official client: clustering splits the queues, broadcasting
gives every consumer everything."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from broker_core.model.message import MessageInner
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "ModelTopic"
COUNT = 40


def produce(broker, count: int) -> None:
    for i in range(count):
        assert broker.store.put_message(
            MessageInner(TOPIC, i % 4, f"m-{i}".encode(), {"TAGS": "T", "UNIQ_KEY": f"K{i}"})
        ).ok


async def two_consumers(ns_address: str, group: str, home: Path, model: str) -> tuple[list, list]:
    window = {"QUIVER_CONSUMER_SECONDS": "7"}  # each runs a fixed window: neither knows its share
    args = (ns_address, TOPIC, group, "1000000", "*", model)
    first = asyncio.create_task(
        run_official_client("consumer_child.py", *args, home=home / "a", extra_env=window)
    )
    second = asyncio.create_task(
        run_official_client("consumer_child.py", *args, home=home / "b", extra_env=window)
    )
    return await first, await second


async def test_it_splits_the_queues_between_two_consumers_of_one_group(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        consumers = asyncio.create_task(two_consumers(ns.address, "SplitGroup", tmp_path, "clustering"))
        await asyncio.sleep(3.0)  # both joined and rebalanced before anything is sent
        produce(broker, COUNT)
        first, second = await consumers
        bodies = Counter(m["body"] for m in first + second)
        assert bodies == Counter(f"m-{i}" for i in range(COUNT)), (
            "every message exactly once across the group"
        )
        first_queues = {m["queue_id"] for m in first}
        second_queues = {m["queue_id"] for m in second}
        assert first_queues and second_queues and not first_queues & second_queues
        assert first_queues | second_queues == {0, 1, 2, 3}


async def test_it_gives_every_broadcasting_consumer_every_message(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        consumers = asyncio.create_task(two_consumers(ns.address, "BroadcastGroup", tmp_path, "broadcasting"))
        await asyncio.sleep(3.0)
        produce(broker, COUNT)
        first, second = await consumers
        expected = Counter(f"m-{i}" for i in range(COUNT))
        assert Counter(m["body"] for m in first) == expected
        assert Counter(m["body"] for m in second) == expected
