"""Requests a broker sends to our consumers, answered as RocketMQ's Java client answers them.

A real nameserver and broker on loopback; our push and pull consumers run their client
instances on their own threads.  CONSUME_MESSAGE_DIRECTLY goes the console's way (an
AdminClient through the broker); the others are sent by the broker over the connection
the consumer opened, as a broker does.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client import AdminClient, AdminError
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.litepull import LitePullConsumer
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageExt, encode_properties
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.remoting import fastjson
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker, run_namesrv
from broker_core.topics import dlq_topic, retry_topic

from .clusterhelpers import put, wait_until_routed

TOPIC = "DirectTopic"
GROUP = "direct-group"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address) as broker:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield ns, broker


class ConsoleTarget:
    """A listener that takes ``ok``, wants ``later`` again later, raises on ``boom`` and
    answers nothing for ``none``."""

    def __init__(self) -> None:
        self.seen: list[MessageExt] = []
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus | None:
        with self.lock:
            self.seen.extend(msgs)
        if msgs[0].body == b"boom":
            raise ValueError("the listener cannot take boom")
        if msgs[0].body == b"none":
            return None
        return ConsumeStatus.RECONSUME_LATER if msgs[0].body == b"later" else ConsumeStatus.CONSUME_SUCCESS


def push_consumer(ns: NamesrvServer, listener: ConsoleTarget, **options: object) -> PushConsumer:
    """A consumer of TOPIC (for whom ``past_everything`` has committed the queues' ends)."""
    config = ClientConfig(namesrv_addr=ns.address, instance_name="direct")
    push = PushConsumer(GROUP, config=config, **options)  # type: ignore[arg-type]
    return push.subscribe(TOPIC, "*").register_listener(listener)


def past_everything(broker: BrokerController) -> None:
    """The group has consumed all of TOPIC already: in the normal flow its consumer gets
    none of the stored messages, only the ones a console has it consume directly."""
    assert broker.store is not None and broker.store.wait_dispatched()
    for queue_id in range(2):
        end = broker.store.get_max_offset_in_queue(TOPIC, queue_id)
        broker.store.consumer_offsets.commit_offset("test", GROUP, TOPIC, queue_id, end)


async def until(predicate, timeout: float = 10.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


async def ask_consumer(broker: BrokerController, client_id: str, request: RemotingCommand) -> RemotingCommand:
    """Send ``request`` to our consumer over its connection to the broker, as the broker does."""
    client = broker.clients.consumer_client(GROUP, client_id)
    assert client is not None, "the consumer has not announced itself"
    return await client.conn.request(request, 3.0)


@pytest.mark.parametrize("orderly", [False, True], ids=["concurrently", "orderly"])
async def test_it_consumes_a_message_directly_for_the_console_and_changes_nothing(
    cluster: tuple[NamesrvServer, BrokerController], orderly: bool
) -> None:
    ns, broker = cluster
    ids = {
        body: put(broker, TOPIC, 0, body, TAGS="T", UNIQ_KEY=f"U-{body.decode()}")
        for body in (b"ok", b"later", b"boom", b"none")
    }
    past_everything(broker)
    listener = ConsoleTarget()
    push = push_consumer(ns, listener, orderly=orderly)
    await asyncio.to_thread(push.start)
    client_id = push.config.client_id
    try:
        await until(lambda: len(push.consumer_status(TOPIC)) == 2)
        async with AdminClient(ns.address) as admin:
            ok = await admin.consume_message_directly(GROUP, client_id, ids[b"ok"])
            later = await admin.consume_message_directly(GROUP, client_id, ids[b"later"])
            boom = await admin.consume_message_directly(GROUP, client_id, ids[b"boom"])
            none = await admin.consume_message_directly(GROUP, client_id, ids[b"none"])
        offsets = push.consumer_status(TOPIC)
    finally:
        await asyncio.to_thread(push.shutdown)
    assert ok["consumeResult"] == "CR_SUCCESS" and "remark" not in ok
    assert (ok["order"], ok["autoCommit"]) == (orderly, True) and isinstance(ok["spentTimeMills"], int)
    assert later["consumeResult"] == "CR_LATER"
    assert boom["consumeResult"] == "CR_THROW_EXCEPTION"
    assert "ValueError: the listener cannot take boom" in boom["remark"]
    assert none["consumeResult"] == "CR_RETURN_NULL"
    # The listener saw each message once, as stored, and only through the console.
    assert [(m.body, m.topic, m.queue_offset, m.tags) for m in listener.seen] == [
        (b"ok", TOPIC, 0, "T"),
        (b"later", TOPIC, 1, "T"),
        (b"boom", TOPIC, 2, "T"),
        (b"none", TOPIC, 3, "T"),
    ]
    # Nothing was sent back, nothing committed past where the consumer stands (the end).
    assert broker.store is not None
    assert broker.store.get_max_offset_in_queue(retry_topic(GROUP), 0) == 0
    assert broker.store.get_max_offset_in_queue(dlq_topic(GROUP), 0) == 0
    assert offsets[MessageQueue(TOPIC, "broker-a", 0)] == 4
    assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 4


async def test_a_redelivered_message_is_consumed_directly_under_its_own_topic(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    broker.topics.update(TopicConfig(retry_topic(GROUP), 1, 1))
    msg_id = put(broker, retry_topic(GROUP), 0, b"ok", RETRY_TOPIC=TOPIC)
    past_everything(broker)
    assert broker.store is not None  # the redelivery was consumed too
    broker.store.consumer_offsets.commit_offset("test", GROUP, retry_topic(GROUP), 0, 1)
    listener = ConsoleTarget()
    push = push_consumer(ns, listener)
    await asyncio.to_thread(push.start)
    try:
        async with AdminClient(ns.address) as admin:
            result = await admin.consume_message_directly(GROUP, push.config.client_id, msg_id)
    finally:
        await asyncio.to_thread(push.shutdown)
    assert result["consumeResult"] == "CR_SUCCESS"
    assert [m.topic for m in listener.seen] == [TOPIC]


async def test_it_tells_the_broker_its_offsets_and_answers_every_other_request(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    for i in range(3):
        put(broker, TOPIC, 1, f"m-{i}".encode())
    past_everything(broker)
    push = push_consumer(ns, ConsoleTarget())
    await asyncio.to_thread(push.start)
    client_id = push.config.client_id
    try:
        await until(lambda: len(push.consumer_status(TOPIC)) == 2)
        status = await ask_consumer(
            broker,
            client_id,
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT,
                {"topic": TOPIC, "group": GROUP, "clientAddr": ""},
            ),
        )
        everything = await ask_consumer(
            broker,
            client_id,
            RemotingCommand.request(RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"group": GROUP}),
        )
        stranger = await ask_consumer(
            broker,
            client_id,
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": TOPIC, "group": "other"}
            ),
        )
        props = encode_properties({"CORRELATION_ID": "c-1", "REPLY_TO_CLIENT": client_id}).decode()
        reply = await ask_consumer(
            broker,
            client_id,
            RemotingCommand.request(
                RequestCode.PUSH_REPLY_MESSAGE_TO_CLIENT, {"topic": TOPIC, "properties": props}, b"reply"
            ),
        )
        unknown = await ask_consumer(broker, client_id, RemotingCommand.request(RequestCode.PULL_MESSAGE))
        not_ours = await ask_consumer(
            broker,
            client_id,
            RemotingCommand.request(
                RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "other", "clientId": client_id}
            ),
        )
    finally:
        await asyncio.to_thread(push.shutdown)
    assert status.code == ResponseCode.SUCCESS
    table = fastjson.loads(status.body)
    assert table["messageQueueTable"] == {
        MessageQueue(TOPIC, "broker-a", 0): 0,
        MessageQueue(TOPIC, "broker-a", 1): 3,
    }
    # No topic named: every queue held, the group's retry topic included.
    assert set(fastjson.loads(everything.body)["messageQueueTable"]) == {
        MessageQueue(TOPIC, "broker-a", 0),
        MessageQueue(TOPIC, "broker-a", 1),
        MessageQueue(retry_topic(GROUP), "broker-a", 0),
    }
    assert fastjson.loads(stranger.body)["messageQueueTable"] == {}
    assert reply.code == ResponseCode.SUCCESS
    assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert not_ours.code == ResponseCode.SYSTEM_ERROR and "not exist in this consumer" in (
        not_ours.remark or ""
    )


async def test_a_pull_consumer_says_why_it_cannot_consume_directly_and_gives_its_offsets(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    msg_id = put(broker, TOPIC, 0, b"ok")
    config = ClientConfig(namesrv_addr=ns.address, instance_name="pull-direct")
    pull = LitePullConsumer(GROUP, config=config)
    pull.subscribe(TOPIC)
    await asyncio.to_thread(pull.start)
    mq = MessageQueue(TOPIC, "broker-a", 0)
    try:
        await asyncio.to_thread(pull.update_offset, mq, 1)
        await until(lambda: broker.clients.consumer_client(GROUP, config.client_id) is not None)
        async with AdminClient(ns.address) as admin:
            with pytest.raises(AdminError, match="no message listener") as refused:
                await admin.consume_message_directly(GROUP, config.client_id, msg_id)
        status = await ask_consumer(
            broker,
            config.client_id,
            RemotingCommand.request(
                RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT, {"topic": TOPIC, "group": GROUP}
            ),
        )
    finally:
        await asyncio.to_thread(pull.shutdown)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR
    assert fastjson.loads(status.body)["messageQueueTable"][mq] == 1
