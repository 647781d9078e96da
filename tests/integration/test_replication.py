"""Master/slave replication between real brokers on loopback: a SYNC_MASTER answers a send
once its slave holds it, the slave's commit log is the master's byte for byte and it serves
reads with its own queues, and the refusals (no slave, a slave that stops confirming, a
slave ahead of its master, a send to a slave) are RocketMQ's."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import orjson

from broker_core.broker.controller import BrokerController
from broker_core.ha.protocol import REPORT, parse_addr
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import PullMessageRequestHeader, PullSysFlag, SendMessageRequestHeader
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import raw_client, wait_until_routed

TOPIC = "Replicated"
SET = {"broker_name": "broker-r", "broker_cluster_name": "HaCluster"}


def send_request(topic: str, body: bytes, queue_id: int = 0) -> RemotingCommand:
    header = SendMessageRequestHeader("ha-producer", topic, queue_id=queue_id, properties="KEYS\x01k\x02")
    return RemotingCommand.request(RequestCode.SEND_MESSAGE_V2, header.to_v2_fields(), body)


async def wait_connected(master: BrokerController, count: int = 1) -> None:
    assert master.replication is not None and master.replication.master is not None
    ha = master.replication.master
    async with asyncio.timeout(10):
        while len(ha.status().slaves) < count:
            await asyncio.sleep(0.02)


def segments(store_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((store_dir / "commitlog").iterdir())}


async def ha_status(client: RemotingClient, addr: str) -> dict[str, Any]:
    response = await client.invoke(addr, RemotingCommand.request(RequestCode.GET_BROKER_HA_STATUS, {}), 5)
    assert response.code == ResponseCode.SUCCESS, response.remark
    answer: dict[str, Any] = orjson.loads(response.body)
    return answer


async def test_a_sync_master_answers_once_its_slave_holds_the_message(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "m", ns.address, broker_role="SYNC_MASTER", **SET) as master,
        run_broker(tmp_path / "s", ns.address, broker_role="SLAVE", broker_id=1, **SET) as slave,
        raw_client() as client,
    ):
        master.topics.update(TopicConfig(TOPIC, 2, 2))
        master.topics_changed()
        await wait_until_routed(ns, TOPIC)
        await wait_connected(master)
        assert slave.store is not None and master.store is not None
        for i in range(200):
            reply = await client.invoke(master.address, send_request(TOPIC, b"m%d" % i * 50, i % 2), 5)
            assert reply.code == ResponseCode.SUCCESS, reply.remark
            # Answered only once the slave held it: its log already reaches past it.
            assert slave.store.commit_log.max_offset >= master.store.commit_log.max_offset
        end = master.store.commit_log.max_offset
        assert segments(tmp_path / "s") == segments(tmp_path / "m")
        # The slave's own consume queues serve the messages, and it copied the topic.
        await slave.replication.sync_metadata()  # type: ignore[union-attr]
        assert slave.topics.get(TOPIC) is not None
        slave.store.wait_dispatched()
        pull = PullMessageRequestHeader(
            consumer_group="ha-readers", topic=TOPIC, queue_id=1, queue_offset=0, max_msg_nums=32,
            sys_flag=PullSysFlag.SUBSCRIPTION, suspend_timeout_millis=0, subscription="*",
        )  # fmt: skip
        request = RemotingCommand.request(RequestCode.PULL_MESSAGE, pull.to_fields())
        answer = await client.invoke(slave.address, request, 5)
        assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["suggestWhichBrokerId"] == "0"
        # Both sides report the link.
        mine = await ha_status(client, master.address)
        assert mine["role"] == "master" and mine["maxOffset"] == end
        (link,) = mine["slaves"]
        assert link["ackedOffset"] == end and link["behindBytes"] == 0 and link["inSync"]
        theirs = await ha_status(client, slave.address)
        assert theirs["role"] == "slave" and theirs["connected"] and theirs["maxOffset"] == end
        assert theirs["masterAddr"] == master.address
        # A slave refuses sends (RocketMQ's answer), and transactions' ends.
        refused = await client.invoke(slave.address, send_request(TOPIC, b"x"), 5)
        assert refused.code == ResponseCode.SERVICE_NOT_AVAILABLE and "slave" in (refused.remark or "")


async def test_a_sync_master_without_a_slave_in_sync_says_so_and_keeps_the_message(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(
            tmp_path / "m", ns.address, broker_role="SYNC_MASTER", store={"sync_flush_timeout": 300}, **SET
        ) as master,
        raw_client() as client,
    ):
        master.topics.update(TopicConfig(TOPIC, 1, 1))
        assert master.store is not None and master.replication is not None
        alone = await client.invoke(master.address, send_request(TOPIC, b"alone"), 5)
        assert alone.code == ResponseCode.SLAVE_NOT_AVAILABLE and alone.ext_fields["msgId"]
        # A slave that connects, says it holds everything, then never confirms again.
        ha = master.replication.master
        assert ha is not None
        with socket.create_connection(parse_addr(ha.addr)) as stuck:
            stuck.sendall(REPORT.pack(master.store.commit_log.max_offset))
            await wait_connected(master)
            late = await client.invoke(master.address, send_request(TOPIC, b"late"), 5)
            assert late.code == ResponseCode.FLUSH_SLAVE_TIMEOUT and late.ext_fields["msgId"]
        assert master.store.get_max_offset_in_queue(TOPIC, 0) == 2  # both stored


async def test_an_async_master_answers_at_once_and_its_slave_follows(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "m", ns.address, **SET) as master,
        raw_client() as client,
    ):
        master.topics.update(TopicConfig(TOPIC, 1, 1))
        for i in range(50):
            reply = await client.invoke(master.address, send_request(TOPIC, b"before-%d" % i), 5)
            assert reply.code == ResponseCode.SUCCESS
        assert master.store is not None
        # A slave joining later copies everything the master holds, and what follows.
        async with run_broker(tmp_path / "s", ns.address, broker_role="SLAVE", broker_id=1, **SET) as slave:
            await wait_connected(master)
            for i in range(50):
                reply = await client.invoke(master.address, send_request(TOPIC, b"after-%d" % i), 5)
                assert reply.code == ResponseCode.SUCCESS
            assert slave.store is not None
            async with asyncio.timeout(10):
                while slave.store.commit_log.max_offset < master.store.commit_log.max_offset:
                    await asyncio.sleep(0.01)
            assert slave.store.wait_dispatched()
            assert slave.store.get_max_offset_in_queue(TOPIC, 0) == 100


async def test_a_slave_ahead_of_its_master_is_refused_and_reported(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "m", ns.address, **SET) as master,
        raw_client() as client,
    ):
        assert master.replication is not None and master.replication.master is not None
        ha = master.replication.master
        with socket.create_connection(parse_addr(ha.addr)) as ahead:
            ahead.sendall(REPORT.pack(10**9))
            ahead.settimeout(5)
            assert ahead.recv(1) == b""  # the master closed the link
        status = await ha_status(client, master.address)
        assert status["slaves"] == []
        (problem,) = status["problems"]
        assert "past this master's end" in problem and "not spliced" in problem
