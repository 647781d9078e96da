"""Pop consumption (RocketMQ 5's POP) over the remoting protocol, against a real broker.

POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME as any remoting client sends them:
hand-out and ack, redelivery with the attempt raised after the invisible time, a changed
invisible time, the DLQ past the group's attempts, FIFO groups, long polling, a restart
keeping what was acked and what was not, and refusals of bad requests.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.requests import BrokerRequests
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.message import MessageExt, iter_records
from broker_core.model.receipt import ReceiptHandle
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.popheaders import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)
from broker_core.testing import run_broker
from broker_core.topics import dlq_topic

from .clusterhelpers import put, raw_client

TOPIC = "PopTopic"
GROUP = "pop-group"


@dataclass
class Got:
    message: MessageExt
    handle: ReceiptHandle

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def attempt(self) -> int:
        return self.message.reconsume_times + 1


class Popper:
    """A remoting pop consumer of one group, as a RocketMQ 5 remoting client would be."""

    def __init__(self, broker: BrokerController, requests: BrokerRequests, group: str = GROUP) -> None:
        self.broker = broker
        self.requests = requests
        self.group = group

    async def pop(
        self, invisible_ms: int = 60_000, max_nums: int = 32, poll_ms: int = 0, queue_id: int = -1
    ) -> list[Got]:
        header = PopMessageRequestHeader(
            self.group,
            TOPIC,
            queue_id=queue_id,
            max_msg_nums=max_nums,
            invisible_time=invisible_ms,
            poll_time=poll_ms,
        )
        response = await self.requests.pop_message(self.broker.address, header, timeout_s=30)
        if response.code == ResponseCode.PULL_NOT_FOUND:
            return []
        assert response.code == ResponseCode.SUCCESS, (response.code, response.remark)
        answer = PopMessageResponseHeader.from_fields(response.ext_fields)
        name = self.broker.config.broker_name
        return [
            Got(m, ReceiptHandle(name, m.queue_id, m.queue_offset, answer.pop_time, answer.invisible_time))
            for m in iter_records(response.body)
        ]

    async def ack(self, got: Got) -> RemotingCommand:
        header = AckMessageRequestHeader(
            self.group, TOPIC, got.handle.queue_id, got.handle.encode(), got.handle.offset
        )
        return await self.requests.ack_message(self.broker.address, header)

    async def change(self, got: Got, invisible_ms: int) -> tuple[RemotingCommand, Got]:
        h = got.handle
        header = ChangeInvisibleTimeRequestHeader(
            self.group, TOPIC, h.queue_id, h.encode(), h.offset, invisible_ms
        )
        response = await self.requests.change_invisible_time(self.broker.address, header)
        if response.code != ResponseCode.SUCCESS:
            return response, got
        answer = ChangeInvisibleTimeResponseHeader.from_fields(response.ext_fields)
        new = ReceiptHandle(h.broker_name, h.queue_id, h.offset, answer.pop_time, answer.invisible_time)
        return response, Got(got.message, new)


@contextlib.asynccontextmanager
async def popper(store: Path, group: str = GROUP, **group_settings: object) -> AsyncIterator[Popper]:
    async with run_broker(store) as broker, raw_client() as client:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        broker.groups.update(SubscriptionGroupConfig(group, **group_settings))  # type: ignore[arg-type]
        requests = BrokerRequests(lambda addr, cmd, timeout: client.invoke(addr, cmd, timeout or 3.0))
        yield Popper(broker, requests, group)


def fill(broker: BrokerController, count: int, queue_id: int | None = None, **props: str) -> list[bytes]:
    bodies = [f"m{i}".encode() for i in range(count)]
    for i, body in enumerate(bodies):
        put(broker, TOPIC, i % 2 if queue_id is None else queue_id, body, **props)
    assert broker.store is not None and broker.store.wait_dispatched()
    return bodies


async def test_pop_hands_out_each_message_once_and_acks_move_the_group_offset(tmp_path: Path) -> None:
    async with popper(tmp_path) as p:
        bodies = fill(p.broker, 10)
        first = await p.pop(max_nums=6)
        second = await p.pop(max_nums=32)
        got = first + second
        assert sorted(g.body for g in got) == sorted(bodies)
        assert {g.attempt for g in got} == {1}
        assert await p.pop() == []  # all in flight
        for g in got:
            assert (await p.ack(g)).code == ResponseCode.SUCCESS
        assert (await p.ack(got[0])).code == ResponseCode.NO_MESSAGE  # acked already
        offsets = p.broker.store.consumer_offsets  # type: ignore[union-attr]
        assert offsets.query_offsets(GROUP, TOPIC) == {0: 5, 1: 5}
        status = await p.requests.pop_status(p.broker.address, GROUP)
        assert sum(b["acked"] for b in status["books"]) == 10
        assert sum(b["inFlight"] for b in status["books"]) == 0


async def test_an_unacked_message_comes_back_with_its_attempt_raised(tmp_path: Path) -> None:
    async with popper(tmp_path) as p:
        fill(p.broker, 1, queue_id=0)
        [first] = await p.pop(invisible_ms=300)
        status = await p.requests.pop_status(p.broker.address, GROUP)
        assert [b["inFlight"] for b in status["books"] if b["queueId"] == 0] == [1]
        [again] = await p.pop(invisible_ms=60_000, poll_ms=5_000)  # held until it comes back
        assert again.body == first.body and again.attempt == 2
        assert (await p.ack(first)).code == ResponseCode.NO_MESSAGE  # the old hand-out's handle
        assert (await p.ack(again)).code == ResponseCode.SUCCESS
        assert await p.pop(invisible_ms=100, poll_ms=400) == []


async def test_change_invisible_duration_holds_a_message_longer_and_renews_its_handle(tmp_path: Path) -> None:
    async with popper(tmp_path) as p:
        fill(p.broker, 1, queue_id=0)
        [got] = await p.pop(invisible_ms=300)
        response, renewed = await p.change(got, 5_000)
        assert response.code == ResponseCode.SUCCESS
        assert await p.pop(poll_ms=700) == []  # would have come back after 300 ms
        assert (await p.ack(got)).code == ResponseCode.NO_MESSAGE  # the handle before the change
        assert (await p.ack(renewed)).code == ResponseCode.SUCCESS


async def test_past_the_groups_attempts_a_message_goes_to_its_dlq(tmp_path: Path) -> None:
    async with popper(tmp_path, retry_max_times=1) as p:  # 2 delivery attempts
        fill(p.broker, 1, queue_id=0)
        [one] = await p.pop(invisible_ms=200)
        [two] = await p.pop(invisible_ms=200, poll_ms=3_000)
        assert (one.attempt, two.attempt) == (1, 2)
        assert await p.pop(invisible_ms=200, poll_ms=800) == []
        store = p.broker.store
        assert store is not None and store.wait_dispatched()
        dead = store.get_message(dlq_topic(GROUP), 0, 0, 8)
        assert [m for m in dead.messages] and len(dead.messages) == 1
        assert store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 1


async def test_a_fifo_group_hands_out_one_message_per_message_group_in_order(tmp_path: Path) -> None:
    async with popper(tmp_path, consume_message_orderly=True) as p:
        for body, group in ((b"a1", "A"), (b"a2", "A"), (b"b1", "B"), (b"a3", "A"), (b"b2", "B")):
            put(p.broker, TOPIC, 0, body, __SHARDINGKEY=group)
        assert p.broker.store is not None and p.broker.store.wait_dispatched()
        seen: list[bytes] = []
        batch = await p.pop()
        assert sorted(g.body for g in batch) == [b"a1", b"b1"]
        while batch:
            for g in batch:
                seen.append(g.body)
                assert (await p.ack(g)).code == ResponseCode.SUCCESS
            batch = await p.pop()
        assert [b for b in seen if b.startswith(b"a")] == [b"a1", b"a2", b"a3"]
        assert [b for b in seen if b.startswith(b"b")] == [b"b1", b"b2"]


async def test_a_fifo_message_not_acked_comes_back_before_the_rest_of_its_group(tmp_path: Path) -> None:
    async with popper(tmp_path, consume_message_orderly=True) as p:
        for body in (b"x1", b"x2"):
            put(p.broker, TOPIC, 0, body, __SHARDINGKEY="X")
        assert p.broker.store is not None and p.broker.store.wait_dispatched()
        [first] = await p.pop(invisible_ms=200)
        [again] = await p.pop(poll_ms=3_000)
        assert (again.body, again.attempt) == (b"x1", 2)
        assert (await p.ack(again)).code == ResponseCode.SUCCESS
        [second] = await p.pop()
        assert second.body == b"x2"


async def test_a_held_pop_is_answered_when_a_message_arrives(tmp_path: Path) -> None:
    async with popper(tmp_path) as p:
        waiting = asyncio.create_task(p.pop(poll_ms=20_000))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        fill(p.broker, 1, queue_id=1)
        got = await asyncio.wait_for(waiting, 10)
        assert [g.body for g in got] == [b"m0"]


async def test_a_restart_keeps_acks_and_in_flight_messages(tmp_path: Path) -> None:
    store = tmp_path / "store"
    async with popper(store) as p:
        fill(p.broker, 6, queue_id=0)
        got = await p.pop(max_nums=4, invisible_ms=3_000)
        acked = {g.body for g in got[:2]}
        for g in got[:2]:
            assert (await p.ack(g)).code == ResponseCode.SUCCESS
        in_flight = {g.body for g in got[2:]}
    async with popper(store) as p:
        fresh = await p.pop(invisible_ms=60_000)
        assert {g.body for g in fresh} == {b"m4", b"m5"}  # never handed out before
        back = await p.pop(invisible_ms=60_000, poll_ms=8_000)
        assert {g.body for g in back} == in_flight and {g.attempt for g in back} == {2}
        assert not acked & {g.body for g in fresh + back}
        for g in fresh + back:
            assert (await p.ack(g)).code == ResponseCode.SUCCESS
        assert p.broker.store is not None
        assert p.broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 6


async def test_bad_pop_requests_are_refused_with_a_reason(tmp_path: Path) -> None:
    async with popper(tmp_path) as p:
        addr = p.broker.address
        garbage = RemotingCommand.request(
            RequestCode.POP_MESSAGE, {"consumerGroup": GROUP, "maxMsgNums": "x"}
        )
        response = await p.requests._send(addr, garbage, None)
        assert response.code == ResponseCode.SYSTEM_ERROR and "malformed pop header" in (
            response.remark or ""
        )
        unknown = PopMessageRequestHeader(GROUP, "NoSuchTopic", max_msg_nums=1, invisible_time=1000)
        response = await p.requests.pop_message(addr, unknown)
        assert response.code == ResponseCode.TOPIC_NOT_EXIST
        bad_ack = AckMessageRequestHeader(GROUP, TOPIC, 0, "not a handle", 0)
        response = await p.requests.ack_message(addr, bad_ack)
        assert response.code == ResponseCode.SYSTEM_ERROR and "receipt handle" in (response.remark or "")
        zero = PopMessageRequestHeader(GROUP, TOPIC, max_msg_nums=1, invisible_time=0)
        assert (await p.requests.pop_message(addr, zero)).code == ResponseCode.SYSTEM_ERROR


@pytest.mark.parametrize("queue_id", [0, 1])
async def test_a_pop_of_one_queue_hands_out_only_that_queue(tmp_path: Path, queue_id: int) -> None:
    async with popper(tmp_path) as p:
        fill(p.broker, 4)
        got = await p.pop(queue_id=queue_id)
        assert {g.message.queue_id for g in got} == {queue_id} and len(got) == 2


async def test_a_message_given_back_wakes_a_held_pop(tmp_path: Path) -> None:
    """A consumer that gives a message back (invisible time changed to 0) has it handed to
    a pop already held, not only to the next one."""
    async with popper(tmp_path) as p:
        fill(p.broker, 1, queue_id=0)
        [got] = await p.pop(invisible_ms=60_000)
        held = asyncio.create_task(p.pop(poll_ms=20_000))
        await asyncio.sleep(0.2)
        response, _ = await p.change(got, 0)
        assert response.code == ResponseCode.SUCCESS
        [again] = await asyncio.wait_for(held, 10)  # well before the held pop's 20 s
        assert (again.body, again.attempt) == (got.body, 2)
