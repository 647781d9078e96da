"""A message sent with delay level 2 (5 s) by the official producer reaches the official
consumer after 5 s, not before."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "DelayTopic"


async def test_it_delivers_a_level_2_message_after_five_seconds_and_not_before(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "store", ns.address, standalone_maintenance=True) as broker,
    ):
        await create_topic(broker.address, TOPIC, 2)
        await broker.registration.register_all()
        consumer = asyncio.create_task(
            run_official_client(
                "consumer_child.py", ns.address, TOPIC, "DelayConsumer", "1", "*", home=tmp_path / "c"
            )
        )
        await asyncio.sleep(1.0)  # the consumer is up and long-polling before the send
        sent = await run_official_client(
            "delayed_producer_child.py", ns.address, TOPIC, "2", home=tmp_path / "p"
        )
        assert sent[0]["status"] == 0, sent
        received = await consumer
        assert len(received) == 1 and received[0]["body"] == "later", received
        waited = received[0]["received_at"] - sent[0]["sent_at"]
        assert 5.0 <= waited < 7.0, f"delivered after {waited:.2f} s"
