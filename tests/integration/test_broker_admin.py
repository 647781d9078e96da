"""The broker's admin requests through a real broker, with raw protocol frames.

Topic and group tables, topic and consume stats, connections, reset offset, runtime info,
broker config, the maintenance jobs as operations, relays to consumers and the expiry of
silent clients: what the console and the mqadmin-style CLI rely on.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from broker_core.broker.controller import BrokerController
from broker_core.broker.processors import connections
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageInner, decode_record
from broker_core.remoting import fastjson
from broker_core.remoting.client import RemotingClient
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.command import RemotingCommand
from broker_core.testing import run_broker

TOPIC = "AdminOrders"
GROUP = "admin-group"


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    async with run_broker(tmp_path / "store", broker_name="broker-x") as broker:
        yield broker


@pytest.fixture
async def client() -> AsyncIterator[RemotingClient]:
    client = RemotingClient()
    yield client
    await client.close()


async def call(
    client: RemotingClient,
    broker: BrokerController,
    code: int,
    fields: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    language: str = "JAVA",
) -> RemotingCommand:
    request = RemotingCommand.request(code, fields or {}, body)
    request.language = language
    return await client.invoke(broker.address, request)


async def create_topic(client: RemotingClient, broker: BrokerController, topic: str, queues: int) -> None:
    fields = {"topic": topic, "readQueueNums": str(queues), "writeQueueNums": str(queues), "perm": "6"}
    response = await call(client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC, fields)
    assert response.code == ResponseCode.SUCCESS, response.remark


def put(broker: BrokerController, queue_id: int, body: bytes, **props: str) -> Any:
    assert broker.store is not None
    result = broker.store.put_message(MessageInner(TOPIC, queue_id, body, {"TAGS": "t", **props}))
    assert result.status.ok
    return result


async def heartbeat(
    client: RemotingClient, broker: BrokerController, client_id: str, *, language: str = "JAVA"
) -> None:
    body = {
        "clientID": client_id,
        "producerDataSet": [{"groupName": "admin-producers"}],
        "consumerDataSet": [
            {
                "groupName": GROUP,
                "consumeType": 1,
                "messageModel": 1,
                "consumeFromWhere": 0,
                "subscriptionDataSet": [{"topic": TOPIC, "subString": "TagA || TagB", "subVersion": 7}],
            }
        ],
    }
    response = await call(client, broker, RequestCode.HEART_BEAT, body=orjson.dumps(body), language=language)
    assert response.code == ResponseCode.SUCCESS


async def commit(client: RemotingClient, broker: BrokerController, queue_id: int, offset: int) -> None:
    fields = {"consumerGroup": GROUP, "topic": TOPIC, "queueId": str(queue_id), "commitOffset": str(offset)}
    assert (
        await call(client, broker, RequestCode.UPDATE_CONSUMER_OFFSET, fields)
    ).code == ResponseCode.SUCCESS


async def test_topic_config_and_stats(broker: BrokerController, client: RemotingClient) -> None:
    await create_topic(client, broker, TOPIC, 2)
    for i in range(3):
        put(broker, 0, f"q0-{i}".encode())
    last = put(broker, 1, b"q1-0")
    assert broker.store is not None and broker.store.wait_dispatched()

    configs = orjson.loads((await call(client, broker, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
    assert configs["topicConfigTable"][TOPIC]["writeQueueNums"] == 2
    assert configs["dataVersion"]["counter"] > 0
    names = orjson.loads((await call(client, broker, RequestCode.GET_TOPIC_NAME_LIST)).body)["topicList"]
    assert TOPIC in names

    stats = await call(client, broker, RequestCode.GET_TOPIC_STATS_INFO, {"topic": TOPIC})
    assert stats.code == ResponseCode.SUCCESS
    # Java tools read MessageQueue objects as map keys: the raw body carries them so.
    assert b'{"brokerName":"broker-x","queueId":0,"topic":"AdminOrders"}:' in stats.body
    table = fastjson.loads(stats.body)["offsetTable"]
    q0, q1 = MessageQueue(TOPIC, "broker-x", 0), MessageQueue(TOPIC, "broker-x", 1)
    assert table[q0]["minOffset"] == 0 and table[q0]["maxOffset"] == 3
    assert table[q1]["maxOffset"] == 1
    stored = broker.store.get_message_store_timestamp(TOPIC, 1, 0)
    assert table[q1]["lastUpdateTimestamp"] == stored > 0 and last.queue_offset == 0

    missing = await call(client, broker, RequestCode.GET_TOPIC_STATS_INFO, {"topic": "NoSuchTopic"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST

    refused = await call(client, broker, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": "SCHEDULE_TOPIC_XXXX"})
    assert refused.code == ResponseCode.SYSTEM_ERROR and "system topic" in (refused.remark or "")
    await commit(client, broker, 0, 2)
    deleted = await call(client, broker, RequestCode.DELETE_TOPIC_IN_BROKER, {"topic": TOPIC})
    assert deleted.code == ResponseCode.SUCCESS
    assert broker.topics.get(TOPIC) is None
    assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == -1

    # Created again, the topic's queues go on numbering; the put counters count one message.
    await create_topic(client, broker, TOPIC, 2)
    puts_before = broker.stats.puts.total
    put(broker, 0, b"again")
    assert broker.store.wait_dispatched()
    assert broker.stats.puts.total == puts_before + 1

    shrink = {"topic": "SCHEDULE_TOPIC_XXXX", "readQueueNums": "1", "writeQueueNums": "1", "perm": "6"}
    system = await call(client, broker, RequestCode.UPDATE_AND_CREATE_TOPIC, shrink)
    assert system.code == ResponseCode.SYSTEM_ERROR and "system topic" in (system.remark or "")
    assert broker.topics.get("SCHEDULE_TOPIC_XXXX").write_queue_nums == 18  # type: ignore[union-attr]


async def test_consume_stats_connections_and_who_consumes(
    broker: BrokerController, client: RemotingClient
) -> None:
    await create_topic(client, broker, TOPIC, 2)
    for i in range(5):
        put(broker, 0, f"m{i}".encode(), TAGS="TagA")
    assert broker.store is not None and broker.store.wait_dispatched()
    await heartbeat(client, broker, "10.0.0.9@4242", language="CPP")
    await commit(client, broker, 0, 2)
    pull = {
        "consumerGroup": GROUP,
        "topic": TOPIC,
        "queueId": "0",
        "queueOffset": "2",
        "maxMsgNums": "32",
        "sysFlag": "0",
        "commitOffset": "0",
        "suspendTimeoutMillis": "0",
        "subscription": "*",
    }
    pulled = await call(client, broker, RequestCode.PULL_MESSAGE, pull)
    assert pulled.code == ResponseCode.SUCCESS

    response = await call(client, broker, RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP})
    assert response.code == ResponseCode.SUCCESS
    stats = fastjson.loads(response.body)
    row = stats["offsetTable"][MessageQueue(TOPIC, "broker-x", 0)]
    assert row["brokerOffset"] == 5 and row["consumerOffset"] == 2
    assert row["lastTimestamp"] == broker.store.get_message_store_timestamp(TOPIC, 0, 1)
    assert stats["offsetTable"][MessageQueue(TOPIC, "broker-x", 1)]["brokerOffset"] == 0
    # The three messages pulled count towards the group's rate in the next second.
    await asyncio.sleep(1.05)
    assert broker.stats.get_tps(GROUP, TOPIC, seconds=2) > 0
    again = fastjson.loads(
        (await call(client, broker, RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP})).body
    )
    assert again["consumeTps"] > 0

    # A group unknown here gets an empty table, as from a Java broker.
    unknown = await call(client, broker, RequestCode.GET_CONSUME_STATS, {"consumerGroup": "never-seen"})
    assert unknown.code == ResponseCode.SUCCESS and fastjson.loads(unknown.body)["offsetTable"] == {}
    # Offsets left on a topic the online group no longer subscribes to are not measured.
    await create_topic(client, broker, "LeftBehind", 1)
    left = {"consumerGroup": GROUP, "topic": "LeftBehind", "queueId": "0", "commitOffset": "0"}
    assert (await call(client, broker, RequestCode.UPDATE_CONSUMER_OFFSET, left)).code == ResponseCode.SUCCESS
    measured = fastjson.loads(
        (await call(client, broker, RequestCode.GET_CONSUME_STATS, {"consumerGroup": GROUP})).body
    )
    assert {mq.topic for mq in measured["offsetTable"]} == {TOPIC}

    conns = await call(client, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": GROUP})
    body = orjson.loads(conns.body)
    assert [c["clientId"] for c in body["connectionSet"]] == ["10.0.0.9@4242"]
    assert body["connectionSet"][0]["language"] == "CPP"
    assert body["connectionSet"][0]["version"] == 401  # the frame's version, not a subVersion
    assert body["connectionSet"][0]["clientAddr"].startswith("127.0.0.1:")
    sub = body["subscriptionTable"][TOPIC]
    assert (
        sub["subString"] == "TagA || TagB" and sub["tagsSet"] == ["TagA", "TagB"] and sub["subVersion"] == 7
    )
    assert body["messageModel"] == "CLUSTERING" and body["consumeType"] == "CONSUME_PASSIVELY"
    assert body["consumeFromWhere"] == "CONSUME_FROM_LAST_OFFSET"
    offline = await call(
        client, broker, RequestCode.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "nobody"}
    )
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE

    producers = await call(
        client, broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "admin-producers"}
    )
    assert [c["clientId"] for c in orjson.loads(producers.body)["connectionSet"]] == ["10.0.0.9@4242"]
    no_producers = await call(
        client, broker, RequestCode.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "x"}
    )
    assert no_producers.code == ResponseCode.SYSTEM_ERROR

    who = orjson.loads(
        (await call(client, broker, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": TOPIC})).body
    )
    assert who["groupList"] == [GROUP]
    offsets = orjson.loads((await call(client, broker, RequestCode.GET_ALL_CONSUMER_OFFSET)).body)
    assert offsets["offsetTable"][f"{TOPIC}@{GROUP}"]["0"] == 2


async def test_reset_offset_by_time_commits_and_tells_online_consumers(
    broker: BrokerController, client: RemotingClient
) -> None:
    await create_topic(client, broker, TOPIC, 1)
    for i in range(6):
        put(broker, 0, f"m{i}".encode())
        time.sleep(0.005)  # distinct store times
    assert broker.store is not None and broker.store.wait_dispatched()
    third = broker.store.get_message_store_timestamp(TOPIC, 0, 2)
    notices: list[RemotingCommand] = []
    client.register(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, lambda req, conn: notices.append(req))
    await heartbeat(client, broker, "cpp-client", language="CPP")
    await commit(client, broker, 0, 5)

    fields = {"topic": TOPIC, "group": GROUP, "timestamp": str(third), "isForce": "true"}
    reset = await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    assert reset.code == ResponseCode.SUCCESS
    assert fastjson.loads(reset.body)["offsetTable"] == {MessageQueue(TOPIC, "broker-x", 0): 2}
    assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 2
    for _ in range(50):
        if notices:
            break
        await asyncio.sleep(0.02)
    (notice,) = notices
    # The C++ client reads booleans with atoi and parses only the array form.
    assert notice.ext_fields["isForce"] == "1" and notice.ext_fields["group"] == GROUP
    assert orjson.loads(notice.body)["offsetTable"] == [
        {"brokerName": "broker-x", "queueId": 0, "topic": TOPIC, "offset": 2}
    ]

    # Without force an offset never moves forward...
    fields.update(timestamp="-1", isForce="false")
    kept = await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields, language="CPP")
    assert orjson.loads(kept.body)["offsetTable"][0]["offset"] == 2
    # ...with force it does: -1 is the queue's end.
    fields["isForce"] = "true"
    await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, fields)
    assert broker.store.consumer_offsets.query_offset(GROUP, TOPIC, 0) == 6

    # An offline group is reset too: it resumes from the new offsets.
    broker.store.consumer_offsets.commit_offset("test", "offline-group", TOPIC, 0, 4)
    offline = {"topic": TOPIC, "group": "offline-group", "timestamp": "0", "isForce": "true"}
    assert (await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, offline)).code == 0
    assert broker.store.consumer_offsets.query_offset("offline-group", TOPIC, 0) == 0
    # A group the broker never heard of (a typo) is refused, not created.
    typo = {"topic": TOPIC, "group": "admin-gruop", "timestamp": "0", "isForce": "true"}
    refused = await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, typo)
    assert refused.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST and "updateSubGroup" in (
        refused.remark or ""
    )
    assert broker.store.consumer_offsets.query_offset("admin-gruop", TOPIC, 0) == -1

    nothing = {"topic": "NoSuchTopic", "group": GROUP, "timestamp": "0", "isForce": "true"}
    assert (await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, nothing)).code == 17
    bad = {"topic": TOPIC, "group": GROUP, "timestamp": "yesterday"}
    answer = await call(client, broker, RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, bad)
    assert answer.code == ResponseCode.SYSTEM_ERROR and "timestamp" in (answer.remark or "")


async def test_subscription_groups(broker: BrokerController, client: RemotingClient) -> None:
    config = {"groupName": "billing", "retryMaxTimes": 3, "consumeBroadcastEnable": False}
    created = await call(
        client, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=orjson.dumps(config)
    )
    assert created.code == ResponseCode.SUCCESS
    table = orjson.loads((await call(client, broker, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)).body)
    assert table["subscriptionGroupTable"]["billing"]["retryMaxTimes"] == 3
    assert broker.groups.get("billing").retry_max_times == 3  # type: ignore[union-attr]

    for bad in (b"not json", b"[1]", orjson.dumps({"groupName": "billing", "retryMaxTimes": "many"})):
        answer = await call(client, broker, RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=bad)
        assert answer.code == ResponseCode.SYSTEM_ERROR and answer.remark
    assert broker.groups.get("billing").retry_max_times == 3  # type: ignore[union-attr]

    assert broker.store is not None
    broker.store.consumer_offsets.commit_offset("test", "billing", "SomeTopic", 0, 9)
    gone = await call(
        client, broker, RequestCode.DELETE_SUBSCRIPTIONGROUP, {"groupName": "billing", "removeOffset": "true"}
    )
    assert gone.code == ResponseCode.SUCCESS
    assert broker.groups.get("billing") is None
    assert broker.store.consumer_offsets.query_offset("billing", "SomeTopic", 0) == -1


@pytest.fixture
async def requests_only_broker(tmp_path: Path) -> AsyncIterator[BrokerController]:
    """A broker whose maintenance runs only on request (``standaloneMaintenance = false``)."""
    async with run_broker(
        tmp_path / "store", broker_name="broker-x", standalone_maintenance="false"
    ) as broker:
        yield broker


async def test_runtime_info_broker_config_and_maintenance_jobs(
    requests_only_broker: BrokerController, client: RemotingClient
) -> None:
    broker = requests_only_broker
    await create_topic(client, broker, TOPIC, 1)
    for i in range(4):
        put(broker, 0, f"m{i}".encode())
    # A level-1 delayed message (1 s) waits for the delay scan; no timers run it here.
    assert broker.store is not None
    put(broker, 0, b"late", DELAY="1")
    assert broker.store.wait_dispatched()
    await asyncio.sleep(1.1)

    scan = await call(client, broker, RequestCode.QUIVER_RUN_MAINTENANCE_JOB, {"job": "delay_scan"})
    assert scan.code == ResponseCode.SUCCESS
    run = orjson.loads(scan.body)
    assert run["job"] == "delay_scan" and run["ok"] and run["details"]["delivered"] == 1
    assert broker.store.wait_dispatched()
    assert broker.store.get_max_offset_in_queue(TOPIC, 0) == 5

    await commit(client, broker, 0, 3)
    persisted = await call(
        client, broker, RequestCode.QUIVER_RUN_MAINTENANCE_JOB, {"job": "offset_persistence"}
    )
    assert persisted.code == ResponseCode.SUCCESS
    saved = orjson.loads((broker.store.root / "config" / "consumerOffset.json").read_bytes())
    assert saved["offsetTable"][f"{TOPIC}@{GROUP}"]["0"] == 3

    expiry = await call(client, broker, RequestCode.TRIGGER_DELETE_FILES)
    assert expiry.code == ResponseCode.SUCCESS and orjson.loads(expiry.body)["job"] == "file_expiry"

    unknown = await call(client, broker, RequestCode.QUIVER_RUN_MAINTENANCE_JOB, {"job": "defrag"})
    assert unknown.code == ResponseCode.SYSTEM_ERROR and "delay_scan" in (unknown.remark or "")

    status = orjson.loads((await call(client, broker, RequestCode.QUIVER_GET_MAINTENANCE_STATUS)).body)
    assert status["mode"] == "false" and set(status["jobs"]) == {
        "delay_scan",
        "offset_persistence",
        "file_expiry",
    }
    scanned = status["jobs"]["delay_scan"]
    assert scanned["lastRun"]["startedMs"] >= broker.boot_timestamp
    # Requests without driver=platform are an operator's: they renew no lease.
    assert scanned["lastRun"]["runner"] == "manual" and scanned["driver"] == "none"
    assert status["jobs"]["file_expiry"]["lastRun"]["runner"] == "manual"

    await asyncio.sleep(1.05)  # let the per-second rate buckets close
    info = orjson.loads((await call(client, broker, RequestCode.GET_BROKER_RUNTIME_INFO)).body)["table"]
    assert all(isinstance(v, str) for v in info.values())
    # Four plain, one into the delay topic, and its delivery into the real topic.
    assert int(info["msgPutTotalTodayNow"]) == 6
    assert info["brokerName"] == "broker-x" and info["bootTimestamp"] == str(broker.boot_timestamp)
    assert int(info["commitLogMaxOffset"]) == broker.store.commit_log.max_offset
    assert float(info["putTps"].split()[0]) > 0
    assert info["maintenance.delay_scan.lastRunTimestamp"] == str(scanned["lastRun"]["startedMs"])
    assert info["standaloneMaintenance"] == "false" and info["maintenance.delay_scan.driver"] == "none"

    config = await call(client, broker, RequestCode.GET_BROKER_CONFIG)
    lines = dict(line.split("=", 1) for line in config.body.decode().splitlines())
    assert lines["brokerName"] == "broker-x" and lines["listenPort"] == str(broker.port)
    assert lines["brokerIP1"] == "127.0.0.1" and lines["flushDiskType"] == "ASYNC_FLUSH"
    assert orjson.loads(config.ext_fields["version"])["counter"] > 0


async def test_running_info_and_consume_directly_are_relayed_to_the_consumer(
    broker: BrokerController, client: RemotingClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    await create_topic(client, broker, TOPIC, 1)
    stored = put(broker, 0, b"direct")
    assert broker.store is not None and broker.store.wait_dispatched()
    seen: list[RemotingCommand] = []

    def running_info(request: RemotingCommand, conn: Any) -> RemotingCommand:
        seen.append(request)
        return request.response(body=b'{"mqTable":}')  # the C++ client's invalid JSON, relayed as is

    client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running_info)
    await heartbeat(client, broker, "relay-client")
    fields = {"consumerGroup": GROUP, "clientId": "relay-client", "jstackEnable": "false"}
    answer = await call(client, broker, RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
    assert answer.code == ResponseCode.SUCCESS and answer.body == b'{"mqTable":}'
    assert seen[0].ext_fields["clientId"] == "relay-client"
    fields["clientId"] = "ghost"
    absent = await call(client, broker, RequestCode.GET_CONSUMER_RUNNING_INFO, fields)
    assert absent.code == ResponseCode.SYSTEM_ERROR and "ghost" in (absent.remark or "")

    # A consumer that never answers (as the C++ client does) gives a clear error, not a hang.
    async def never_answer(request: RemotingCommand, conn: Any) -> RemotingCommand:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    client.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, never_answer)
    monkeypatch.setattr(connections, "FORWARD_TIMEOUT_S", 0.3)
    direct = {
        "consumerGroup": GROUP,
        "clientId": "relay-client",
        "msgId": stored.msg_id,
        "brokerName": "broker-x",
    }
    silent = await call(client, broker, RequestCode.CONSUME_MESSAGE_DIRECTLY, direct)
    assert silent.code == ResponseCode.CONSUME_MSG_TIMEOUT and "did not answer" in (silent.remark or "")

    def consume_directly(request: RemotingCommand, conn: Any) -> RemotingCommand:
        record = decode_record(request.body)
        return request.response(
            body=orjson.dumps({"consumeResult": "CR_SUCCESS", "body": record.body.decode()})
        )

    client.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, consume_directly)
    done = await call(client, broker, RequestCode.CONSUME_MESSAGE_DIRECTLY, direct)
    assert orjson.loads(done.body) == {"consumeResult": "CR_SUCCESS", "body": "direct"}
    direct["msgId"] = "zz"
    assert (await call(client, broker, RequestCode.CONSUME_MESSAGE_DIRECTLY, direct)).code == 1


async def test_silent_clients_expire_and_their_group_is_told(tmp_path: Path) -> None:
    settings = {"client_channel_expired_time": 800, "client_housekeeping_interval": 100}
    async with run_broker(tmp_path / "store", **settings) as broker:
        quiet, chatty = RemotingClient(), RemotingClient()
        notified: list[str] = []
        chatty.register(
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED,
            lambda req, conn: notified.append(req.ext_fields["consumerGroup"]),
        )
        try:
            await heartbeat(quiet, broker, "quiet")
            for _ in range(20):  # chatty keeps heartbeating; quiet said one word only
                await heartbeat(chatty, broker, "chatty")
                await asyncio.sleep(0.1)
            assert broker.clients.consumer_ids(GROUP) == ["chatty"]
            assert broker.clients.producer_clients("admin-producers")[0].client_id == "chatty"
            assert not quiet.connections  # the broker closed the silent client's connection
            assert GROUP in notified
        finally:
            await quiet.close()
            await chatty.close()


async def test_broker_config_changes_live_and_refuses_what_needs_a_restart(tmp_path: Path) -> None:
    from broker_core.testing import run_namesrv

    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "store", ns.address, broker_name="broker-x") as broker,
    ):
        client = RemotingClient()
        try:
            await create_topic(client, broker, TOPIC, 1)

            async def update(text: bytes) -> RemotingCommand:
                return await call(client, broker, RequestCode.UPDATE_BROKER_CONFIG, body=text)

            for bad, words in (
                (b"listenPort=1234", "cannot change while the broker runs"),
                (b"noSuchKey=1", "unknown broker setting"),
                (b"brokerPermission=lots", "not a valid int"),
                (b"brokerPermission=99", "0..15"),
                (b"transactionCheckInterval=0", "must be positive"),
                (b"autoCreateTopicEnable=true\njust words", "key=value"),
            ):
                refused = await update(bad)
                assert refused.code == ResponseCode.SYSTEM_ERROR and words in (refused.remark or ""), refused
            assert broker.config.auto_create_topic_enable is False  # all or nothing

            assert (await update(b"# read only\nbrokerPermission = 4\n")).code == ResponseCode.SUCCESS
            assert broker.config.broker_permission == 4
            fields = {"producerGroup": "p", "topic": TOPIC, "queueId": "0", "properties": ""}
            send = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, b"x")
            assert (await client.invoke(broker.address, send)).code == ResponseCode.NO_PERMISSION

            async def advertised_perm() -> int:
                route = await client.invoke(
                    ns.address, RemotingCommand.request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": TOPIC})
                )
                return int(fastjson.loads(route.body)["queueDatas"][0]["perm"])

            for _ in range(50):
                if await advertised_perm() == 4:
                    break
                await asyncio.sleep(0.05)
            assert await advertised_perm() == 4
            lines = (await call(client, broker, RequestCode.GET_BROKER_CONFIG)).body.decode()
            assert "brokerPermission=4\n" in lines
            # The stored table keeps the topic's own permission; only the routes show the broker's.
            configs = orjson.loads((await call(client, broker, RequestCode.GET_ALL_TOPIC_CONFIG)).body)
            assert configs["topicConfigTable"][TOPIC]["perm"] == 6

            assert broker.topics.get("TBW102") is None
            assert (await update(b"autoCreateTopicEnable=true")).code == ResponseCode.SUCCESS
            assert broker.topics.get("TBW102") is not None  # auto-creation works from now on
        finally:
            await client.close()
