"""A consumer that keeps failing: the message comes back with rising reconsume times, then
lands in the group's dead-letter queue."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.broker.groups import SubscriptionGroupConfig
from broker_core.model.message import MessageInner, decode_record
from broker_core.testing import run_broker, run_namesrv
from broker_core.topics import dlq_topic

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "RetryTopic"
GROUP = "FailingConsumer"
FAST_DELAYS = " ".join(["1s"] * 18)  # every delay level 1 s, so retries come back quickly


async def test_it_retries_a_failed_message_then_moves_it_to_the_dlq(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(
            tmp_path / "store",
            ns.address,
            standalone_maintenance=True,
            store={"message_delay_level": FAST_DELAYS},
        ) as broker,
    ):
        await create_topic(broker.address, TOPIC, 1)
        broker.groups.update(SubscriptionGroupConfig(GROUP, retry_max_times=2))
        await broker.registration.register_all()
        poison = MessageInner(TOPIC, 0, b"poison", {"TAGS": "T", "UNIQ_KEY": "U-poison"})
        first = broker.store.put_message(poison)
        assert first.ok

        deliveries = await run_official_client(
            "failing_consumer_child.py", ns.address, TOPIC, GROUP, "3", home=tmp_path / "c"
        )
        assert [d["reconsume_times"] for d in deliveries] == [0, 1, 2], deliveries
        assert {d["body"] for d in deliveries} == {"poison"}
        # The application sees the original topic, also on the retries.
        assert {d["topic"] for d in deliveries} == {TOPIC}

        dlq = dlq_topic(GROUP)
        for _ in range(100):
            if broker.store.get_max_offset_in_queue(dlq, 0):
                break
            await asyncio.sleep(0.05)
        result = broker.store.get_message(dlq, 0, 0, 32)
        assert len(result.messages) == 1, result.status
        dead = decode_record(result.messages[0])
        assert dead.body == b"poison" and dead.reconsume_times == 3
        assert dead.properties["RETRY_TOPIC"] == TOPIC
        # As RocketMQ's broker sets it on a send-back: the first copy's offset msgId.
        assert dead.properties["ORIGIN_MESSAGE_ID"] == first.msg_id
        assert dead.properties["UNIQ_KEY"] == "U-poison" and dead.properties["DELAY"] == "0"
        assert broker.maintenance.last_runs["delay_scan"].ok
