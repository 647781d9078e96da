"""Sends that the broker refuses, over raw frames: a clear answer, and nothing lost."""

from __future__ import annotations

from pathlib import Path

from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker

TOPIC = "SizedTopic"


def send(body: bytes, **fields: str) -> RemotingCommand:
    header = {"producerGroup": "p", "topic": TOPIC, "queueId": "0", "properties": "", **fields}
    return RemotingCommand.request(RequestCode.SEND_MESSAGE, header, body)


async def test_refused_sends_get_a_reason_and_leave_the_queue_as_it_was(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store", store={"max_message_size": 64 * 1024}) as broker:
        client = RemotingClient()
        try:
            create = {"topic": TOPIC, "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
            created = await client.invoke(
                broker.address, RemotingCommand.request(RequestCode.UPDATE_AND_CREATE_TOPIC, create)
            )
            assert created.code == ResponseCode.SUCCESS
            ok = await client.invoke(broker.address, send(b"first"))
            assert ok.code == ResponseCode.SUCCESS and ok.ext_fields["queueOffset"] == "0"

            too_big = await client.invoke(broker.address, send(b"x" * (64 * 1024 + 1)))
            assert too_big.code == ResponseCode.MESSAGE_ILLEGAL
            assert "maxMessageSize" in (too_big.remark or "")
            bad_queue = await client.invoke(broker.address, send(b"q", queueId="7"))
            assert bad_queue.code == ResponseCode.SYSTEM_ERROR and "queueId" in (bad_queue.remark or "")
            not_a_number = await client.invoke(broker.address, send(b"n", queueId="zero"))
            assert not_a_number.code == ResponseCode.SYSTEM_ERROR and "queueId" in (not_a_number.remark or "")
            unknown = await client.invoke(broker.address, send(b"u", topic="NoSuchTopic"))
            assert unknown.code == ResponseCode.TOPIC_NOT_EXIST
            forbidden = await client.invoke(broker.address, send(b"s", topic="SCHEDULE_TOPIC_XXXX"))
            assert forbidden.code == ResponseCode.NO_PERMISSION

            after = await client.invoke(broker.address, send(b"second"))
            assert after.code == ResponseCode.SUCCESS and after.ext_fields["queueOffset"] == "1"
            assert broker.store is not None and broker.store.wait_dispatched()
            pulled = broker.store.get_message(TOPIC, 0, 0, 32)
            assert len(pulled.messages) == 2
        finally:
            await client.close()
