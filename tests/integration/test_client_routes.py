"""Route lookups over several nameservers: a nameserver that does not answer costs one
attempt, after which the client instance keeps asking the one that did."""

from __future__ import annotations

import asyncio
from pathlib import Path

from broker_core.client.config import ClientConfig
from broker_core.client.instance import ClientInstance
from broker_core.model.topicconfig import TopicConfig
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import wait_until_routed

TOPIC = "RoutedTopic"


async def test_a_silent_nameserver_is_asked_once_then_left_alone(tmp_path: Path) -> None:
    asked: list[bytes] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while data := await reader.read(65536):  # takes requests, never answers
            asked.append(data)
        writer.close()

    black_hole = await asyncio.start_server(silent, "127.0.0.1", 0)
    dead = f"127.0.0.1:{black_hole.sockets[0].getsockname()[1]}"
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        config = ClientConfig(
            namesrv_addr=f"{dead};{ns.address}", instance_name="routes", request_timeout_ms=300
        )
        instance = await asyncio.to_thread(ClientInstance.acquire, config)
        try:
            for _ in range(5):
                route = await asyncio.to_thread(instance.call, instance.update_route(TOPIC), 5)
                assert [b.broker_name for b in route.broker_datas] == ["broker-a"]
        finally:
            await asyncio.to_thread(instance.release)
            black_hole.close()
            await black_hole.wait_closed()
    # Asked at most once (when the random start fell on it), never again after the live one answered.
    assert sum(data.count(b'"code":105') for data in asked) <= 1  # GET_ROUTEINFO_BY_TOPIC
