"""Settings the broker stores take effect against a real broker: a group's consumeEnable and
consumeBroadcastEnable, autoCreateSubscriptionGroup, retries sent straight to
``%RETRY%<group>`` past their maximum, DELETE_EXPIRED_COMMITLOG, shortPollingTimeMills, and
the start-time warning for a broker.conf key Quiver parses but does not act on.

Requests are raw protocol frames (what a client sends), except where our own pull consumer
shows the remark an application would see.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.pull import PullConsumer
from broker_core.errors import BrokerRefusedError
from broker_core.messagequeue import MessageQueue
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.message import decode_record, encode_properties
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.remoting.headers import PullMessageRequestHeader, PullSysFlag
from broker_core.testing import cli_server, run_broker, run_namesrv
from broker_core.topics import TOOLS_CONSUMER_GROUP, dlq_topic, retry_topic

from .clusterhelpers import put, raw_client, started, wait_until_routed

TOPIC = "SwitchTopic"
GROUP = "switch-group"


async def invoke(
    client: RemotingClient, broker: BrokerController, code: int, fields: dict[str, Any], body: bytes = b""
) -> RemotingCommand:
    request = RemotingCommand.request(code, {k: str(v) for k, v in fields.items()}, body)
    return await client.invoke(broker.address, request, 30)


async def pull(
    client: RemotingClient,
    broker: BrokerController,
    group: str = GROUP,
    *,
    offset: int = 0,
    suspend_ms: int = 0,
    with_subscription: bool = True,
) -> RemotingCommand:
    """PULL_MESSAGE of queue 0 of TOPIC, carrying its subscription unless told otherwise."""
    sys_flag = PullSysFlag(0)
    if with_subscription:
        sys_flag |= PullSysFlag.SUBSCRIPTION
    if suspend_ms:
        sys_flag |= PullSysFlag.SUSPEND
    header = PullMessageRequestHeader(
        group, TOPIC, 0, offset, sys_flag=sys_flag, suspend_timeout_millis=suspend_ms
    )
    fields = dict(header.to_fields())
    return await invoke(client, broker, RequestCode.PULL_MESSAGE, fields)


async def update_group(
    client: RemotingClient, broker: BrokerController, config: SubscriptionGroupConfig
) -> None:
    body = orjson.dumps(config.to_json())
    response = await invoke(client, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, {}, body)
    assert response.code == ResponseCode.SUCCESS, response.remark


def heartbeat_body(
    group: str, model: str = "CLUSTERING", producer: str | None = None, client_id: str | None = None
) -> bytes:
    """A Java-style heartbeat of one consumer of ``group`` subscribed to TOPIC."""
    return orjson.dumps(
        {
            "clientID": client_id or f"127.0.0.1@{group}",
            "producerDataSet": [{"groupName": producer}] if producer else [],
            "consumerDataSet": [
                {
                    "groupName": group,
                    "consumeType": "CONSUME_PASSIVELY",
                    "messageModel": model,
                    "consumeFromWhere": "CONSUME_FROM_FIRST_OFFSET",
                    "subscriptionDataSet": [{"topic": TOPIC, "subString": "*", "subVersion": 1}],
                }
            ],
        }
    )


async def with_topic(broker: BrokerController, messages: int = 1) -> None:
    broker.topics.update(TopicConfig(TOPIC, 1, 1, 6))
    for i in range(messages):
        put(broker, TOPIC, 0, f"m{i}".encode(), TAGS="T")
    assert broker.store is not None and broker.store.wait_dispatched()


async def test_a_group_with_consume_enable_false_is_refused_until_it_is_set_back(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, raw_client() as client:
        await with_topic(broker)
        await update_group(client, broker, SubscriptionGroupConfig(GROUP, consume_enable=False))

        refused = await pull(client, broker)
        assert refused.code == ResponseCode.NO_PERMISSION
        assert refused.remark is not None
        assert f"subscription group no permission, {GROUP}" in refused.remark
        assert "consumeEnable" in refused.remark
        # Other groups are not affected.
        assert (await pull(client, broker, "other-group")).code == ResponseCode.SUCCESS

        await update_group(client, broker, SubscriptionGroupConfig(GROUP, consume_enable=True))
        resumed = await pull(client, broker)
        assert resumed.code == ResponseCode.SUCCESS and resumed.ext_fields["nextBeginOffset"] == "1"


async def test_a_broadcasting_consumer_is_refused_when_the_group_forbids_broadcast(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, raw_client() as client:
        await with_topic(broker)
        await update_group(client, broker, SubscriptionGroupConfig(GROUP, consume_broadcast_enable=False))
        beat = await invoke(client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body(GROUP, "BROADCASTING"))
        assert beat.code == ResponseCode.SUCCESS

        for with_subscription in (False, True):  # the C++ consumer carries its subscription
            refused = await pull(client, broker, with_subscription=with_subscription)
            assert refused.code == ResponseCode.NO_PERMISSION
            assert "can not consume by broadcast way" in (refused.remark or "")
            assert "consumeBroadcastEnable" in (refused.remark or "")

        # The same group consuming by clustering is served.
        beat = await invoke(client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body(GROUP, "CLUSTERING"))
        assert beat.code == ResponseCode.SUCCESS
        assert (await pull(client, broker, with_subscription=False)).code == ResponseCode.SUCCESS
        # And broadcasting is served again once the group allows it.
        await invoke(client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body(GROUP, "BROADCASTING"))
        await update_group(client, broker, SubscriptionGroupConfig(GROUP, consume_broadcast_enable=True))
        assert (await pull(client, broker)).code == ResponseCode.SUCCESS


async def test_without_auto_create_unknown_groups_are_refused_at_heartbeat_and_pull(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, raw_client() as client:
        await with_topic(broker)
        # A live setting: switched off on the running broker.
        changed = await invoke(
            client, broker, RequestCode.UPDATE_BROKER_CONFIG, {}, b"autoCreateSubscriptionGroup=false\n"
        )
        assert changed.code == ResponseCode.SUCCESS, changed.remark

        body = heartbeat_body("unknown-group", producer="some-producers")
        beat = await invoke(client, broker, RequestCode.HEART_BEAT, {}, body)
        assert beat.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "subscription group not exist, unknown-group" in (beat.remark or "")
        assert "autoCreateSubscriptionGroup" in (beat.remark or "")
        # The unknown group is neither registered nor given a retry topic; the producer is.
        assert broker.clients.consumer_ids("unknown-group") == []
        assert broker.topics.get(retry_topic("unknown-group")) is None
        assert broker.clients.producer_groups() == ["some-producers"]
        assert "unknown-group" not in broker.groups.all()

        refused = await pull(client, broker, "unknown-group")
        assert refused.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "subscription group not exist, unknown-group" in (refused.remark or "")
        # RocketMQ's tools group still browses messages, and reading is not consuming: the
        # broker's consumption counters (the dashboard, the traffic report) leave it out.
        assert (await pull(client, broker, TOOLS_CONSUMER_GROUP)).code == ResponseCode.SUCCESS
        assert not any(group == TOOLS_CONSUMER_GROUP for group, _topic in broker.stats.group_gets)

        # Once created, the group is served.
        await update_group(client, broker, SubscriptionGroupConfig("unknown-group"))
        beat = await invoke(client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body("unknown-group"))
        assert beat.code == ResponseCode.SUCCESS
        assert broker.topics.get(retry_topic("unknown-group")) is not None
        assert (await pull(client, broker, "unknown-group")).code == ResponseCode.SUCCESS


async def test_our_pull_consumer_of_an_unknown_group_gets_the_remark(tmp_path: Path) -> None:
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "store", ns.address, auto_create_subscription_group=False) as broker,
    ):
        await with_topic(broker)
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        config = ClientConfig(namesrv_addr=ns.address, instance_name="switches", client_ip="127.0.0.1")
        async with started(PullConsumer("unregistered", config=config)) as consumer:
            mq = MessageQueue(TOPIC, broker.config.broker_name, 0)
            with pytest.raises(BrokerRefusedError) as refused:
                await asyncio.to_thread(consumer.pull, mq, "*", 0)
        assert refused.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "subscription group not exist, unregistered" in str(refused.value)
        assert "autoCreateSubscriptionGroup" in str(refused.value)


def send_to_retry(
    group: str, reconsume_times: int, *, v2: bool, max_times: int | None = None, **properties: str
) -> tuple[int, dict[str, str]]:
    """SEND_MESSAGE(_V2) fields of a message sent straight to ``%RETRY%<group>``, as Java's
    consumer sends one when its send-back fails."""
    props = {"UNIQ_KEY": "C0A80001000018B4AAC2" + "0" * 12, "RETRY_TOPIC": TOPIC, **properties}
    fields = {
        "producerGroup": "CLIENT_INNER_PRODUCER",
        "topic": retry_topic(group),
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": "0",
        "sysFlag": "0",
        "bornTimestamp": str(int(time.time() * 1000)),
        "flag": "0",
        "properties": encode_properties(props).decode(),
        "reconsumeTimes": str(reconsume_times),
        "unitMode": "false",
        "batch": "false",
    }
    if max_times is not None:
        fields["maxReconsumeTimes"] = str(max_times)
    if not v2:
        return RequestCode.SEND_MESSAGE, fields
    letters = {
        "producerGroup": "a", "topic": "b", "defaultTopic": "c", "defaultTopicQueueNums": "d",
        "queueId": "e", "sysFlag": "f", "bornTimestamp": "g", "flag": "h", "properties": "i",
        "reconsumeTimes": "j", "unitMode": "k", "maxReconsumeTimes": "l", "batch": "m",
    }  # fmt: skip
    return RequestCode.SEND_MESSAGE_V2, {letters[k]: v for k, v in fields.items()}


def dlq_bodies(broker: BrokerController, group: str) -> list[bytes]:
    assert broker.store is not None and broker.store.wait_dispatched()
    result = broker.store.get_message(dlq_topic(group), 0, 0, 32)
    return [decode_record(m).body for m in result.messages]


async def test_a_retry_sent_straight_past_its_maximum_lands_in_the_dlq(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store") as broker, raw_client() as client:
        await update_group(client, broker, SubscriptionGroupConfig(GROUP, retry_max_times=2))
        beat = await invoke(client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body(GROUP))
        assert beat.code == ResponseCode.SUCCESS  # creates %RETRY%<group>

        code, fields = send_to_retry(GROUP, 1, v2=True, DELAY="4")
        below = await invoke(client, broker, code, fields, b"below")
        assert below.code == ResponseCode.SUCCESS
        assert broker.topics.get(dlq_topic(GROUP)) is None

        for v2, body in ((True, b"v2"), (False, b"v1")):
            code, fields = send_to_retry(GROUP, 2, v2=v2, DELAY="5")
            answer = await invoke(client, broker, code, fields, body)
            assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["queueId"] == "0"
        # The header's maxReconsumeTimes, else the message's property, overrides retryMaxTimes.
        code, fields = send_to_retry(GROUP, 3, v2=True, max_times=5)
        assert (await invoke(client, broker, code, fields, b"header-allows")).code == ResponseCode.SUCCESS
        code, fields = send_to_retry(GROUP, 1, v2=False, MAX_RECONSUME_TIMES="1")
        assert (await invoke(client, broker, code, fields, b"property-forbids")).code == ResponseCode.SUCCESS

        assert dlq_bodies(broker, GROUP) == [b"v2", b"v1", b"property-forbids"]
        dlq = broker.topics.get(dlq_topic(GROUP))
        assert dlq is not None and dlq.write_queue_nums == 1
        assert broker.store is not None
        dead = decode_record(broker.store.get_message(dlq_topic(GROUP), 0, 0, 1).messages[0])
        assert "DELAY" not in dead.properties and dead.reconsume_times == 2
        assert dead.properties["RETRY_TOPIC"] == TOPIC
        # Those below their maximum stay retries: delayed ones wait in the schedule topic.
        retried = broker.store.get_message(retry_topic(GROUP), 0, 0, 32).messages
        assert [decode_record(m).body for m in retried] == [b"header-allows"]
        # A batch to a retry topic is refused, as RocketMQ does: each message needs its own decision.
        code, fields = send_to_retry(GROUP, 0, v2=False)
        batch = await invoke(
            client, broker, RequestCode.SEND_BATCH_MESSAGE, {**fields, "batch": "true"}, b"x"
        )
        assert batch.code == ResponseCode.MESSAGE_ILLEGAL and "retry topic" in (batch.remark or "")


async def test_a_retry_sent_for_an_unknown_group_is_refused_without_auto_create(tmp_path: Path) -> None:
    async with run_broker(tmp_path / "store", auto_create_subscription_group=False) as broker:
        broker.topics.update(TopicConfig(retry_topic("ghost"), 1, 1, 6))
        async with raw_client() as client:
            code, fields = send_to_retry("ghost", 20, v2=True)
            answer = await invoke(client, broker, code, fields, b"x")
        assert answer.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        assert "subscription group not exist, ghost" in (answer.remark or "")


async def test_notify_consumer_ids_changed_enable_false_leaves_members_to_their_own_timer(
    tmp_path: Path,
) -> None:
    async with run_broker(tmp_path / "store") as broker, raw_client() as first, raw_client() as second:
        told: list[str] = []
        first.register(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            lambda req, conn: told.append(req.ext_fields["consumerGroup"]),
        )
        for group, enable in (("quiet-group", False), ("told-group", True)):
            await update_group(
                first, broker, SubscriptionGroupConfig(group, notify_consumer_ids_changed_enable=enable)
            )
            for client, name in ((first, "first"), (second, "second")):  # the second joins: ids changed
                beat = await invoke(
                    client, broker, RequestCode.HEART_BEAT, {}, heartbeat_body(group, client_id=name)
                )
                assert beat.code == ResponseCode.SUCCESS
        await asyncio.sleep(0.5)  # a oneway notice is on its way or nothing is
        assert "told-group" in told and "quiet-group" not in told


def commit_log_segments(broker: BrokerController) -> list[str]:
    assert broker.store is not None
    return sorted(p.name for p in (broker.store.root / "commitlog").iterdir())


async def test_delete_expired_commitlog_removes_expired_segments_on_request(tmp_path: Path) -> None:
    # fileReservedTime 0: every sealed segment is expired; deleteWhen is an hour that may not
    # be now, and the request deletes anyway (a manual deletion, as in RocketMQ).
    store = {"mapped_file_size_commit_log": 64 * 1024, "file_reserved_time": 0}
    async with run_broker(tmp_path / "store", store=store) as broker, raw_client() as client:
        broker.topics.update(TopicConfig(TOPIC, 1, 1, 6))
        for i in range(800):
            put(broker, TOPIC, 0, b"%0200d" % i)
        assert broker.store is not None and broker.store.wait_dispatched()
        before = commit_log_segments(broker)
        assert len(before) >= 3
        await asyncio.sleep(0.05)  # the sealed segments' times are now strictly in the past

        answer = await invoke(client, broker, RequestCode.DELETE_EXPIRED_COMMITLOG, {})
        assert answer.code == ResponseCode.SUCCESS, answer.remark
        after = commit_log_segments(broker)
        assert after == before[-1:], "every sealed segment is gone, the one being written stays"
        assert broker.store.commit_log.min_offset == int(after[0])
        assert broker.store.check() == []


async def test_short_polling_holds_an_empty_pull_for_short_polling_time_mills(tmp_path: Path) -> None:
    async with (
        run_broker(tmp_path / "store", long_polling_enable=False, short_polling_time_mills=1000) as broker,
        raw_client() as client,
    ):
        await with_topic(broker)
        started_at = time.monotonic()
        held = await pull(client, broker, offset=1, suspend_ms=20_000)
        assert held.code == ResponseCode.PULL_NOT_FOUND
        assert held.ext_fields["nextBeginOffset"] == "1"
        assert time.monotonic() - started_at < 10, "held for the client's 20 s, not shortPollingTimeMills"
        # Held, not answered at once: a message stored while the pull waits is in its answer.
        waiting = asyncio.create_task(pull(client, broker, offset=1, suspend_ms=20_000))
        await asyncio.sleep(0.2)
        put(broker, TOPIC, 0, b"stored while the pull was held", TAGS="T")
        answer = await waiting
        assert answer.code == ResponseCode.SUCCESS and answer.ext_fields["nextBeginOffset"] == "2"

        # A live setting, like longPollingEnable.
        body = b"shortPollingTimeMills=50\n"
        changed = await invoke(client, broker, RequestCode.UPDATE_BROKER_CONFIG, {}, body)
        assert changed.code == ResponseCode.SUCCESS and broker.config.short_polling_time_mills == 50


def test_the_broker_cli_refuses_a_slave_without_a_slave_id_with_a_sentence(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(
        "brokerName = broker-slave\nbrokerIP1 = 127.0.0.1\nlistenPort = 0\n"
        f"storePathRootDir = {tmp_path / 'store'}\nmappedFileSizeCommitLog = 1048576\n"
        "warmMappedFileEnable = false\nbrokerRole = SLAVE\n"
    )
    with (
        pytest.raises(RuntimeError, match="brokerRole = SLAVE needs a brokerId above 0"),
        cli_server("broker", conf),
    ):
        pass
    conf.write_text(conf.read_text() + "brokerId = 1\n")
    with cli_server("broker", conf) as (proc, _address):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0
        assert proc.stderr is not None
        assert "not supported" not in proc.stderr.read()
