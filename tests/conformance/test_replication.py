"""A broker set loses its master's host and keeps every message: the official C++ producer
and ours send to a SYNC_MASTER with a slave, the master is killed with SIGKILL, and new consumer
groups (the official push consumer, and ours) read every message from the slave, intact.
The slave's commit log equals the master's byte for byte, and both stores check clean."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections import Counter
from pathlib import Path

from broker_core.client.admin import AdminClient
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.message import Message, SendStatus
from broker_core.client.producer.producer import Producer
from broker_core.model.groupconfig import MASTER_ID
from broker_core.model.message import MessageExt
from broker_core.store.store import MessageStore
from broker_core.testing import cli_server, run_broker, run_namesrv, small_store_config

from .conftest import run_official_client
from .test_send import create_topic

TOPIC = "SurvivesItsMaster"
COUNT = 20  # per kind: sync, async, oneway, orderly, batch (the official producer's), ours
KINDS = ("sync", "async", "oneway", "orderly", "batch", "ours")
SET = "broker-ha"


def master_conf(tmp_path: Path, namesrv: str) -> Path:
    conf = tmp_path / "master.conf"
    conf.write_text(
        f"brokerClusterName = DefaultCluster\nbrokerName = {SET}\nbrokerId = 0\n"
        "brokerRole = SYNC_MASTER\nbrokerIP1 = 127.0.0.1\nlistenPort = 0\n"
        f"namesrvAddr = {namesrv}\nstorePathRootDir = {tmp_path / 'master'}\n"
        "mappedFileSizeCommitLog = 1048576\nwarmMappedFileEnable = false\n"
    )
    return conf


def commit_log(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted((root / "commitlog").iterdir()))


async def test_every_message_is_read_from_the_slave_after_the_master_is_killed(tmp_path: Path) -> None:
    async with contextlib.AsyncExitStack() as stack:
        ns = await stack.enter_async_context(run_namesrv())
        master_proc, master_addr = stack.enter_context(
            cli_server("broker", master_conf(tmp_path, ns.address), log=tmp_path / "master.log")
        )
        slave = await stack.enter_async_context(
            run_broker(
                tmp_path / "slave", ns.address, broker_name=SET, broker_role="SLAVE", broker_id=1,
                store={"mapped_file_size_commit_log": 1048576},
            )
        )  # fmt: skip
        admin = await stack.enter_async_context(AdminClient([ns.address]))
        await create_topic(master_addr, TOPIC, 4)
        async with asyncio.timeout(15):
            while not (await admin.ha_status(master_addr)).slaves:
                await asyncio.sleep(0.05)
        sent = await run_official_client(
            "producer_child.py", ns.address, TOPIC, str(COUNT), home=tmp_path / "p"
        )
        # Every acknowledged send says SEND_OK (0): the slave held it first.
        assert [line["status"] for line in sent if "status" in line] == [0] * (3 * COUNT + 1)
        # Our producer too: SEND_OK from the SYNC_MASTER means the slave holds it.
        producer = Producer("OurProducerToTheSet", ns.address)
        await asyncio.to_thread(producer.start)
        try:
            for i in range(COUNT):
                message = Message(
                    TOPIC, f"ours-{i}-é".encode(), tags="TagA" if i % 2 == 0 else "TagB",
                    keys=f"key-ours-{i} order-{i}", properties={"kind": "ours", "index": str(i)},
                )  # fmt: skip
                result = await asyncio.to_thread(producer.send, message)
                assert result.status is SendStatus.SEND_OK
        finally:
            await asyncio.to_thread(producer.shutdown)
        # The oneway sends were not acknowledged: wait until the slave has them too.
        async with asyncio.timeout(10):
            while (await admin.ha_status(master_addr)).slaves[0].behind_bytes:
                await asyncio.sleep(0.05)
        master_proc.send_signal(signal.SIGKILL)
        master_proc.wait()
        async with asyncio.timeout(10):  # the nameserver notices the master is gone
            while MASTER_ID in (await admin.topic_route(TOPIC)).broker_datas[0].addrs:
                await asyncio.sleep(0.05)

        official = await run_official_client(
            "consumer_child.py", ns.address, TOPIC, "FromTheSlave", str(COUNT * len(KINDS)), "*",
            home=tmp_path / "c",
        )  # fmt: skip
        assert Counter(m["kind"] for m in official) == {kind: COUNT for kind in KINDS}
        for line in official:
            assert line["body"].startswith(f"{line['kind']}-") and line["body"].endswith("-é")
            assert line["tags"] in ("TagA", "TagB") and line["keys"].startswith("key-")
        ours = await consume_with_ours(ns.address, "OursFromTheSlave", COUNT * len(KINDS))
        assert Counter(m.properties["kind"] for m in ours) == {kind: COUNT for kind in KINDS}
        for msg in ours:
            i, kind = int(msg.properties["index"]), msg.properties["kind"]
            assert msg.body == f"{kind}-{i}-é".encode() and msg.keys == f"key-{kind}-{i} order-{i}"

        assert slave.store is not None
        held = slave.store.commit_log.max_offset
        assert commit_log(tmp_path / "slave")[:held] == commit_log(tmp_path / "master")[:held]
        assert slave.store.check() == []
        # The killed master's store recovers and checks clean too, and holds what the slave has.
        killed = MessageStore(
            small_store_config(tmp_path / "master"), adopt_geometry=True
        )  # as tools open it
        with killed.open():
            assert killed.check() == [] and killed.commit_log.max_offset == held


async def consume_with_ours(namesrv: str, group: str, expected: int) -> list[MessageExt]:
    got: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        with lock:
            got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    push = PushConsumer(
        group,
        config=ClientConfig(namesrv_addr=namesrv, instance_name="from-slave"),
        consume_from_where="CONSUME_FROM_FIRST_OFFSET",
    )
    push.subscribe(TOPIC, "*").register_listener(listener)
    await asyncio.to_thread(push.start)
    try:
        async with asyncio.timeout(30):
            while len(got) < expected:
                await asyncio.sleep(0.05)
    finally:
        await asyncio.to_thread(push.shutdown)
    return got
