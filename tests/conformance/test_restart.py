"""Restart the broker mid-test: committed offsets survive and consumption resumes without loss."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from broker_core.model.message import MessageInner
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "RestartTopic"
GROUP = "RestartConsumer"


def produce(broker, first: int, count: int) -> None:
    for i in range(first, first + count):
        assert broker.store.put_message(MessageInner(TOPIC, i % 2, f"m-{i}".encode(), {"TAGS": "T"})).ok


async def test_it_resumes_after_a_broker_restart_from_the_committed_offsets(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    async with run_namesrv() as ns:
        async with run_broker(store_dir, ns.address) as broker:
            await create_topic(broker.address, TOPIC, 2)
            await broker.registration.register_all()
            produce(broker, 0, 20)
            before = await run_official_client(
                "consumer_child.py",
                ns.address,
                TOPIC,
                GROUP,
                "20",
                "*",
                home=tmp_path / "a",
                extra_env={"QUIVER_CONSUMER_LINGER": "6"},  # long enough for the client's 5 s offset commit
            )
            assert Counter(m["body"] for m in before) == Counter(f"m-{i}" for i in range(20))
            committed = {q: broker.store.consumer_offsets.query_offset(GROUP, TOPIC, q) for q in (0, 1)}
            assert committed == {0: 10, 1: 10}, committed
        # The broker is down and back, on the same store (and a new port, re-registered).
        async with run_broker(store_dir, ns.address) as broker:
            assert {
                q: broker.store.consumer_offsets.query_offset(GROUP, TOPIC, q) for q in (0, 1)
            } == committed
            produce(broker, 20, 10)
            after = await run_official_client(
                "consumer_child.py",
                ns.address,
                TOPIC,
                GROUP,
                "10",
                "*",
                home=tmp_path / "b",
                extra_env={"QUIVER_CONSUMER_SECONDS": "15"},
            )
            assert Counter(m["body"] for m in after) == Counter(f"m-{i}" for i in range(20, 30))
            assert broker.store.check() == []
