"""The official RocketMQ Java client 4.9.8 against Quiver: sends, the push consumer
(clustering, tags, offsets across restarts), DefaultMQPullConsumer, DefaultLitePullConsumer,
transactions (commit by check-back, immunity, rollback), orderly consumption with a queue
selector, delay level 2, SQL92 filtering (and RocketMQ's refusals), and TLS.

Each test starts our nameserver and broker on free loopback ports and runs the client's
scenarios (``src/``) in JVMs of their own, as applications would run."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from broker_core.broker.controller import BrokerController
from broker_core.model.message import decode_record
from broker_core.model.topicconfig import TopicConfig
from broker_core.testing import run_broker, run_namesrv
from tests.integration.clusterhelpers import wait_until_routed
from tests.tlscerts import make_pki, server_tls

from .conftest import JavaClient, JavaRun

TOPIC = "JavaTopic"
# Properties only Quiver's broker uses inside; a consumer must never see them.
INTERNAL = {"SCHEDULE_OFFSET", "QUIVER_DELIVERED"}


@contextlib.asynccontextmanager
async def servers(
    java_classes: str,
    tmp_path: Path,
    queues: int = 2,
    *,
    namesrv: dict[str, Any] | None = None,
    **broker: Any,
) -> AsyncIterator[tuple[JavaClient, BrokerController]]:
    """Our nameserver and a broker with ``TOPIC`` created (``queues`` queues) and routed,
    and the Java scenarios pointed at them."""
    async with (
        run_namesrv(**(namesrv or {})) as ns,
        run_broker(tmp_path / "store", ns.address, **broker) as server,
    ):
        server.topics.update(TopicConfig(TOPIC, queues, queues, 6))
        server.topics_changed()
        await wait_until_routed(ns, TOPIC)
        yield JavaClient(java_classes, tmp_path, ns.address), server


def sent_ok(events: list[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    sent = [e for e in events if e["event"] == "sent"]
    assert len(sent) == count and all(e["status"] == "SEND_OK" for e in sent), events
    return sent


def messages(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["event"] == "message"]


def indexes(events: list[dict[str, Any]]) -> list[int]:
    return sorted(int(m["properties"]["index"]) for m in messages(events))


def stored(broker: BrokerController, topic: str, queues: int) -> list[Any]:
    store = broker.store
    assert store.wait_dispatched(10)
    found = []
    for queue_id in range(queues):
        offset = 0
        while (result := store.get_message(topic, queue_id, offset, 32)).messages:
            found.extend(decode_record(raw) for raw in result.messages)
            offset = result.next_begin_offset
    return found


def committed(broker: BrokerController, group: str, queues: int) -> dict[int, int]:
    return {q: broker.store.consumer_offsets.query_offset(group, TOPIC, q) for q in range(queues)}


async def test_sync_sends_are_stored_as_the_client_sent_them(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path, 4) as (client, broker):
        sent = sent_ok(await client.run("send", topic=TOPIC, count=8), 8)
        by_id = {m.uniq_key: m for m in stored(broker, TOPIC, 4)}
        assert set(by_id) == {e["msgId"] for e in sent}
        for e in sent:
            msg, i = by_id[e["msgId"]], e["index"]
            assert msg.body == f"body-{i}-é".encode()
            assert msg.tags == ("TagA" if i % 2 == 0 else "TagB") and msg.keys == f"key-{i}"
            assert msg.properties["a"] == str(i)
            assert msg.properties["region"] == ("eu" if i % 2 == 0 else "us")
            assert (msg.queue_id, msg.queue_offset) == (e["queueId"], e["queueOffset"])
        # The producer spreads sends over every queue, round robin.
        assert Counter(e["queueId"] for e in sent) == {0: 2, 1: 2, 2: 2, 3: 2}


async def test_push_consumers_of_one_group_split_the_queues_and_filter_by_tag(
    java_classes: str, tmp_path: Path
) -> None:
    async with servers(java_classes, tmp_path, 4) as (client, broker):
        consumer = dict(group="JavaPush", topic=TOPIC, expr="TagA", assignment="true")
        async with client.start("push", **consumer) as first, client.start("push", **consumer) as second:

            def latest(run: JavaRun) -> list[int]:
                return run.of("assigned")[-1]["queues"] if run.of("assigned") else []

            def split() -> bool:
                return len(latest(first)) == 2 and sorted(latest(first) + latest(second)) == [0, 1, 2, 3]

            # Rebalancing gives each of the two consumers two of the four queues (the first
            # may hold all four until it hears of the second).
            await first.wait_for(lambda _: split())
            owned = [set(latest(first)), set(latest(second))]
            sent_ok(await client.run("send", topic=TOPIC, count=16), 16)
            await first.wait_for(lambda _: len(messages(first.events)) + len(messages(second.events)) >= 8)
            await asyncio.sleep(1.0)  # a duplicate or a TagB message would have come by now
            for run, queues in zip((first, second), owned, strict=True):
                got = messages(await run.finish())
                assert got, "each consumer of the group consumes its half"
                assert {m["queueId"] for m in got} <= queues
                assert {m["tags"] for m in got} == {"TagA"}
            assert sorted(indexes(first.events) + indexes(second.events)) == list(range(0, 16, 2))


async def test_push_consumer_resumes_from_its_committed_offsets_after_a_restart(
    java_classes: str, tmp_path: Path
) -> None:
    async with servers(java_classes, tmp_path) as (client, broker):
        sent_ok(await client.run("send", topic=TOPIC, count=6), 6)
        consumer = dict(group="JavaRestart", topic=TOPIC, linger=1500)
        assert indexes(await client.run("push", expect=6, **consumer)) == list(range(6))
        # Shutting down committed what was consumed to the broker.
        assert sum(committed(broker, "JavaRestart", 2).values()) == 6
        sent_ok(await client.run("send", topic=TOPIC, count=4, first=6), 4)
        # Started again, it goes on from there: nothing consumed before comes back.
        assert indexes(await client.run("push", expect=4, **consumer)) == [6, 7, 8, 9]
        assert sum(committed(broker, "JavaRestart", 2).values()) == 10


async def test_pull_consumer_reads_by_tag_and_commits_its_offsets(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path) as (client, broker):
        sent_ok(await client.run("send", topic=TOPIC, count=10), 10)
        first = await client.run("pull", group="JavaPull", topic=TOPIC, expr="TagA")
        assert not [e for e in first if e["event"] == "pull_failed"], first
        assert indexes(first) == [0, 2, 4, 6, 8]
        queues = {e["queueId"]: e for e in first if e["event"] == "queue"}
        assert {q: (e["start"], e["next"]) for q, e in queues.items()} == {0: (0, 5), 1: (0, 5)}
        assert committed(broker, "JavaPull", 2) == {0: 5, 1: 5}
        # Again: it starts where it committed, and there is nothing new.
        again = await client.run("pull", group="JavaPull", topic=TOPIC, expr="TagA")
        assert messages(again) == []
        assert {e["queueId"]: (e["start"], e["statuses"]) for e in again if e["event"] == "queue"} == {
            0: (5, ["NO_NEW_MSG"]),
            1: (5, ["NO_NEW_MSG"]),
        }


async def test_lite_pull_consumer_polls_everything_and_commits(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path) as (client, broker):
        sent_ok(await client.run("send", topic=TOPIC, count=6), 6)
        events = await client.run("litepull", group="JavaLite", topic=TOPIC, expect=6)
        assert indexes(events) == list(range(6))
        assert committed(broker, "JavaLite", 2) == {0: 3, 1: 3}


# Check-backs every second, for half messages older than a second (RocketMQ: 60 s and 6 s).
QUICK_CHECKS = dict(transaction_check_interval=1000, transaction_time_out=1000)


async def test_transaction_committed_by_check_back(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path, **QUICK_CHECKS) as (client, broker):
        events = await client.run(
            "transaction", group="JavaTxn", topic=TOPIC, local="UNKNOW", answerAt=2, expect=2, linger=3000
        )
        sent = [e for e in events if e["event"] == "sent"]
        assert len(sent) == 1 and sent[0]["localState"] == "UNKNOW", events
        checks = [e for e in events if e["event"] == "check"]
        # Two checks (UNKNOW, then COMMIT), no third: each carries the broker's count.
        assert [(c["checkTimes"], c["answer"]) for c in checks] == [("1", "UNKNOW"), ("2", "COMMIT_MESSAGE")]
        assert {c["transactionId"] for c in checks} == {sent[0]["msgId"]}
        # The committed message as a consumer reads it: RocketMQ's properties, nothing internal.
        read = messages(await client.run("pull", group="JavaTxnReader", topic=TOPIC))
        assert len(read) == 1 and read[0]["msgId"] == sent[0]["msgId"] and read[0]["body"] == "txn-0"
        props = read[0]["properties"]
        assert props["TRAN_MSG"] == "true" and props["PGROUP"] == "JavaTxn"
        assert props["REAL_TOPIC"] == TOPIC and "REAL_QID" in props
        assert not INTERNAL & set(props)


async def test_transaction_check_waits_out_the_immunity(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path, **QUICK_CHECKS) as (client, broker):
        events = await client.run(
            "transaction", group="JavaImmune", topic=TOPIC, local="UNKNOW", immunity=5, expect=1, linger=500
        )
        checks = [e for e in events if e["event"] == "check"]
        assert len(checks) == 1, events
        # No check before CHECK_IMMUNITY_TIME_IN_SECONDS = 5 has passed (the broker's check
        # round runs each second, so it comes within about a second after).
        assert checks[0]["sinceSend"] >= 5000, checks
        assert checks[0]["properties"]["CHECK_IMMUNITY_TIME_IN_SECONDS"] == "5"


async def test_transaction_rolled_back_is_never_delivered_nor_checked(
    java_classes: str, tmp_path: Path
) -> None:
    async with servers(java_classes, tmp_path, **QUICK_CHECKS) as (client, broker):
        async with client.start(
            "transaction", group="JavaRollback", topic=TOPIC, local="ROLLBACK_MESSAGE"
        ) as run:
            await run.wait_for(lambda r: bool(r.of("sent")))
            assert run.of("sent")[0]["localState"] == "ROLLBACK_MESSAGE"
            await asyncio.sleep(3.5)  # three check rounds
            events = await run.finish()
        assert not [e for e in events if e["event"] == "check"], events
        assert messages(await client.run("pull", group="JavaRbReader", topic=TOPIC)) == []


async def test_orderly_consumer_gets_each_order_in_sequence(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path, 4) as (client, broker):
        sent = sent_ok(await client.run("send", topic=TOPIC, count=15, orders=3), 15)
        # The selector put order k in queue k % 4.
        assert {e["index"] % 3: e["queueId"] for e in sent} == {0: 0, 1: 1, 2: 2}
        got = messages(await client.run("push", group="JavaOrderly", topic=TOPIC, orderly="true", expect=15))
        assert len(got) == 15
        for order in range(3):
            steps = [int(m["properties"]["step"]) for m in got if m["properties"]["order"] == str(order)]
            assert steps == [0, 1, 2, 3, 4], (order, steps)


async def test_delay_level_2_arrives_after_five_seconds_with_rocketmqs_properties(
    java_classes: str, tmp_path: Path
) -> None:
    async with (
        servers(java_classes, tmp_path) as (client, broker),
        client.start("push", group="JavaDelay", topic=TOPIC, expect=1, linger=500) as consumer,
    ):
        await consumer.wait_for(lambda r: bool(r.of("started")))
        sent = sent_ok(await client.run("send", topic=TOPIC, delay=2), 1)
        got = messages(await consumer.finish(timeout=60))
        assert len(got) == 1 and got[0]["msgId"] == sent[0]["msgId"]
        # Delivered by the broker's schedule no sooner than level 2 (5 s) after the send.
        assert got[0]["storeTimestamp"] - sent[0]["at"] >= 5000 - 50, (got, sent)
        props = got[0]["properties"]
        assert props["DELAY"] == "2" and props["REAL_TOPIC"] == TOPIC
        assert props["REAL_QID"] == str(sent[0]["queueId"])
        assert not INTERNAL & set(props)


# Even indexes carry region eu, odd us; a = the index.
SQL_CASES = [
    ("a > 5 AND region = 'eu'", [6, 8]),
    ("a BETWEEN 2 AND 4", [2, 3, 4]),
    # RocketMQ's IN takes string literals only.
    ("TAGS = 'TagB' AND a < 4 OR region IN ('xx', 'eu') AND a >= 8", [1, 3, 8]),
    ("NOT (a < 8) OR region IS NULL", [8, 9]),
]


async def test_sql92_selectors_filter_push_pull_and_lite_pull(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path, enable_property_filter=True) as (client, broker):
        sent_ok(await client.run("send", topic=TOPIC, count=10), 10)
        for n, (sql, expected) in enumerate(SQL_CASES):
            pushed = await client.run(
                "push", group=f"JavaSqlPush{n}", topic=TOPIC, sql=sql, expect=len(expected)
            )
            assert indexes(pushed) == expected, (sql, pushed[-3:])
        sql, expected = SQL_CASES[0]
        pulled = await client.run("pull", group="JavaSqlPull", topic=TOPIC, sql=sql)
        assert indexes(pulled) == expected, pulled
        sql, expected = SQL_CASES[1]
        lite = await client.run("litepull", group="JavaSqlLite", topic=TOPIC, sql=sql, expect=len(expected))
        assert indexes(lite) == expected


@pytest.mark.parametrize("scenario", ["push", "litepull"])
async def test_sql92_is_refused_at_start_without_enable_property_filter(
    java_classes: str, tmp_path: Path, scenario: str
) -> None:
    async with servers(java_classes, tmp_path) as (client, broker):
        events = await client.run(scenario, group="JavaSqlOff", topic=TOPIC, sql="a > 5", expect=1)
        failed = [e for e in events if e["event"] == "start_failed"]
        assert failed, events
        assert "The broker does not support consumer to filter message by SQL92" in failed[0]["message"]


async def test_sql92_syntax_error_is_refused_at_start(java_classes: str, tmp_path: Path) -> None:
    async with servers(java_classes, tmp_path, enable_property_filter=True) as (client, broker):
        events = await client.run("push", group="JavaSqlBad", topic=TOPIC, sql="a > AND b", expect=1)
        failed = [e for e in events if e["event"] == "start_failed"]
        assert failed, events
        # SUBSCRIPTION_PARSE_FAILED, saying what is wrong and where.
        assert failed[0]["code"] == 23, failed
        assert "found 'AND' at position 5 of 'a > AND b'" in failed[0]["message"], failed


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return make_pki(tmp_path_factory.mktemp("pki"))


def java_tls(pki: dict[str, str]) -> dict[str, str]:
    """The Java client's TLS settings (system properties): TLS on, the server verified
    against our CA, and a client certificate to present."""
    return {
        "tls.enable": "true",
        "tls.test.mode.enable": "false",
        "tls.client.authServer": "true",
        "tls.client.trustCertPath": pki["ca"],
        "tls.client.certPath": pki["client"],
        "tls.client.keyPath": pki["client_key"],
    }


def broker_tls(pki: dict[str, str]) -> dict[str, Any]:
    """The broker's connections out (to the nameserver) over TLS, as the Java client's."""
    return {
        "tls_enable": True,
        "tls_client_trust_cert_path": pki["ca"],
        "tls_client_cert_path": pki["client"],
        "tls_client_key_path": pki["client_key"],
    }


async def test_tls_enforcing_serves_the_tls_client_and_refuses_a_plain_one(
    java_classes: str, tmp_path: Path, pki: dict[str, str]
) -> None:
    # Both servers require client certificates; the broker shows its own to the nameserver.
    tls = server_tls(
        pki, "enforcing", tls_server_need_client_auth="require", tls_server_trust_cert_path=pki["ca"]
    )
    async with servers(java_classes, tmp_path, namesrv=tls, **tls, **broker_tls(pki)) as (client, broker):
        props = java_tls(pki)
        sent_ok(await client.run("send", topic=TOPIC, count=4, props=props), 4)
        got = await client.run("push", group="JavaTls", topic=TOPIC, expect=4, props=props)
        assert indexes(got) == [0, 1, 2, 3]
        plain = await client.run("send", topic=TOPIC, count=1, first=100)
        assert [e["event"] for e in plain] == ["send_failed"], plain
        assert len(stored(broker, TOPIC, 2)) == 4


async def test_tls_permissive_serves_tls_and_plain_clients_on_one_port(
    java_classes: str, tmp_path: Path, pki: dict[str, str]
) -> None:
    tls = server_tls(pki, "permissive")
    async with servers(java_classes, tmp_path, namesrv=tls, **tls, **broker_tls(pki)) as (client, broker):
        sent_ok(await client.run("send", topic=TOPIC, count=2, props=java_tls(pki)), 2)
        sent_ok(await client.run("send", topic=TOPIC, count=2, first=2), 2)
        assert sorted(int(m.properties["index"]) for m in stored(broker, TOPIC, 2)) == [0, 1, 2, 3]
