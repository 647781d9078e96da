"""Admin requests about a live official consumer: what the console shows and does to it.

The official C++ push consumer runs in a child process while the test asks the broker,
with raw frames, for the group's connections and consume stats, has the broker relay
GET_CONSUMER_RUNNING_INFO to the consumer, and resets the group's offsets by time: the
consumer is told (RESET_CONSUMER_CLIENT_OFFSET in the array form C++ parses) and
consumes the topic again.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import orjson

from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageInner
from broker_core.remoting import fastjson
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "AdminLiveTopic"
GROUP = "AdminLiveConsumer"
COUNT = 12


async def wait_for(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not await predicate():
            await asyncio.sleep(0.2)


async def test_console_requests_about_a_live_official_consumer(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 2)
        await broker.registration.register_all()
        for i in range(COUNT):
            assert broker.store.put_message(MessageInner(TOPIC, i % 2, f"m-{i}".encode(), {"TAGS": "T"})).ok
        # It expects every message twice: once now, once more after the reset below.
        consumer = asyncio.create_task(
            run_official_client(
                "consumer_child.py",
                ns.address,
                TOPIC,
                GROUP,
                str(2 * COUNT),
                "*",
                home=tmp_path / "c",
                extra_env={"QUIVER_CONSUMER_SECONDS": "45"},
            )
        )
        client = RemotingClient()
        try:

            async def call(code: int, fields: dict[str, str]) -> RemotingCommand:
                return await client.invoke(broker.address, RemotingCommand.request(code, fields), timeout=8)

            async def consumed_all() -> bool:
                stats = await call(RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP, "topic": TOPIC})
                if stats.code != ResponseCode.SUCCESS:
                    return False
                table = fastjson.loads(stats.body)["offsetTable"]
                return sum(row["consumerOffset"] for row in table.values()) == COUNT

            # The client commits its offsets every 5 s: then the group's lag is 0.
            await wait_for(consumed_all)

            conns = await call(RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
            assert conns.code == ResponseCode.SUCCESS, conns.remark
            body = orjson.loads(conns.body)
            (connection,) = body["connectionSet"]
            assert connection["language"] == "CPP"
            assert body["subscriptionTable"][TOPIC]["subString"] == "*"
            assert body["messageModel"] == "CLUSTERING"

            running = await call(
                RequestCode.GET_CONSUMER_RUNNING_INFO,
                {"consumerGroup": GROUP, "clientId": connection["clientId"], "jstackEnable": "false"},
            )
            assert running.code == ResponseCode.SUCCESS, running.remark
            # The C++ client's own (not quite JSON) answer, relayed untouched.
            assert b"PROP_CONSUME_TYPE" in running.body and b"mqTable" in running.body

            reset = await call(
                RequestCode.INVOKE_BROKER_TO_RESET_OFFSET,
                {"topic": TOPIC, "group": GROUP, "timestamp": "0", "isForce": "true"},
            )
            assert reset.code == ResponseCode.SUCCESS, reset.remark
            assert fastjson.loads(reset.body)["offsetTable"] == {
                MessageQueue(TOPIC, broker.config.broker_name, q): 0 for q in (0, 1)
            }
            seen = await consumer
        finally:
            await client.close()
            if not consumer.done():
                consumer.cancel()
        assert Counter(m["body"] for m in seen) == Counter({f"m-{i}": 2 for i in range(COUNT)})
