"""The proxy's offset RPCs and PullMessage (``broker_core.proxy.offsets``) over real gRPC,
against a real nameserver and broker: a committed offset read back, a queue's offsets by
policy and by time, batches pulled in order with a tag filter, an offset outside the queue
answered with where to pull from, a long poll answered when a message arrives, a broker
refusal and bad requests answered with their status, and a broker that is gone answered
with PROXY_TIMEOUT.

The RPCs go through a real ``ProxyServer`` (``broker_core.proxy.server``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from google.protobuf.duration_pb2 import Duration
from google.protobuf.timestamp_pb2 import Timestamp

from broker_core.broker.controller import BrokerController
from broker_core.model.message import MessageInner
from broker_core.model.topicconfig import TopicConfig
from broker_core.proxy.config import ProxyConfig
from broker_core.proxy.server import ProxyServer
from broker_core.proxy.stubs import load
from broker_core.store.store import MessageStore
from broker_core.testing import run_broker, run_namesrv

pb, svc, grpc_svc = load()

TOPIC = "ByOffset"
GROUP = "pullers"


@dataclass
class Pulled:
    """One PullMessage answer: its status code, messages and next offset."""

    code: int
    messages: list[Any]
    next_offset: int | None
    shape: list[str]  # which field each streamed response carried, in order


class Proxy:
    """A stub to the wired service, with one helper per RPC."""

    def __init__(self, stub: Any, broker_name: str) -> None:
        self.stub = stub
        self.broker_name = broker_name

    def queue(self, queue_id: int = 0, *, topic: str = TOPIC, broker: str | None = None) -> Any:
        return pb.MessageQueue(
            topic=pb.Resource(name=topic),
            id=queue_id,
            broker=pb.Broker(name=self.broker_name if broker is None else broker),
        )

    async def update(self, offset: int, queue: Any = None, group: str = GROUP) -> int:
        request = svc.UpdateOffsetRequest(
            group=pb.Resource(name=group), message_queue=queue or self.queue(), offset=offset
        )
        return int((await self.stub.UpdateOffset(request, timeout=10)).status.code)

    async def get(self, queue: Any = None, group: str = GROUP) -> tuple[int, int]:
        request = svc.GetOffsetRequest(group=pb.Resource(name=group), message_queue=queue or self.queue())
        answer = await self.stub.GetOffset(request, timeout=10)
        return answer.status.code, answer.offset

    async def query(self, policy: int, queue: Any = None, **fields: Any) -> tuple[int, int]:
        request = svc.QueryOffsetRequest(
            message_queue=queue or self.queue(), query_offset_policy=policy, **fields
        )
        answer = await self.stub.QueryOffset(request, timeout=10)
        return answer.status.code, answer.offset

    async def pull(
        self, offset: int, batch: int = 32, *, tags: str | None = None, poll_ms: int = 0, **fields: Any
    ) -> Pulled:
        request = svc.PullMessageRequest(
            group=pb.Resource(name=fields.pop("group", GROUP)),
            message_queue=fields.pop("queue", None) or self.queue(),
            offset=offset,
            batch_size=batch,
            long_polling_timeout=Duration(seconds=poll_ms // 1000, nanos=(poll_ms % 1000) * 1_000_000),
            **fields,
        )
        if tags is not None:
            request.filter_expression.CopyFrom(pb.FilterExpression(type=pb.TAG, expression=tags))
        code, messages, next_offset, shape = -1, [], None, []
        async for response in self.stub.PullMessage(request, timeout=poll_ms / 1000 + 15):
            kind = response.WhichOneof("content")
            shape.append(kind)
            if kind == "status":
                code = response.status.code
            elif kind == "message":
                messages.append(response.message)
            else:
                next_offset = response.next_offset
        return Pulled(code, messages, next_offset, shape)


@contextlib.asynccontextmanager
async def serving(store_dir: Path, **broker_settings: Any) -> AsyncIterator[tuple[BrokerController, Proxy]]:
    """A nameserver, a broker with ``TOPIC`` (2 queues) and the wired service in front."""
    async with run_namesrv() as ns, run_broker(store_dir, ns.address, **broker_settings) as broker:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        await broker.registration.register_all()  # type: ignore[union-attr]
        server = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
        await server.start()
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                yield broker, Proxy(grpc_svc.MessagingServiceStub(channel), broker.config.broker_name)
        finally:
            await server.close()


def store_of(broker: BrokerController) -> MessageStore:
    assert broker.store is not None
    return broker.store


def put(broker: BrokerController, bodies: list[str], queue_id: int = 0, tags: str = "TagA") -> None:
    store = store_of(broker)
    for body in bodies:
        store.put_message(
            MessageInner(TOPIC, queue_id, body.encode(), {"TAGS": tags, "UNIQ_KEY": f"id-{body}"})
        )
    assert store.wait_dispatched()


async def test_a_committed_offset_is_read_back_per_group_and_queue(tmp_path: Path) -> None:
    async with serving(tmp_path / "store") as (broker, proxy):
        put(broker, ["a", "b", "c", "d"])
        # A new group on a queue whose first message is still stored starts at 0, as the
        # broker tells every new group (RocketMQ's rule for a young queue).
        assert await proxy.get() == (pb.OK, 0)
        assert await proxy.update(3) == pb.OK
        assert await proxy.update(1, proxy.queue(1)) == pb.OK
        assert await proxy.get() == (pb.OK, 3)
        assert await proxy.get(proxy.queue(1)) == (pb.OK, 1)
        assert await proxy.get(group="others") == (pb.OK, 0)
        assert store_of(broker).consumer_offsets.query_offset(GROUP, TOPIC, 0) == 3


async def test_once_a_queues_first_messages_are_gone_offsets_say_so(tmp_path: Path) -> None:
    async with serving(tmp_path / "store") as (broker, proxy):
        put(broker, [f"m{i}" for i in range(5)])
        store = store_of(broker)
        cq = store.consume_queues.find(TOPIC, 0)
        assert cq is not None
        entry = cq.get(2)
        assert entry is not None
        cq.correct_min_offset(entry[0])  # as expiry does once the log below m2 is deleted
        assert await proxy.query(pb.BEGINNING) == (pb.OK, 2)
        status, _ = await proxy.get(group="newcomers")
        assert status == pb.OFFSET_NOT_FOUND  # the Java client then starts at the END
        too_early = await proxy.pull(0)
        assert (too_early.code, too_early.messages, too_early.next_offset) == (pb.ILLEGAL_OFFSET, [], 2)
        from_there = await proxy.pull(too_early.next_offset)
        assert [m.body for m in from_there.messages] == [b"m2", b"m3", b"m4"]


async def test_a_queues_offsets_by_policy_and_by_time(tmp_path: Path) -> None:
    async with serving(tmp_path / "store") as (broker, proxy):
        assert await proxy.query(pb.END) == (pb.OK, 0)  # empty so far
        put(broker, ["a", "b", "c"])
        await asyncio.sleep(0.02)  # the next messages are stored at a later millisecond
        put(broker, ["d", "e"])
        assert await proxy.query(pb.BEGINNING) == (pb.OK, 0)
        assert await proxy.query(pb.END) == (pb.OK, 5)
        assert await proxy.query(pb.END, proxy.queue(1)) == (pb.OK, 0)
        stored = (await proxy.pull(0)).messages
        fourth = stored[3].system_properties.store_timestamp
        assert await proxy.query(pb.TIMESTAMP, timestamp=fourth) == (pb.OK, 3)
        assert await proxy.query(pb.TIMESTAMP, timestamp=Timestamp(seconds=0)) == (pb.OK, 0)
        later = Timestamp(seconds=fourth.seconds + 3600)
        assert await proxy.query(pb.TIMESTAMP, timestamp=later) == (pb.OK, 5)


async def test_pulls_return_batches_in_order_filtered_by_tag(tmp_path: Path) -> None:
    async with serving(tmp_path / "store") as (broker, proxy):
        for i in range(6):
            put(broker, [f"m{i}"], tags="TagA" if i % 2 == 0 else "TagB")
        first = await proxy.pull(0, batch=4)
        assert first.code == pb.OK and first.next_offset == 4
        assert first.shape == ["status", "message", "message", "message", "message", "next_offset"]
        assert [m.body for m in first.messages] == [b"m0", b"m1", b"m2", b"m3"]
        message = first.messages[1]
        system = message.system_properties
        assert message.topic.name == TOPIC and system.tag == "TagB" and system.message_id == "id-m1"
        assert system.queue_id == 0 and system.queue_offset == 1 and system.delivery_attempt == 1
        assert system.body_digest.type == pb.MD5 and system.body_digest.checksum
        # Pulled, not popped: nothing to ack with, nothing made invisible.
        assert not system.HasField("receipt_handle") and not system.HasField("invisible_duration")
        rest = await proxy.pull(first.next_offset, batch=4)
        assert [m.body for m in rest.messages] == [b"m4", b"m5"] and rest.next_offset == 6
        only_a = await proxy.pull(0, tags="TagA")
        assert [m.body for m in only_a.messages] == [b"m0", b"m2", b"m4"] and only_a.next_offset == 6
        either = await proxy.pull(0, tags="TagB || TagC")
        assert [m.body for m in either.messages] == [b"m1", b"m3", b"m5"]
        none = await proxy.pull(0, tags="TagC")
        assert none.code == pb.MESSAGE_NOT_FOUND and not none.messages and none.next_offset == 6
        # Pulls commit nothing: the group's place is UpdateOffset's to keep.
        assert store_of(broker).consumer_offsets.query_offset(GROUP, TOPIC, 0) < 0


async def test_a_pull_at_the_end_or_outside_the_queue_says_where_to_pull_from(tmp_path: Path) -> None:
    async with serving(tmp_path / "store") as (broker, proxy):
        empty = await proxy.pull(0)
        assert (empty.code, empty.next_offset) == (pb.MESSAGE_NOT_FOUND, 0)
        put(broker, ["a", "b", "c"])
        at_end = await proxy.pull(3)
        assert (at_end.code, at_end.messages, at_end.next_offset) == (pb.MESSAGE_NOT_FOUND, [], 3)
        assert at_end.shape == ["status", "next_offset"]
        beyond = await proxy.pull(100)
        assert (beyond.code, beyond.messages) == (pb.ILLEGAL_OFFSET, [])
        assert beyond.next_offset == 0  # nothing expired yet: back to the start, as the broker says
        negative = await proxy.pull(-5)
        assert (negative.code, negative.next_offset) == (pb.ILLEGAL_OFFSET, 0)


async def test_a_long_poll_is_answered_when_a_message_arrives(tmp_path: Path) -> None:
    async with serving(tmp_path / "store") as (broker, proxy):
        put(broker, ["a"])
        waiting = asyncio.create_task(proxy.pull(1, poll_ms=15_000))
        await asyncio.sleep(0.5)
        assert not waiting.done()  # held at the broker: nothing to pull yet
        put(broker, ["b"])
        got = await asyncio.wait_for(waiting, 15)
        assert got.code == pb.OK and [m.body for m in got.messages] == [b"b"] and got.next_offset == 2
        # Nothing arriving: the hold ends with MESSAGE_NOT_FOUND and the same offset.
        idle = await proxy.pull(2, poll_ms=300)
        assert (idle.code, idle.next_offset) == (pb.MESSAGE_NOT_FOUND, 2)


async def test_bad_requests_and_refusals_are_answered_with_their_status(tmp_path: Path) -> None:
    async with serving(tmp_path / "store", auto_create_subscription_group=False) as (broker, proxy):
        put(broker, ["a"])
        # An unknown group, refused by the broker's own rule.
        assert (await proxy.pull(0, group="strangers")).code == pb.CONSUMER_GROUP_NOT_FOUND
        from broker_core.model.groupconfig import SubscriptionGroupConfig

        broker.groups.update(SubscriptionGroupConfig(GROUP))
        assert (await proxy.pull(0)).code == pb.OK
        # No group; an unknown topic, broker or queue.
        assert await proxy.update(1, group="") == pb.ILLEGAL_CONSUMER_GROUP
        assert (await proxy.get(group=""))[0] == pb.ILLEGAL_CONSUMER_GROUP
        assert (await proxy.pull(0, group="")).code == pb.ILLEGAL_CONSUMER_GROUP
        assert (await proxy.get(proxy.queue(topic="NoSuchTopic")))[0] == pb.TOPIC_NOT_FOUND
        assert (await proxy.query(pb.END, proxy.queue(topic="")))[0] == pb.ILLEGAL_TOPIC
        assert await proxy.update(1, proxy.queue(broker="nobody")) == pb.BAD_REQUEST
        assert (await proxy.query(pb.END, proxy.queue(broker="")))[0] == pb.BAD_REQUEST
        assert (await proxy.pull(0, queue=proxy.queue(2))).code == pb.BAD_REQUEST
        assert (await proxy.get(proxy.queue(-1)))[0] == pb.BAD_REQUEST
        # Bad values.
        assert await proxy.update(-1) == pb.ILLEGAL_OFFSET
        assert (await proxy.pull(0, batch=0)).code == pb.BAD_REQUEST
        assert (await proxy.pull(0, batch=33)).code == pb.BAD_REQUEST
        assert (await proxy.query(pb.TIMESTAMP))[0] == pb.BAD_REQUEST  # no timestamp
        assert (await proxy.query(7))[0] == pb.BAD_REQUEST  # no such policy
        sql = pb.FilterExpression(type=pb.SQL, expression="a > 1")
        # SQL92 is the broker's to serve, and this one runs without enablePropertyFilter: its
        # refusal (SYSTEM_ERROR, "does not support ... SQL92") comes back as the proxy maps it.
        assert (await proxy.pull(0, filter_expression=sql)).code == pb.INTERNAL_SERVER_ERROR
        # A refusal is a status alone, nothing after it.
        refused = await proxy.pull(0, group="strangers")
        assert refused.shape == ["status"]
        # And the service serves on.
        assert await proxy.update(1) == pb.OK and await proxy.get() == (pb.OK, 1)


async def test_a_broker_that_is_gone_is_answered_with_proxy_timeout(tmp_path: Path) -> None:
    async with run_namesrv() as ns:
        server = ProxyServer(ProxyConfig(namesrv_addr=ns.address, grpc_server_port=0))
        await server.start()
        try:
            async with grpc.aio.insecure_channel(server.address) as channel:
                async with run_broker(tmp_path / "store", ns.address) as broker:
                    broker.topics.update(TopicConfig(TOPIC, 1, 1))
                    await broker.registration.register_all()  # type: ignore[union-attr]
                    proxy = Proxy(grpc_svc.MessagingServiceStub(channel), broker.config.broker_name)
                    assert await proxy.query(pb.END) == (pb.OK, 0)  # the route is now cached
                # The broker stopped; the proxy still routes to it.
                assert (await proxy.query(pb.END))[0] == pb.PROXY_TIMEOUT
                assert (await proxy.get())[0] == pb.PROXY_TIMEOUT
                assert await proxy.update(0) == pb.PROXY_TIMEOUT
                gone = await proxy.pull(0)
                assert (gone.code, gone.shape) == (pb.PROXY_TIMEOUT, ["status"])
        finally:
            await server.close()
