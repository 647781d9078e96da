"""AdminClient's message and offset operations against a real nameserver and broker."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from broker_core.client import AdminClient, AdminError
from broker_core.client.admin import TrackType
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import decode_record
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand
from broker_core.topics import dlq_topic, retry_topic

from .clusterhelpers import cluster, commit_offset, heartbeat, put, raw_client, wait_until_routed

TOPIC = "Browse"


async def test_it_browses_a_topic_by_time_range(tmp_path: Path) -> None:
    async with cluster(tmp_path / "store") as (ns, broker), AdminClient(ns.address) as admin:
        broker.topics.update(TopicConfig(TOPIC, 2, 2))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        for i in range(6):
            put(broker, TOPIC, i % 2, f"early-{i}".encode())
        assert broker.store is not None and broker.store.wait_dispatched()
        await asyncio.sleep(0.02)
        begin = time.time_ns() // 1_000_000
        for i in range(5):
            put(broker, TOPIC, i % 2, f"mid-{i}".encode())
        assert broker.store.wait_dispatched()
        end = time.time_ns() // 1_000_000
        await asyncio.sleep(0.02)
        put(broker, TOPIC, 0, b"late")
        assert broker.store.wait_dispatched()

        found = await admin.messages_by_time(TOPIC, begin, end)
        assert sorted(m.body for m in found) == [f"mid-{i}".encode() for i in range(5)]
        assert len(await admin.messages_by_time(TOPIC, 0, end + 10_000)) == 12
        assert len(await admin.messages_by_time(TOPIC, 0, end + 10_000, limit=3)) == 3
        with pytest.raises(AdminError, match="before it begins"):
            await admin.messages_by_time(TOPIC, end, begin)


async def test_it_moves_offsets_and_tracks_a_message_per_group(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path / "store") as (ns, broker),
        AdminClient(ns.address) as admin,
        raw_client() as client,
    ):
        broker.topics.update(TopicConfig(TOPIC, 1, 1))
        broker.topics_changed()
        await wait_until_routed(ns, TOPIC)
        ids = [put(broker, TOPIC, 0, f"m{i}".encode(), TAGS="TagA") for i in range(4)]
        assert broker.store is not None and broker.store.wait_dispatched()
        queue = MessageQueue(TOPIC, "broker-a", 0)

        await commit_offset(client, broker, "done", TOPIC, 0, 3)  # offline, past message 2
        await commit_offset(client, broker, "gone", TOPIC, 0, 1)  # offline, before it
        await heartbeat(client, broker, "c1", consumer_group="live", subscriptions={TOPIC: "*"})
        await heartbeat(client, broker, "c2", consumer_group="picky", subscriptions={TOPIC: "TagB"})
        await commit_offset(client, broker, "live", TOPIC, 0, 1)
        await commit_offset(client, broker, "picky", TOPIC, 0, 0)
        tracks = {t.group: t.track_type for t in await admin.message_track(ids[2])}
        assert tracks == {
            "done": TrackType.CONSUMED,
            "gone": TrackType.NOT_ONLINE,
            "live": TrackType.NOT_CONSUME_YET,
            "picky": TrackType.CONSUMED_BUT_FILTERED,
        }

        assert await admin.reset_offset_to_latest("gone", TOPIC) == {queue: 4}
        assert await admin.reset_offset_to_earliest("gone", TOPIC) == {queue: 0}
        assert await admin.skip_accumulated("done") == {queue: 4}
        await admin.update_consumer_offsets("gone", {queue: 2})
        assert broker.store.consumer_offsets.query_offset("gone", TOPIC, 0) == 2
        with pytest.raises(AdminError, match="outside the queue's range"):
            await admin.update_consumer_offsets("gone", {queue: 99})


async def test_it_resends_dead_letters_to_the_retry_topic(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path / "store") as (ns, broker),
        AdminClient(ns.address) as admin,
        raw_client() as client,
    ):
        group = "billing"
        await heartbeat(client, broker, "c1", consumer_group=group, subscriptions={"Orders": "*"})
        await wait_until_routed(ns, retry_topic(group))  # the heartbeat created the retry topic
        broker.topics.update(TopicConfig(dlq_topic(group), 1, 1))
        dead = put(
            broker, dlq_topic(group), 0, b"poison", RETRY_TOPIC="Orders", UNIQ_KEY="U1", ORIGIN_MESSAGE_ID="X"
        )
        outcomes = await admin.resend_dlq_messages(group, [dead, "00" * 16])
        assert [o.ok for o in outcomes] == [True, False]
        assert broker.store is not None and broker.store.wait_dispatched()
        (record,) = broker.store.get_message(retry_topic(group), 0, 0, 8).messages
        resent = decode_record(record)
        assert resent.body == b"poison" and resent.reconsume_times == 0
        assert resent.properties["RETRY_TOPIC"] == "Orders" and resent.properties["UNIQ_KEY"] == "U1"
        # The DLQ keeps its copy.
        assert broker.store.get_max_offset_in_queue(dlq_topic(group), 0) == 1
        with pytest.raises(AdminError):
            await admin.view_message("zz")


async def test_it_relays_to_a_live_consumer(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path / "store") as (ns, broker),
        AdminClient(ns.address) as admin,
        raw_client() as client,
    ):
        broker.topics.update(TopicConfig(TOPIC, 1, 1))
        msg_id = put(broker, TOPIC, 0, b"direct")
        assert broker.store is not None and broker.store.wait_dispatched()

        def running(request: RemotingCommand, conn: Any) -> RemotingCommand:
            return request.response(
                body=b'{"mqTable":},"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}'
            )

        def direct(request: RemotingCommand, conn: Any) -> RemotingCommand:
            body = decode_record(request.body).body.decode()
            return request.response(body=b'{"consumeResult":"CR_SUCCESS","remark":"' + body.encode() + b'"}')

        client.register(RequestCode.GET_CONSUMER_RUNNING_INFO, running)
        client.register(RequestCode.CONSUME_MESSAGE_DIRECTLY, direct)
        await heartbeat(client, broker, "c9", consumer_group="g", subscriptions={TOPIC: "*"})
        assert "PROP_CONSUME_TYPE" in await admin.consumer_running_info("g", "c9")
        assert await admin.consume_message_directly("g", "c9", msg_id) == {
            "consumeResult": "CR_SUCCESS",
            "remark": "direct",
        }
        with pytest.raises(AdminError, match="not connected"):
            await admin.consumer_running_info("g", "nobody")
