"""A full disk is a state, not a crash: a real broker on a small tmpfs that the test fills.

Requests are raw protocol frames, as clients send them.  The disk fills while the broker
runs (after it acknowledged messages whose keys found no index file) and the broker is
restarted on it: it starts read-only, serves pulls and key queries, and takes sends again
once the space returns.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.model.maintenance import OFFSET_PERSISTENCE
from broker_core.model.message import encode_properties, iter_records
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker
from tests.disk import fill, small_disk

from .clusterhelpers import raw_client

TOPIC = "FullDiskTopic"
GROUP = "full-disk-group"
INDEX_ENTRIES = 8  # index files of 7 entries: the eighth key needs a new file
# Small files; the disk ratio out of reach, so sends are refused only for want of a file.
STORE: dict[str, Any] = {
    "mapped_file_size_commit_log": 1024 * 1024,
    "mapped_file_size_consume_queue": 20 * 1000,
    "max_hash_slot_num": 64,
    "max_index_num": INDEX_ENTRIES,
}


async def invoke(
    client: RemotingClient, broker: BrokerController, code: int, fields: dict[str, Any], body: bytes = b""
) -> RemotingCommand:
    request = RemotingCommand.request(code, {k: str(v) for k, v in fields.items()}, body)
    return await client.invoke(broker.address, request, 10)


async def send(client: RemotingClient, broker: BrokerController, body: bytes, key: str) -> RemotingCommand:
    fields = {"producerGroup": "p", "topic": TOPIC, "queueId": 0}
    fields["properties"] = encode_properties({"KEYS": key}).decode()
    return await invoke(client, broker, RequestCode.SEND_MESSAGE, fields, body)


async def query(client: RemotingClient, broker: BrokerController, key: str) -> list[bytes]:
    fields = {"topic": TOPIC, "key": key, "maxNum": 32, "beginTimestamp": 0, "endTimestamp": 0}
    response = await invoke(client, broker, RequestCode.QUERY_MESSAGE, fields)
    if response.code == ResponseCode.QUERY_NOT_FOUND:
        return []
    assert response.code == ResponseCode.SUCCESS, response.remark
    return [m.body for m in iter_records(response.body)]


async def pull(client: RemotingClient, broker: BrokerController) -> list[bytes]:
    fields = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": 0,
        "queueOffset": 0,
        "maxMsgNums": 32,
        "sysFlag": 0x4,  # carries its subscription
        "commitOffset": 0,
        "suspendTimeoutMillis": 0,
        "subscription": "*",
        "subVersion": 0,
    }
    response = await invoke(client, broker, RequestCode.PULL_MESSAGE, fields)
    assert response.code == ResponseCode.SUCCESS, response.remark
    return [m.body for m in iter_records(response.body)]


async def create_topic(client: RemotingClient, broker: BrokerController, topic: str) -> RemotingCommand:
    fields = {"topic": topic, "readQueueNums": 1, "writeQueueNums": 1, "perm": 6}
    return await invoke(client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)


async def sends_again(client: RemotingClient, broker: BrokerController) -> None:
    """Wait (a few seconds at most) until the broker takes sends again."""
    async with asyncio.timeout(10):
        while (await send(client, broker, b"after", "after")).code != ResponseCode.SUCCESS:
            await asyncio.sleep(0.05)


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]


async def test_a_broker_restarts_on_a_full_disk_read_only_and_finds_every_acknowledged_message(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk", 16) as disk, caplog.at_level(logging.INFO):
        store_dir = disk / "store"
        async with run_broker(store_dir, store=STORE) as broker, raw_client() as client:
            assert (await create_topic(client, broker, TOPIC)).code == ResponseCode.SUCCESS
            for i in range(INDEX_ENTRIES - 1):
                assert (await send(client, broker, f"m{i}".encode(), f"k{i}")).code == ResponseCode.SUCCESS
            assert broker.store is not None and broker.store.wait_dispatched()
            filler = fill(disk)
            # The commit log's segment has room: stored and acknowledged, though its key
            # finds no index file.
            late = await send(client, broker, b"late", "late")
            assert late.code == ResponseCode.SUCCESS, late.remark
            assert broker.store.wait_dispatched()
            assert await query(client, broker, "late") == [b"late"]

        # Restarted on the full disk, now with RocketMQ's 90 % ratio: read-only from the start.
        read_only = {**STORE, "disk_space_warning_level_ratio": 0.9}
        async with run_broker(store_dir, store=read_only) as broker, raw_client() as client:
            refused = await send(client, broker, b"refused", "refused")
            assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE
            assert "read-only" in (refused.remark or "")
            expected = [f"m{i}".encode() for i in range(INDEX_ENTRIES - 1)] + [b"late"]
            assert await pull(client, broker) == expected
            assert await query(client, broker, "late") == [b"late"]
            assert await query(client, broker, "k2") == [b"m2"]

            filler.unlink()
            await sends_again(client, broker)
            assert broker.store is not None and broker.store.stats["indexKeysWaiting"] == 0
            assert await query(client, broker, "late") == [b"late"]
        assert tracebacks(caplog) == []


async def test_config_writes_on_a_full_disk_answer_cleanly_and_keep_the_old_files(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with small_disk(tmp_path / "disk", 16) as disk, caplog.at_level(logging.INFO):
        config_dir = disk / "store" / "config"
        async with run_broker(disk / "store", store=STORE) as broker, raw_client() as client:
            assert (await create_topic(client, broker, TOPIC)).code == ResponseCode.SUCCESS
            commit = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": 0, "commitOffset": 3}
            assert (await invoke(client, broker, RequestCode.UPDATE_CONSUMER_OFFSET, commit)).code == 0
            await broker.maintenance.run(OFFSET_PERSISTENCE)
            before = {p.name: p.read_bytes() for p in config_dir.iterdir()}
            filler = fill(disk)
            caplog.clear()

            created = await create_topic(client, broker, "AnotherTopic")
            assert created.code == ResponseCode.SYSTEM_ERROR
            assert "No space left on device" in (created.remark or "")
            commit["commitOffset"] = 5
            assert (await invoke(client, broker, RequestCode.UPDATE_CONSUMER_OFFSET, commit)).code == 0
            for _ in range(3):
                await broker.maintenance.run(OFFSET_PERSISTENCE)
            assert {p.name: p.read_bytes() for p in config_dir.iterdir()} == before

            warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
            assert len([w for w in warnings if "consumerOffset.json" in w]) == 1, warnings
            assert len([w for w in warnings if "topics.json" in w]) == 1, warnings
            assert tracebacks(caplog) == []

            filler.unlink()
            await broker.maintenance.run(OFFSET_PERSISTENCE)
            assert b'"0": 5' in (config_dir / "consumerOffset.json").read_bytes()
