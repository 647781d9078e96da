"""The official RocketMQ 5 Python client (``rocketmq-python-client``, in .venv-v5) sends
through ``broker_core.proxy`` to real brokers: normal and FIFO messages arrive as sent for a
4.x consumer (ours), a message group's messages stay in one queue in order, a timer message
is delivered, and the proxy answers RPCs it does not serve
with NOT_IMPLEMENTED at once."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import defaultdict
from pathlib import Path

import grpc
import pytest

from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.model.message import MessageExt
from broker_core.model.topicconfig import TopicConfig
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.server import ProxyServer
from broker_core.proxy.stubs import load
from broker_core.testing import run_broker, run_namesrv

from .children import REPO, V5_MISSING, V5_PYTHON, run_v5

TOPIC = "FromV5"
COUNT = 10

pytestmark = pytest.mark.skipif(not V5_PYTHON.exists(), reason=V5_MISSING)


async def test_the_v5_producer_sends_through_the_proxy_to_a_4x_consumer(tmp_path: Path) -> None:
    got: list[MessageExt] = []
    lock = threading.Lock()

    def listener(msgs: list[MessageExt]) -> ConsumeStatus:
        with lock:
            got.extend(msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        broker.topics.update(TopicConfig(TOPIC, 4, 4, attributes={"message.type": "MIXED"}))
        await broker.registration.register_all()  # type: ignore[union-attr]
        proxy = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
        await proxy.start()
        try:
            sent = await run_v5("producer_child.py", proxy.address, TOPIC, str(COUNT), home=tmp_path / "v5")
        finally:
            await proxy.close()
        by_kind = defaultdict(list)
        for line in sent:
            by_kind[line["kind"]].append(line)
        assert len(by_kind["normal"]) == COUNT and all("message_id" in s for s in by_kind["normal"]), sent
        assert len(by_kind["fifo"]) == 2 * COUNT and all("message_id" in s for s in by_kind["fifo"]), sent
        (timer,) = by_kind["timer"]
        assert "message_id" in timer, timer

        consumer = PushConsumer(
            "V5Readers",
            config=ClientConfig(namesrv_addr=ns.address),
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
        )
        consumer.subscribe(TOPIC, "*").register_listener(listener)
        await asyncio.to_thread(consumer.start)
        try:
            async with asyncio.timeout(20):
                while len(got) < 3 * COUNT + 1:
                    await asyncio.sleep(0.05)
        finally:
            await asyncio.to_thread(consumer.shutdown)
    ids = {s["message_id"] for s in by_kind["normal"] + by_kind["fifo"] + by_kind["timer"]}
    assert {m.uniq_key for m in got} == ids  # the client's message ids, as 4.x consumers see them
    for msg in got:
        assert msg.properties["origin"] == "v5" and msg.tags == "TagA"
        assert msg.keys == f"key-{msg.body.decode()}"
    groups: dict[str, list[MessageExt]] = defaultdict(list)
    for msg in sorted(got, key=lambda m: (m.queue_id, m.queue_offset)):
        if "__SHARDINGKEY" in msg.properties:
            groups[msg.properties["__SHARDINGKEY"]].append(msg)
    assert set(groups) == {"group-a", "group-b"}
    for name, msgs in groups.items():
        assert len({m.queue_id for m in msgs}) == 1, name  # one queue per message group ...
        assert [m.body for m in msgs] == [
            f"fifo-{name[-1]}-{i}".encode() for i in range(COUNT)
        ]  # ... in order


async def test_rpcs_not_served_answer_not_implemented_at_once(tmp_path: Path) -> None:
    pb, svc, grpc_svc = load()
    async with run_namesrv() as ns:
        proxy = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
        await proxy.start()
        try:
            async with grpc.aio.insecure_channel(proxy.address) as channel:
                stub = grpc_svc.MessagingServiceStub(channel)
                recall = await stub.RecallMessage(svc.RecallMessageRequest(), timeout=5)
                assert recall.status.code == pb.NOT_IMPLEMENTED and "RecallMessage" in recall.status.message
                route = await stub.QueryRoute(
                    svc.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")), timeout=5
                )
                assert route.status.code == pb.TOPIC_NOT_FOUND
        finally:
            await proxy.close()


def test_the_proxy_command_refuses_a_bad_config_with_a_sentence(tmp_path: Path) -> None:
    import subprocess

    conf = tmp_path / "rmq-proxy.json"
    conf.write_text('{"proxyMode": "local", "grpcServerPort": 0}')
    done = subprocess.run(
        [sys.executable, "-m", "broker_core", "proxy", "-c", str(conf)],
        capture_output=True, text=True, timeout=60, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1 and "proxyMode = 'local' is not served" in done.stderr


async def test_garbage_and_odd_requests_never_take_the_proxy_down(tmp_path: Path) -> None:
    """Bytes that are not HTTP/2, a send with no message, one with an unknown topic, and a
    GZIP body that does not inflate: each gets its answer, and the proxy serves on."""
    pb, svc, grpc_svc = load()
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        broker.topics.update(TopicConfig(TOPIC, 1, 1))
        await broker.registration.register_all()  # type: ignore[union-attr]
        proxy = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
        await proxy.start()
        try:
            host, port = proxy.address.rsplit(":", 1)
            reader, writer = await asyncio.open_connection(host, int(port))
            writer.write(b"\x00\xff garbage that is not HTTP/2 at all\r\n" * 100)
            await writer.drain()
            await reader.read(1024)  # whatever it answers, then it closes
            writer.close()
            async with grpc.aio.insecure_channel(proxy.address) as channel:
                stub = grpc_svc.MessagingServiceStub(channel)
                empty = await stub.SendMessage(svc.SendMessageRequest(), timeout=5)
                assert empty.status.code == pb.BAD_REQUEST and "no message" in empty.status.message

                def one(topic: str, **system: object) -> object:
                    props = pb.SystemProperties(message_id="ID-1", **system)
                    return svc.SendMessageRequest(
                        messages=[
                            pb.Message(topic=pb.Resource(name=topic), body=b"x", system_properties=props)
                        ]
                    )

                unknown = await stub.SendMessage(one("NoSuchTopic"), timeout=5)
                assert unknown.entries[0].status.code == pb.TOPIC_NOT_FOUND
                corrupt = await stub.SendMessage(one(TOPIC, body_encoding=pb.GZIP), timeout=5)
                assert corrupt.entries[0].status.code == pb.MESSAGE_CORRUPTED
                fine = await stub.SendMessage(one(TOPIC), timeout=5)
                assert fine.entries[0].status.code == pb.OK and fine.entries[0].message_id == "ID-1"
        finally:
            await proxy.close()
