"""SQL92 property filters end to end: our broker and our push, pull and lite-pull consumers.

The broker serves SQL92 only with ``enablePropertyFilter = true`` (RocketMQ's default is
off); off, it refuses as RocketMQ does, at CHECK_CLIENT_CONFIG (so a consumer's start
fails) and on every pull.  A bad expression is refused at ``MessageSelector.by_sql`` in
the client, and by the broker (SUBSCRIPTION_PARSE_FAILED) from a client that does not
check.  With ``filterSupportRetry`` a group's redeliveries are filtered too.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import orjson
import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.common import MessageSelector
from broker_core.client.consumer.litepull import LitePullConsumer
from broker_core.client.consumer.pull import PullConsumer, PullStatus
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.errors import BrokerRefusedError, ClientError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageExt
from broker_core.model.topicconfig import TopicConfig
from broker_core.namesrv.server import NamesrvServer
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import PullSysFlag
from broker_core.testing import run_broker, run_namesrv

from .clusterhelpers import put, started, wait_until_routed
from .test_push_consumer import Collector, until

TOPIC = "SqlTopic"
QUEUES = 2
SELECTOR = "price > 100 AND region IN ('eu', 'us')"


@pytest.fixture
async def cluster(
    tmp_path: Path, request: pytest.FixtureRequest
) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    settings = getattr(request, "param", {"enable_property_filter": True})
    async with run_namesrv() as ns, run_broker(tmp_path / "store", ns.address, **settings) as broker:
        broker.topics.update(TopicConfig(TOPIC, QUEUES, QUEUES, 6))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield ns, broker


def fill(broker: BrokerController) -> set[bytes]:
    """Messages of every kind on both queues; the bodies ``SELECTOR`` accepts."""
    cases = [
        ({"price": "150", "region": "eu"}, True),
        ({"price": "150", "region": "asia"}, False),
        ({"price": "99", "region": "us"}, False),
        ({"price": "1000", "region": "us", "TAGS": "TagB"}, True),
        ({"region": "eu"}, False),  # no price: unknown, no match
        ({"price": "lots", "region": "eu"}, False),  # no number: no match
        ({}, False),
    ]
    wanted = set()
    for queue_id in range(QUEUES):
        for i, (props, match) in enumerate(cases):
            body = f"q{queue_id}-{i}".encode()
            put(broker, TOPIC, queue_id, body, **props)
            if match:
                wanted.add(body)
    assert broker.store is not None and broker.store.wait_dispatched()
    return wanted


def config(ns: NamesrvServer, instance: str) -> ClientConfig:
    return ClientConfig(namesrv_addr=ns.address, instance_name=instance, client_ip="127.0.0.1")


def sql_push(ns: NamesrvServer, group: str, collector: Collector) -> PushConsumer:
    """A push consumer of ``group`` from the first offset, subscribed by ``SELECTOR``."""
    push = PushConsumer(group, config=config(ns, group), consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    return push.subscribe(TOPIC, MessageSelector.by_sql(SELECTOR)).register_listener(collector)


async def test_a_push_consumer_gets_only_what_its_sql92_selector_accepts(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    wanted = fill(broker)
    collector = Collector()
    push = sql_push(ns, "sql-push", collector)
    async with started(push):
        await until(lambda: set(collector.bodies()) >= wanted)
        # New messages are filtered as they arrive (held pulls woken, then filtered).
        put(broker, TOPIC, 0, b"late-yes", price="500", region="us")
        put(broker, TOPIC, 1, b"late-no", price="500", region="mars")
        await until(lambda: b"late-yes" in collector.bodies())
        await asyncio.sleep(0.3)
        # The group's subscription, as the broker (and tools) have it, says SQL92.
        group = broker.clients.subscriptions_of("sql-push")
        assert {(s.topic, s.expression_type, s.expression) for s in group if s.topic == TOPIC} == {
            (TOPIC, "SQL92", SELECTOR)
        }
    assert set(collector.bodies()) == wanted | {b"late-yes"}
    assert all(n == 1 for n in collector.bodies().values())
    # Every queue's offset moved past the messages it skipped, not only the ones it took.
    assert broker.store is not None
    committed = [broker.store.consumer_offsets.query_offset("sql-push", TOPIC, q) for q in range(QUEUES)]
    assert committed == [8, 8]


async def test_pull_and_lite_pull_consumers_take_a_sql92_selector(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    wanted = fill(broker)
    async with started(PullConsumer("sql-pull", config=config(ns, "pull"))) as puller:
        got: set[bytes] = set()
        for queue_id in range(QUEUES):
            mq = MessageQueue(TOPIC, "broker-a", queue_id)
            result = await asyncio.to_thread(puller.pull, mq, MessageSelector.by_sql(SELECTOR), 0, 32)
            assert result.status is PullStatus.FOUND
            assert result.next_begin_offset == 7
            got |= {m.body for m in result.messages}
        assert got == wanted
        # By tag on the same consumer: the tag is still a tag.
        tagged = await asyncio.to_thread(puller.pull, MessageQueue(TOPIC, "broker-a", 0), "TagB", 0, 32)
        assert [m.body for m in tagged.messages] == [b"q0-3"]

    lite = LitePullConsumer(
        "sql-lite", config=config(ns, "lite"), consume_from_where="CONSUME_FROM_FIRST_OFFSET"
    )
    lite.subscribe(TOPIC, MessageSelector.by_sql("TAGS = 'TagB' OR price < 100"))
    async with started(lite):
        polled: list[MessageExt] = []
        async with asyncio.timeout(15):
            while len(polled) < 4:
                polled += await asyncio.to_thread(lite.poll, 500)
    assert sorted(m.body for m in polled) == [b"q0-2", b"q0-3", b"q1-2", b"q1-3"]


def test_a_bad_selector_is_refused_before_anything_is_sent() -> None:
    with pytest.raises(ClientError, match=r"bad SQL92 selector: .* at position 9 "):
        MessageSelector.by_sql("price > AND x = 1")


@pytest.mark.parametrize("cluster", [{}], indirect=True)  # enablePropertyFilter left at its default
async def test_without_enable_property_filter_sql92_is_refused_as_rocketmq_refuses_it(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    fill(broker)
    remark = "The broker does not support consumer to filter message by SQL92"
    push = (
        PushConsumer("sql-off", config=config(ns, "off"))
        .subscribe(TOPIC, MessageSelector.by_sql(SELECTOR))
        .register_listener(lambda msgs: ConsumeStatus.CONSUME_SUCCESS)
    )
    with pytest.raises(BrokerRefusedError) as refused:
        await asyncio.to_thread(push.start)
    assert refused.value.code == ResponseCode.SYSTEM_ERROR and refused.value.remark == remark

    lite = LitePullConsumer("sql-off-lite", config=config(ns, "off-lite"))
    async with started(lite):
        with pytest.raises(BrokerRefusedError, match=remark):
            await asyncio.to_thread(lite.subscribe, TOPIC, MessageSelector.by_sql(SELECTOR))

    async with started(PullConsumer("sql-off-pull", config=config(ns, "off-pull"))) as puller:
        with pytest.raises(BrokerRefusedError) as pulled:
            mq = MessageQueue(TOPIC, "broker-a", 0)
            await asyncio.to_thread(puller.pull, mq, MessageSelector.by_sql(SELECTOR), 0, 32)
    assert pulled.value.code == ResponseCode.SYSTEM_ERROR and pulled.value.remark == remark
    # A tag subscription is served as ever.
    assert broker.config.enable_property_filter is False


async def test_the_broker_refuses_a_bad_expression_from_a_client_that_does_not_check(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    _ns, broker = cluster
    fill(broker)
    client = RemotingClient()
    try:
        sub = {"topic": TOPIC, "subString": "price >> 5", "expressionType": "SQL92", "subVersion": 1}
        body = orjson.dumps({"clientId": "raw@1", "group": "raw-group", "subscriptionData": sub})
        check = RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)
        answer = await client.invoke(broker.address, check)
        assert answer.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        assert "at position 8" in (answer.remark or "")
        tag_sub = dict(sub, subString="TagA", expressionType="TAG")
        body = orjson.dumps({"clientId": "raw@1", "group": "raw-group", "subscriptionData": tag_sub})
        ok = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.CHECK_CLIENT_CONFIG, {}, body)
        )
        assert ok.code == ResponseCode.SUCCESS

        fields = {
            "consumerGroup": "raw-group",
            "topic": TOPIC,
            "queueId": "0",
            "queueOffset": "0",
            "maxMsgNums": "32",
            "sysFlag": str(PullSysFlag.SUBSCRIPTION),
            "commitOffset": "0",
            "suspendTimeoutMillis": "0",
            "subscription": "price >> 5",
            "subVersion": "0",
            "expressionType": "SQL92",
        }
        pulled = await client.invoke(
            broker.address, RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
        )
        assert pulled.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
        # The same pull with a good expression is filtered by the broker.
        good = dict(fields, subscription="price >= 1000")
        found = await client.invoke(broker.address, RemotingCommand.request(RequestCode.PULL_MESSAGE, good))
        assert found.code == ResponseCode.SUCCESS and b"q0-3" in found.body and b"q0-0" not in found.body

        # Java's push consumer pulls without its subscription: the one its heartbeat registered.
        for expression, code in (("price >= 1000", ResponseCode.SUCCESS), ("price >=", 23)):
            consumer = {
                "groupName": "raw-group",
                "consumeType": "CONSUME_PASSIVELY",
                "messageModel": "CLUSTERING",
                "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                "subscriptionDataSet": [
                    {"topic": TOPIC, "subString": expression, "subVersion": 2, "expressionType": "SQL92"}
                ],
            }
            beat = orjson.dumps({"clientID": "raw@1", "producerDataSet": [], "consumerDataSet": [consumer]})
            hello = await client.invoke(
                broker.address, RemotingCommand.request(RequestCode.HEART_BEAT, {}, beat)
            )
            assert hello.code == ResponseCode.SUCCESS
            registered = dict(fields, sysFlag="0", subscription="", subVersion="2")
            pull = RemotingCommand.request(RequestCode.PULL_MESSAGE, registered)
            answer = await client.invoke(broker.address, pull)
            assert answer.code == code, answer.remark
            if code == ResponseCode.SUCCESS:
                assert b"q0-3" in answer.body and b"q0-0" not in answer.body
    finally:
        await client.close()


@pytest.mark.parametrize(
    "cluster", [{"enable_property_filter": True, "filter_support_retry": True}], indirect=True
)
async def test_with_filter_support_retry_redeliveries_are_filtered_too(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    retry = "%RETRY%sql-retry"
    broker.topics.update(TopicConfig(retry, 1, 1, 6))
    broker.topics_changed()
    await wait_until_routed(ns, retry)
    # Redeliveries as the broker's retry topic holds them: the original topic in RETRY_TOPIC.
    put(broker, retry, 0, b"retry-yes", RETRY_TOPIC=TOPIC, price="200", region="eu")
    put(broker, retry, 0, b"retry-no", RETRY_TOPIC=TOPIC, price="5", region="eu")
    put(broker, retry, 0, b"retry-other-topic", RETRY_TOPIC="Elsewhere")
    assert broker.store is not None and broker.store.wait_dispatched()
    collector = Collector()
    push = sql_push(ns, "sql-retry", collector)
    async with started(push):
        await until(lambda: b"retry-yes" in collector.bodies() and b"retry-other-topic" in collector.bodies())
        await asyncio.sleep(0.3)
    assert b"retry-no" not in collector.bodies()
