"""The official C++ client sends to Quiver: sync, async, oneway, orderly and batch."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from broker_core.model.message import decode_record
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv

from .conftest import run_official_client

TOPIC = "ConformanceTopic"
COUNT = 6
SEND_OK = 0


async def create_topic(broker_address: str, topic: str, queues: int) -> None:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.UPDATE_AND_CREATE_TOPIC,
            {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6"},
        )
        reply = await client.invoke(broker_address, request)
        assert reply.code == ResponseCode.SUCCESS, reply.remark
    finally:
        await client.close()


def stored(broker, topic: str, queues: int) -> list:
    store = broker.store
    assert store.wait_dispatched(10)
    found = []
    for queue_id in range(queues):
        offset = 0
        while True:
            result = store.get_message(topic, queue_id, offset, 32)
            if not result.messages:
                break
            found.extend(decode_record(raw) for raw in result.messages)
            offset = result.next_begin_offset
    return found


async def test_it_stores_everything_the_official_producer_sends(tmp_path: Path) -> None:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        results = await run_official_client(
            "producer_child.py", ns.address, TOPIC, str(COUNT), home=tmp_path / "home"
        )
        kinds = Counter(r["kind"] for r in results)
        assert kinds == {"sync": COUNT, "async": COUNT, "orderly": COUNT, "batch": 1}, results
        assert all(r.get("status") == SEND_OK for r in results), results
        assert all(len(r["msg_id"]) == 32 for r in results if r["kind"] in ("sync", "async")), results

        messages = stored(broker, TOPIC, 4)
        by_kind = Counter(m.properties.get("kind") for m in messages)
        assert by_kind == {"sync": COUNT, "async": COUNT, "oneway": COUNT, "orderly": COUNT, "batch": COUNT}
        for msg in messages:
            i = int(msg.properties["index"])
            kind = msg.properties["kind"]
            assert msg.body == f"{kind}-{i}-é".encode()
            assert msg.tags == ("TagA" if i % 2 == 0 else "TagB")
            assert msg.keys == f"key-{kind}-{i} order-{i}"
            assert msg.uniq_key and msg.born_timestamp > 0 and msg.store_host == broker.address
        # Orderly sends with the same sharding key land in one queue, in send order.
        orderly = [m for m in messages if m.properties["kind"] == "orderly"]
        for shard in range(3):
            same = [m for m in orderly if int(m.properties["index"]) % 3 == shard]
            assert len({m.queue_id for m in same}) == 1
            assert [int(m.properties["index"]) for m in sorted(same, key=lambda m: m.queue_offset)] == sorted(
                int(m.properties["index"]) for m in same
            )
        # The sync sends' msgIds are the client's UNIQ_KEYs, findable by key.
        sync_ids = {r["msg_id"] for r in results if r["kind"] == "sync"}
        assert sync_ids == {m.uniq_key for m in messages if m.properties["kind"] == "sync"}
        assert [m.body for m in broker.store.query_message(TOPIC, "key-sync-3")] == ["sync-3-é".encode()]
        assert broker.store.check() == []


async def send_raw(address: str, topic: str) -> RemotingCommand:
    client = RemotingClient()
    try:
        request = RemotingCommand.request(
            RequestCode.SEND_MESSAGE,
            {
                "producerGroup": "g",
                "topic": topic,
                "defaultTopic": "TBW102",
                "defaultTopicQueueNums": "4",
                "queueId": "0",
                "sysFlag": "0",
                "bornTimestamp": "1",
                "flag": "0",
                "properties": "",
                "batch": "0",
            },
            b"hello",
        )
        return await client.invoke(address, request)
    finally:
        await client.close()


async def test_it_refuses_an_unknown_topic_unless_auto_creation_is_on(tmp_path: Path) -> None:
    async with run_namesrv() as ns:
        async with run_broker(tmp_path / "off", ns.address) as broker:
            results = (
                await run_official_client(
                    "producer_child.py", ns.address, "NoSuchTopic", "1", home=tmp_path / "home"
                )
                if False
                else None
            )
            assert broker.topics.get("NoSuchTopic") is None
        async with run_broker(tmp_path / "on", ns.address, auto_create_topic_enable=True) as broker:
            results = await run_official_client(
                "producer_child.py", ns.address, "AutoTopic", "2", home=tmp_path / "home"
            )
            assert all(r.get("status") == SEND_OK for r in results), results
            config = broker.topics.get("AutoTopic")
            assert config is not None and config.write_queue_nums == 4  # the client asks for 4
            assert len(stored(broker, "AutoTopic", 4)) == 10


async def test_a_batch_the_official_client_compresses_is_stored_item_by_item(tmp_path: Path) -> None:
    # 16 x 1 KiB: past 4 KiB the client zlib-compresses the whole batch body.
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        await create_topic(broker.address, TOPIC, 4)
        await broker.registration.register_all()
        (result,) = await run_official_client(
            "batch_producer_child.py", ns.address, TOPIC, "16", "1024", home=tmp_path / "home"
        )
        assert result == {"status": SEND_OK, "offset": 0}
        messages = sorted(stored(broker, TOPIC, 4), key=lambda m: m.queue_offset)
        assert [m.body for m in messages] == [(b"%06d" % i) * 170 for i in range(16)]
        assert [m.keys for m in messages] == [f"batch-{i}" for i in range(16)]
        assert len({m.queue_id for m in messages}) == 1
