"""Messages by offset msgId and by key, through a real broker (raw protocol frames)."""

from __future__ import annotations

from pathlib import Path

import orjson

from broker_core.model.message import MessageInner, decode_message_id, decode_record, iter_records
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker


async def test_it_finds_messages_by_offset_and_by_key(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker:
        ids = []
        for i in range(5):
            result = broker.store.put_message(
                MessageInner("Orders", 0, f"m-{i}".encode(), {"KEYS": f"k{i} shared"})
            )
            ids.append(result.msg_id)
        assert broker.store.wait_dispatched()
        client = RemotingClient()
        try:
            _host, phys = decode_message_id(ids[3])
            view = await client.invoke(
                broker.address, RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": str(phys)})
            )
            assert view.code == ResponseCode.SUCCESS and decode_record(view.body).body == b"m-3"
            query = RemotingCommand.request(
                RequestCode.QUERY_MESSAGE,
                {
                    "topic": "Orders",
                    "key": "shared",
                    "maxNum": "32",
                    "beginTimestamp": "0",
                    "endTimestamp": "0",
                },
            )
            found = await client.invoke(broker.address, query)
            assert found.code == ResponseCode.SUCCESS
            assert sorted(m.body for m in iter_records(found.body)) == [f"m-{i}".encode() for i in range(5)]
            query.ext_fields["key"] = "missing"
            assert (await client.invoke(broker.address, query)).code == ResponseCode.QUERY_NOT_FOUND
            nowhere = RemotingCommand.request(RequestCode.VIEW_MESSAGE_BY_ID, {"offset": "999999"})
            assert (await client.invoke(broker.address, nowhere)).code == ResponseCode.SYSTEM_ERROR
        finally:
            await client.close()


async def test_it_locks_a_queue_for_one_client_and_refuses_malformed_lock_requests(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker:
        client = RemotingClient()
        try:

            def lock(client_id: str) -> RemotingCommand:
                body = {
                    "clientId": client_id,
                    "consumerGroup": "g",
                    "mqSet": [{"topic": "T", "brokerName": "b", "queueId": 0}],
                }
                return RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, orjson.dumps(body))

            first = await client.invoke(broker.address, lock("alice"))
            assert orjson.loads(first.body) == {
                "lockOKMQSet": [{"topic": "T", "brokerName": "b", "queueId": 0}]
            }
            assert orjson.loads((await client.invoke(broker.address, lock("bob"))).body) == {
                "lockOKMQSet": []
            }
            bad = RemotingCommand.request(RequestCode.LOCK_BATCH_MQ, {}, b"{not json")
            assert (await client.invoke(broker.address, bad)).code == ResponseCode.SYSTEM_ERROR
        finally:
            await client.close()
