"""The official RocketMQ 5 Python client's consumers (``rocketmq-python-client``, run from
.venv-v5 by ``consumer_child.py``) through ``broker_core.proxy`` against a real broker:
a 4.x producer's messages received and acked as sent, an un-acked message coming back with
its attempt raised, a changed invisible duration holding it longer, the DLQ past the
group's attempts, FIFO order per message group across two consumers, a push consumer
consuming everything once, a v5 producer to a v5 consumer, a broker restart mid-way, and
bad consumer requests answered with their status."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from pathlib import Path
from typing import Any

import grpc
import orjson
import pytest

from broker_core.client.admin import AdminClient
from broker_core.client.config import ClientConfig
from broker_core.client.message import Message
from broker_core.client.producer.producer import Producer
from broker_core.errors import AdminError
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.message import MessageInner
from broker_core.model.topicconfig import TopicConfig
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.server import ProxyServer
from broker_core.proxy.stubs import load
from broker_core.testing import run_broker, run_namesrv
from broker_core.topics import dlq_topic

from .children import V5_MISSING, V5_PYTHON, Platform, platform, run_v5

pytestmark = pytest.mark.skipif(not V5_PYTHON.exists(), reason=V5_MISSING)
pb, svc, grpc_svc = load()

TOPIC = "ForV5"


async def routed(p: Platform, topic: str = TOPIC, queues: int = 4, *, mixed: bool = False) -> None:
    attributes = {"message.type": "MIXED"} if mixed else {}
    p.broker.topics.update(TopicConfig(topic, queues, queues, attributes=attributes))
    await p.broker.registration.register_all()  # type: ignore[union-attr]


async def send_4x(p: Platform, count: int, topic: str = TOPIC) -> dict[str, str]:
    """Send ``count`` messages with our 4.x producer; their bodies by message id."""

    def send() -> dict[str, str]:
        producer = Producer("V4Senders", config=ClientConfig(namesrv_addr=p.ns.address)).start()
        try:
            sent = {}
            for i in range(count):
                msg = Message(
                    topic, f"v4-{i}".encode(), tags="TagB", keys=[f"k{i}", "shared"], properties={"n": str(i)}
                )
                producer.send(msg)
                assert msg.unique_id is not None
                sent[msg.unique_id] = f"v4-{i}"
            return sent
        finally:
            producer.shutdown()

    return await asyncio.to_thread(send)


def events(lines: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    errors = [line for line in lines if line["event"] == "error"]
    assert not errors, errors
    return [line for line in lines if line["event"] == kind]


async def test_a_simple_consumer_receives_and_acks_what_a_4x_producer_sent(tmp_path: Path) -> None:
    async with platform(tmp_path / "store") as p:
        await routed(p)
        sent = await send_4x(p, 20)
        lines = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-simple", "drain", "20", "30", home=tmp_path / "h"
        )
        got = events(lines, "received")
        assert {g["message_id"]: g["body"] for g in got} == sent and len(got) == 20  # each once
        for g in got:
            assert g["tag"] == "TagB" and sorted(g["keys"]) == sorted([f"k{g['body'][3:]}", "shared"])
            assert g["properties"] == {"n": g["body"][3:]} and g["attempt"] == 1
        store = p.broker.store
        assert store is not None
        committed = store.consumer_offsets.query_offsets("v5-simple", TOPIC)
        assert sum(committed.values()) == 20  # acked: the group's offsets moved past all
        status = p.broker.pop.status("v5-simple")  # type: ignore[union-attr]
        assert sum(row["inFlight"] for row in status) == 0


async def test_an_unacked_message_comes_back_and_a_changed_duration_holds_it(tmp_path: Path) -> None:
    async with platform(tmp_path / "store") as p:
        await routed(p, queues=1)
        sent = await send_4x(p, 1)
        lines = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-redo", "redeliver", home=tmp_path / "h"
        )
        got = events(lines, "received")
        assert [(g["body"], g["attempt"]) for g in got] == [("v4-0", 1), ("v4-0", 2)], lines
        assert set(sent.values()) == {"v4-0"}
        changed = events(lines, "changed")[0]["seq"]
        acked = events(lines, "acked")[0]["seq"]
        assert acked == changed + 1  # nothing was received while the change held it
        assert p.broker.pop.status("v5-redo")[0]["inFlight"] == 0  # type: ignore[union-attr]


async def test_past_its_max_attempts_a_message_lands_in_the_groups_dlq(tmp_path: Path) -> None:
    async with platform(tmp_path / "store") as p:
        await routed(p, queues=1)
        p.broker.groups.update(SubscriptionGroupConfig("v5-dlq", retry_max_times=1))  # 2 attempts
        await send_4x(p, 1)
        lines = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-dlq", "abandon", "4", home=tmp_path / "h"
        )
        assert [g["attempt"] for g in events(lines, "received")] == [1, 2]
        store = p.broker.store
        assert store is not None and store.wait_dispatched()
        dead = store.get_message(dlq_topic("v5-dlq"), 0, 0, 8)
        assert len(dead.messages) == 1


async def test_a_fifo_group_keeps_each_message_group_in_order_across_two_consumers(tmp_path: Path) -> None:
    async with platform(tmp_path / "store") as p:
        await routed(p, queues=2)
        p.broker.groups.update(SubscriptionGroupConfig("v5-fifo", consume_message_orderly=True))
        store = p.broker.store
        assert store is not None
        order: dict[str, list[str]] = defaultdict(list)
        for i in range(6):
            for group, queue in (("A", 0), ("B", 0), ("C", 1)):
                body = f"{group}{i}"
                store.put_message(MessageInner(TOPIC, queue, body.encode(), {"__SHARDINGKEY": group}))
                order[group].append(body)
        assert store.wait_dispatched()
        lines = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-fifo", "fifo", "18", home=tmp_path / "h"
        )
        received = events(lines, "received")
        acking = events(lines, "acking")
        for group, bodies in order.items():
            mine = [r for r in received if r["message_group"] == group]
            assert [r["body"] for r in mine] == bodies, (group, mine)
            # One in flight at a time: each is received only after the one before was acked.
            acks = {a["body"]: a["seq"] for a in acking}
            for before, after in zip(mine, mine[1:], strict=False):
                assert acks[before["body"]] < after["seq"]
        assert {r["consumer"] for r in received} == {0, 1}  # both consumers took part


async def test_a_push_consumer_consumes_everything_once(tmp_path: Path) -> None:
    async with platform(tmp_path / "store") as p:
        await routed(p)
        sent = await send_4x(p, 30)
        lines = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-push", "push", "30", home=tmp_path / "h"
        )
        got = events(lines, "consumed")
        assert sorted(g["message_id"] for g in got) == sorted(sent)


async def test_what_a_v5_producer_sends_a_v5_consumer_receives_as_sent(tmp_path: Path) -> None:
    async with platform(tmp_path / "store") as p:
        await routed(p, mixed=True)
        produced = await run_v5("producer_child.py", p.proxy.address, TOPIC, "5", home=tmp_path / "h")
        ids = {line["message_id"] for line in produced if "message_id" in line}
        assert len(ids) == 16, produced  # normal, FIFO and a timer message
        lines = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-both", "drain", "16", "30", home=tmp_path / "h"
        )
        got = events(lines, "received")
        assert {g["message_id"] for g in got} == ids
        for g in got:
            assert g["tag"] == "TagA" and g["keys"] == [f"key-{g['body']}"]
            assert g["properties"]["origin"] == "v5"
            assert (g["message_group"] or "").startswith("group-") == g["body"].startswith("fifo-")


async def test_a_broker_restart_mid_consumption_redelivers_only_what_was_not_acked(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with run_namesrv() as ns:
        async with run_broker(store, ns.address) as broker:
            port = broker.port
            broker.topics.update(TopicConfig(TOPIC, 2, 2))
            await broker.registration.register_all()  # type: ignore[union-attr]
            proxy = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
            await proxy.start()
            p = Platform(ns, broker, proxy)
            sent = await send_4x(p, 10)
            first = await run_v5(
                "consumer_child.py",
                proxy.address,
                TOPIC,
                "v5-restart",
                "drain",
                "4",
                "3",
                home=tmp_path / "h",
            )
        async with run_broker(store, ns.address, listen_port=port) as broker:
            second = await run_v5(
                "consumer_child.py",
                proxy.address,
                TOPIC,
                "v5-restart",
                "drain",
                "6",
                "30",
                home=tmp_path / "h2",
            )
            await proxy.close()
    acked_before = {g["message_id"] for g in events(first, "acked")}
    left_in_flight = {g["message_id"] for g in events(first, "received")} - acked_before
    after = events(second, "received")
    assert len(acked_before) == 4
    # Everything arrives; what was acked before the restart never comes again, what was
    # handed out and not acked comes back with its attempt raised.
    assert acked_before | {g["message_id"] for g in after} == set(sent)
    assert not acked_before & {g["message_id"] for g in after}
    assert len(after) == len({g["message_id"] for g in after})
    assert {g["message_id"] for g in after if g["attempt"] == 2} == left_in_flight


async def test_bad_consumer_requests_get_their_status_and_the_proxy_serves_on(tmp_path: Path) -> None:
    async with platform(tmp_path / "store", auto_create_subscription_group=False) as p:
        await routed(p)
        p.broker.groups.update(SubscriptionGroupConfig("known"))
        await send_4x(p, 1)
        async with grpc.aio.insecure_channel(p.proxy.address) as channel:
            stub = grpc_svc.MessagingServiceStub(channel)

            async def receive(**fields: Any) -> list[Any]:
                request = svc.ReceiveMessageRequest(
                    group=pb.Resource(name=fields.pop("group", "known")),
                    message_queue=pb.MessageQueue(topic=pb.Resource(name=fields.pop("topic", TOPIC))),
                    **fields,
                )
                return [r async for r in stub.ReceiveMessage(request, timeout=10)]

            from google.protobuf.duration_pb2 import Duration

            short = {"invisible_duration": Duration(seconds=5), "long_polling_timeout": Duration(seconds=1)}
            assert (await receive(topic="NoSuch", batch_size=1, **short))[0].status.code == pb.TOPIC_NOT_FOUND
            assert (await receive(group="unknown", batch_size=1, **short))[
                0
            ].status.code == pb.CONSUMER_GROUP_NOT_FOUND
            assert (await receive(batch_size=1000, **short))[0].status.code == pb.BAD_REQUEST
            no_time = await receive(batch_size=1, long_polling_timeout=Duration(seconds=1))
            assert no_time[0].status.code == pb.ILLEGAL_INVISIBLE_TIME
            ack = await stub.AckMessage(
                svc.AckMessageRequest(
                    group=pb.Resource(name="known"),
                    topic=pb.Resource(name=TOPIC),
                    entries=[svc.AckMessageEntry(message_id="x", receipt_handle="garbage")],
                ),
                timeout=5,
            )
            assert ack.status.code == pb.INVALID_RECEIPT_HANDLE
            got = await receive(batch_size=4, **short)
            assert got[0].status.code == pb.OK
            [message] = [r.message for r in got if r.HasField("message")]
            assert message.body == b"v4-0" and message.system_properties.delivery_attempt == 1
            stale = await stub.ChangeInvisibleDuration(
                svc.ChangeInvisibleDurationRequest(
                    group=pb.Resource(name="known"),
                    topic=pb.Resource(name=TOPIC),
                    receipt_handle=message.system_properties.receipt_handle,
                    invisible_duration=Duration(seconds=13 * 3600),
                ),
                timeout=5,
            )
            assert stale.status.code == pb.ILLEGAL_INVISIBLE_TIME
            dlq = await stub.ForwardMessageToDeadLetterQueue(
                svc.ForwardMessageToDeadLetterQueueRequest(
                    group=pb.Resource(name="known"),
                    topic=pb.Resource(name=TOPIC),
                    receipt_handle=message.system_properties.receipt_handle,
                    message_id=message.system_properties.message_id,
                    delivery_attempt=1,
                    max_delivery_attempts=17,
                ),
                timeout=5,
            )
            assert dlq.status.code == pb.OK
            store = p.broker.store
            assert store is not None and store.wait_dispatched()
            assert len(store.get_message(dlq_topic("known"), 0, 0, 4).messages) == 1
            assignment = await stub.QueryAssignment(
                svc.QueryAssignmentRequest(topic=pb.Resource(name=TOPIC), group=pb.Resource(name="known")),
                timeout=5,
            )
            assert [a.message_queue.broker.name for a in assignment.assignments] == [
                p.broker.config.broker_name
            ]


async def test_v5_transactions_commit_roll_back_and_are_decided_by_check_back(tmp_path: Path) -> None:
    """Commit, rollback, and two transactions left open that the broker's check-back,
    relayed by the proxy over the producer's Telemetry stream, decides with its checker.
    A v5 consumer then sees exactly the committed ones."""
    settings = {"transaction_check_interval": 1_000, "transaction_time_out": 1_000}
    async with platform(tmp_path / "store", **settings) as p:
        p.broker.topics.update(TopicConfig(TOPIC, 2, 2, attributes={"message.type": "TRANSACTION"}))
        await p.broker.registration.register_all()  # type: ignore[union-attr]
        lines = await run_v5("transaction_child.py", p.proxy.address, TOPIC, "4", home=tmp_path / "h")
        assert not events(lines, "error")
        assert {line["body"] for line in events(lines, "sent")} == {
            "tx-commit",
            "tx-rollback",
            "check-commit",
            "check-rollback",
        }
        checked = {line["body"] for line in events(lines, "check")}
        assert checked == {"check-commit", "check-rollback"}  # only the open ones were asked about
        got = await run_v5(
            "consumer_child.py", p.proxy.address, TOPIC, "v5-tx", "drain", "2", "30", home=tmp_path / "h2"
        )
        assert sorted(g["body"] for g in events(got, "received")) == ["check-commit", "tx-commit"]
        store = p.broker.store
        assert store is not None
        assert sum(store.get_max_offset_in_queue(TOPIC, q) for q in range(2)) == 2  # nothing else


async def test_v5_clients_are_registered_with_the_brokers_by_their_heartbeats(tmp_path: Path) -> None:
    """What the console's connection lists read: a v5 client's heartbeat through the proxy
    registers it with the broker (its language, SDK version, address, gRPC), and its
    termination unregisters it."""
    async with platform(tmp_path / "store") as p:
        await routed(p)
        async with grpc.aio.insecure_channel(p.proxy.address) as channel:
            stub = grpc_svc.MessagingServiceStub(channel)
            metadata = (
                ("x-mq-client-id", "v5-client-1"),
                ("x-mq-language", "PYTHON"),
                ("x-mq-client-version", "5.1.2"),
            )
            beat = svc.HeartbeatRequest(group=pb.Resource(name="v5-watch"), client_type=pb.SIMPLE_CONSUMER)
            assert (await stub.Heartbeat(beat, metadata=metadata, timeout=5)).status.code == pb.OK
            [member] = p.broker.clients.consumer_clients("v5-watch")
            assert (member.client_id, member.language, member.consume_type) == (
                "v5-client-1",
                "PYTHON",
                "CONSUME_POP",
            )
            entry = member.to_json()
            assert entry["versionDesc"] == "5.1.2" and entry["protocol"].startswith("gRPC")
            assert entry["clientAddr"].startswith("127.0.0.1:")
            producer = (("x-mq-client-id", "v5-producer-1"), ("x-mq-language", "PYTHON"))
            await stub.Heartbeat(svc.HeartbeatRequest(client_type=pb.PRODUCER), metadata=producer, timeout=5)
            assert [c.client_id for c in p.broker.clients.producer_clients("PROXY_V5_PRODUCER")] == [
                "v5-producer-1"
            ]
            # The console's running info of a v5 client: answered by the proxy for it.
            async with AdminClient(p.ns.address) as admin:
                info = orjson.loads(await admin.consumer_running_info("v5-watch", "v5-client-1"))
                assert info["properties"]["clientLanguage"] == "PYTHON"
                assert info["properties"]["clientVersion"] == "5.1.2"
                # Consume-directly needs the client's Telemetry stream: none here, said at once.
                stored = p.broker.store.put_message(MessageInner(TOPIC, 0, b"verify me", {}))  # type: ignore[union-attr]
                with pytest.raises(AdminError, match="no open stream"):
                    await admin.consume_message_directly("v5-watch", "v5-client-1", stored.msg_id)
            bye = svc.NotifyClientTerminationRequest(group=pb.Resource(name="v5-watch"))
            assert (
                await stub.NotifyClientTermination(bye, metadata=metadata, timeout=5)
            ).status.code == pb.OK
            assert p.broker.clients.consumer_clients("v5-watch") == []


async def test_a_v5_consumer_with_a_sql92_filter_gets_only_what_it_accepts(tmp_path: Path) -> None:
    """RocketMQ 5's SQL92 ``FilterExpression`` through the proxy: the broker filters (with
    ``enablePropertyFilter``); without it the broker's refusal reaches the client."""
    sql = {"V5_SQL92": "n >= 15 AND TAGS = 'TagB'"}
    async with platform(tmp_path / "store", enable_property_filter=True) as p:
        await routed(p)
        await send_4x(p, 20)  # property n = 0..19
        args = ("consumer_child.py", p.proxy.address, TOPIC, "v5-sql", "drain", "5", "30")
        got = events(await run_v5(*args, home=tmp_path / "h", env=sql), "received")
        assert sorted(int(g["properties"]["n"]) for g in got) == [15, 16, 17, 18, 19]
    async with platform(tmp_path / "store2") as p:
        await routed(p)
        await send_4x(p, 2)
        args = ("consumer_child.py", p.proxy.address, TOPIC, "v5-sql-off", "drain", "1", "30")
        lines = await run_v5(*args, home=tmp_path / "h2", env=sql)
        assert not [line for line in lines if line["event"] == "received"]
        errors = [line["error"] for line in lines if line["event"] == "error"]
        assert errors and "does not support consumer to filter message by SQL92" in errors[0]
