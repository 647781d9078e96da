"""AdminClient against a real nameserver and broker (``broker_core.client.admin``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.client import AdminClient, AdminError, AdminUnreachableError
from broker_core.messagequeue import MessageQueue
from broker_core.model.groupconfig import SubscriptionGroupConfig
from broker_core.model.message import MessageInner, create_message_id, encode_host
from broker_core.model.topicconfig import TopicConfig
from broker_core.remoting.codes import RequestCode, ResponseCode
from broker_core.remoting.server import RemotingServer
from broker_core.store.store import MessageStore
from broker_core.testing import run_broker, small_store_config

from .clusterhelpers import cluster, commit_offset, dead_addr, heartbeat, put, raw_client, wait_until_routed


async def test_it_creates_routes_updates_and_deletes_topics_past_a_dead_nameserver(tmp_path: Path) -> None:
    # The first nameserver is down: every call goes on to the second.
    async with (
        cluster(tmp_path / "store") as (ns, broker),
        AdminClient(f"{dead_addr()};{ns.address}") as admin,
    ):
        info = await admin.cluster_info()
        assert info.clusters == {"DefaultCluster": ("broker-a",)}
        assert info.brokers["broker-a"].master_addr == broker.address

        assert await admin.create_or_update_topic(TopicConfig("Orders", 4, 4), cluster="DefaultCluster") == [
            broker.address
        ]
        await wait_until_routed(ns, "Orders")
        assert "Orders" in await admin.topic_list()
        assert "Orders" in await admin.topics_by_cluster("DefaultCluster")
        route = await admin.topic_route("Orders")
        assert [
            (q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas
        ] == [("broker-a", 4, 4, 6)]
        assert route.master_addrs() == {"broker-a": broker.address}

        await admin.create_or_update_topic(TopicConfig("Orders", 2, 2, 4), broker_addr=broker.address)
        assert (await admin.topic_configs(broker.address))["Orders"] == TopicConfig("Orders", 2, 2, 4)

        await admin.create_or_update_topic(
            TopicConfig("Sequenced", 3, 3, order=True), cluster="DefaultCluster"
        )
        await wait_until_routed(ns, "Sequenced")
        assert (await admin.topic_route("Sequenced")).order_topic_conf == "broker-a:3"

        assert await admin.delete_topic("Orders") == [broker.address]
        with pytest.raises(AdminError) as missing:
            await admin.topic_route("Orders")
        assert missing.value.code == ResponseCode.TOPIC_NOT_EXIST
        assert "Orders" not in await admin.topic_configs(broker.address)

        with pytest.raises(AdminError, match="cluster 'Nowhere' is not registered"):
            await admin.create_or_update_topic(TopicConfig("Orders"), cluster="Nowhere")
        with pytest.raises(AdminError, match="topic name"):
            await admin.create_or_update_topic(TopicConfig("bad topic!"), cluster="DefaultCluster")


async def test_it_reports_topic_stats_and_each_queues_lag_and_resets_offsets(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path / "store") as (ns, broker),
        AdminClient(ns.address) as admin,
        raw_client() as client,
    ):
        await admin.create_or_update_topic(TopicConfig("Orders", 4, 4), cluster="DefaultCluster")
        await wait_until_routed(ns, "Orders")
        for i in range(5):
            put(broker, "Orders", 0, f"q0-{i}".encode())
        for i in range(3):
            put(broker, "Orders", 1, f"q1-{i}".encode())
        assert broker.store is not None and broker.store.wait_dispatched()

        stats = await admin.topic_stats("Orders")
        assert [(q.queue.queue_id, q.min_offset, q.max_offset) for q in stats.queues] == [
            (0, 0, 5),
            (1, 0, 3),
            (2, 0, 0),
            (3, 0, 0),
        ]
        assert stats.total_messages == 8 and stats.queues[0].last_update_timestamp > 0

        await commit_offset(client, broker, "billing", "Orders", 0, 2)
        await commit_offset(client, broker, "billing", "Orders", 1, 3)
        progress = await admin.consume_stats("billing")
        assert [(q.queue.queue_id, q.broker_offset, q.consumer_offset, q.lag) for q in progress.queues] == [
            (0, 5, 2, 3),
            (1, 3, 3, 0),
            (2, 0, 0, 0),
            (3, 0, 0, 0),
        ]
        assert progress.total_lag == 3 and progress.lag_by_topic() == {"Orders": 3}
        assert (await admin.consume_stats("billing", "Orders")).total_lag == 3
        assert "billing" in await admin.group_list()
        assert "billing" in await admin.topic_consumers("Orders")

        to_start = await admin.reset_offset_by_time("billing", "Orders", 0)
        assert to_start[MessageQueue("Orders", "broker-a", 0)] == 0
        assert (await admin.consume_stats("billing")).total_lag == 8
        # Without force an offset only moves back: "to the end" leaves them at 0.
        await admin.reset_offset_by_time("billing", "Orders", -1, force=False)
        assert (await admin.consume_stats("billing")).total_lag == 8
        to_end = await admin.reset_offset_by_time("billing", "Orders", -1)
        assert list(to_end.values()) == [5, 3, 0, 0]
        assert (await admin.consume_stats("billing")).total_lag == 0

        with pytest.raises(AdminError) as unknown_group:
            await admin.consume_stats("nobody")
        assert unknown_group.value.code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
        with pytest.raises(AdminError) as unknown_topic:
            await admin.topic_stats("Missing")
        assert unknown_topic.value.code == ResponseCode.TOPIC_NOT_EXIST


async def test_it_shows_who_is_connected_and_summarises_every_group(tmp_path: Path) -> None:
    async with (
        cluster(tmp_path / "store") as (ns, broker),
        AdminClient(ns.address) as admin,
        raw_client() as client,
    ):
        await admin.create_or_update_topic(TopicConfig("Orders", 2, 2), cluster="DefaultCluster")
        await wait_until_routed(ns, "Orders")
        put(broker, "Orders", 0, b"a")
        put(broker, "Orders", 0, b"b")
        assert broker.store is not None and broker.store.wait_dispatched()
        await heartbeat(
            client,
            broker,
            "10.0.0.7@reader",
            consumer_group="shipping",
            subscriptions={"Orders": "TagA || TagB"},
            producer_group="checkout",
        )

        consumers = await admin.consumer_connections("shipping")
        assert [c.client_id for c in consumers.connections] == ["10.0.0.7@reader"]
        assert consumers.connections[0].language == "PYTHON"
        assert consumers.subscriptions["Orders"].expression == "TagA || TagB"
        assert consumers.subscriptions["Orders"].tags == ("TagA", "TagB")
        assert (consumers.consume_type, consumers.message_model) == ("CONSUME_PASSIVELY", "CLUSTERING")
        assert consumers.consume_from_where == "CONSUME_FROM_FIRST_OFFSET"

        producers = await admin.producer_connections("checkout", "Orders")
        assert [(p.client_id, p.language, p.version) for p in producers] == [
            ("10.0.0.7@reader", "PYTHON", 401)
        ]

        summaries = {s.group: s for s in await admin.group_summaries()}
        shipping = summaries["shipping"]
        assert (shipping.clients, shipping.message_model, shipping.total_lag) == (1, "CLUSTERING", 2)
        assert shipping.online

        with pytest.raises(AdminError) as offline:
            await admin.consumer_connections("nobody")
        assert offline.value.code == ResponseCode.CONSUMER_NOT_ONLINE
        with pytest.raises(AdminError, match="producer group 'nobody' is not online"):
            await admin.producer_connections("nobody", "Orders")


async def test_it_finds_messages_by_offset_msg_id_by_key_and_by_unique_key(tmp_path: Path) -> None:
    async with cluster(tmp_path / "store") as (ns, broker), AdminClient(ns.address) as admin:
        await admin.create_or_update_topic(TopicConfig("Orders", 2, 2), cluster="DefaultCluster")
        await wait_until_routed(ns, "Orders")
        first = put(
            broker, "Orders", 0, b"order 1", KEYS="order-1 customer-9", UNIQ_KEY="C0FFEE01", TAGS="new"
        )
        put(broker, "Orders", 1, b"order 2", KEYS="order-2 customer-9", UNIQ_KEY="C0FFEE02")
        assert broker.store is not None and broker.store.wait_dispatched()

        msg = await admin.view_message(first)
        assert (msg.body, msg.topic, msg.tags, msg.msg_id, msg.store_host) == (
            b"order 1",
            "Orders",
            "new",
            first,
            broker.address,
        )

        by_customer = await admin.query_by_key("Orders", "customer-9")
        assert [m.body for m in by_customer] == [b"order 1", b"order 2"]
        assert [m.body for m in await admin.query_by_key("Orders", "order-2")] == [b"order 2"]
        assert await admin.query_by_key("Orders", "order-3") == []
        assert [m.body for m in await admin.query_by_unique_key("Orders", "C0FFEE02")] == [b"order 2"]
        assert await admin.query_by_unique_key("Orders", "order-1") == []

        with pytest.raises(AdminError, match="not hexadecimal"):
            await admin.view_message("not-an-id")
        elsewhere = create_message_id(encode_host("10.1.2.3:10911"), 0)
        with pytest.raises(AdminError, match="no broker the nameservers know"):
            await admin.view_message(elsewhere)
        beyond = create_message_id(encode_host(broker.address), 1 << 30)
        with pytest.raises(AdminError) as nothing:
            await admin.view_message(beyond)
        assert nothing.value.code == ResponseCode.SYSTEM_ERROR and nothing.value.addr == broker.address


async def test_it_manages_groups_and_reads_broker_figures_and_runs_maintenance(tmp_path: Path) -> None:
    async with cluster(tmp_path / "store") as (ns, broker), AdminClient(ns.address) as admin:
        config = SubscriptionGroupConfig("audit", retry_max_times=3, consume_broadcast_enable=False)
        assert await admin.create_or_update_subscription_group(config, cluster="DefaultCluster") == [
            broker.address
        ]
        assert (await admin.subscription_groups(broker.address))["audit"] == config
        assert "audit" in await admin.group_list()
        await admin.delete_subscription_group("audit", broker_addr=broker.address, remove_offset=True)
        assert "audit" not in await admin.subscription_groups(broker.address)

        runtime = await admin.broker_runtime_info(broker.address)
        assert runtime["bootTimestamp"] == str(broker.boot_timestamp)
        assert runtime["brokerName"] == "broker-a"
        settings = await admin.broker_config(broker.address)
        assert (settings["brokerName"], settings["listenPort"]) == ("broker-a", str(broker.port))

        run = await admin.run_maintenance(broker.address, "offset_persistence")
        assert run.ok and run.job == "offset_persistence" and run.started_ms > 0 and run.runner == "manual"
        status = await admin.maintenance_status(broker.address)
        last = status.jobs["offset_persistence"].last_run
        # The broker's own timer may have run it since (no platform drives this broker).
        assert status.mode == "auto" and last is not None and last.started_ms >= run.started_ms
        runtime = await admin.broker_runtime_info(broker.address)
        assert int(runtime["maintenance.offset_persistence.lastRunTimestamp"]) >= run.started_ms

        scheduled = await admin.run_maintenance(
            broker.address, "offset_persistence", scheduled=True, lease_ms=60_000
        )
        assert scheduled.runner == "platform"
        state = (await admin.maintenance_status(broker.address)).jobs["offset_persistence"]
        assert (state.driver, state.fallback, state.lease_ms) == ("platform", False, 60_000)
        assert state.last_platform_ms is not None and state.last_platform_ms >= scheduled.started_ms
        with pytest.raises(AdminError, match="unknown maintenance job 'defrag'"):
            await admin.run_maintenance(broker.address, "defrag")


async def test_it_says_clearly_when_no_nameserver_answers() -> None:
    async with AdminClient([dead_addr(), dead_addr()], connect_timeout=1) as admin:
        with pytest.raises(AdminUnreachableError, match="no nameserver answered"):
            await admin.topic_list()
    async with AdminClient("") as admin:
        with pytest.raises(AdminError, match="no nameserver address given"):
            await admin.cluster_info()


async def test_it_signs_its_requests_for_a_broker_with_acl(tmp_path: Path) -> None:
    config_dir = tmp_path / "store" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "plain_acl.yml").write_text(
        "accounts:\n"
        "  - {accessKey: ops, secretKey: ops-secret, admin: true}\n"
        "  - {accessKey: app, secretKey: app-secret, defaultTopicPerm: PUB, defaultGroupPerm: SUB}\n"
    )
    async with run_broker(tmp_path / "store", acl_enable=True) as broker:
        async with AdminClient(None) as anonymous:
            with pytest.raises(AdminError) as refused:
                await anonymous.broker_runtime_info(broker.address)
            assert refused.value.code == ResponseCode.NO_PERMISSION
        async with AdminClient(None, access_key="app", secret_key="app-secret") as app:
            with pytest.raises(AdminError) as not_admin:
                await app.run_maintenance(broker.address, "offset_persistence")
            assert not_admin.value.code == ResponseCode.NO_PERMISSION and "admin" in not_admin.value.remark
        async with AdminClient(None, access_key="ops", secret_key="ops-secret") as ops:
            assert (await ops.broker_runtime_info(broker.address))["brokerName"] == "broker-a"
            assert (await ops.run_maintenance(broker.address, "offset_persistence")).ok
        with pytest.raises(AdminError):
            AdminClient(None, access_key="ops")  # a key without its secret


async def test_an_answer_of_the_wrong_shape_is_an_admin_error() -> None:
    # A real server that answers well-formed JSON of the wrong shape.
    server = RemotingServer()
    server.register(
        RequestCode.GET_BROKER_CLUSTER_INFO,
        lambda request, conn: request.response(body=b'{"brokerAddrTable":{"b":{}}}'),
    )
    server.register(
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        lambda request, conn: request.response(body=b"{" * 3000),
    )
    await server.start()
    try:
        async with AdminClient(server.address) as admin:
            with pytest.raises(AdminError, match="malformed"):
                await admin.cluster_info()
            with pytest.raises(AdminError, match="malformed"):
                await admin.topic_list()
    finally:
        await server.close()


async def test_a_broker_started_on_a_damaged_store_reports_the_range_it_skipped(tmp_path: Path) -> None:
    """Issue 14: the damage recovery skipped is on record and reaches the operator (the
    maintenance status the console's Maintenance page shows, and quiver-admin)."""
    store_dir = tmp_path / "store"
    written = []
    with MessageStore(small_store_config(store_dir)) as store:
        for i in range(20):
            msg = MessageInner("Damaged", 0, b"body-%02d" % i + b"." * 64, {"KEYS": f"k{i}"})
            result = store.put_message(msg)
            written.append((result.wrote_offset, result.wrote_bytes))
    phys, size = written[10]
    with open(store_dir / "commitlog" / f"{0:020d}", "r+b") as f:
        f.seek(phys + size - 10)
        f.write(b"\xff")
    async with run_broker(store_dir) as broker, AdminClient([], connect_timeout=2) as admin:
        status = await admin.maintenance_status(broker.address)
        assert [(r["start"], r["end"]) for r in status.damaged_ranges] == [(phys, phys + size)]
        assert status.disk_full is None
        runtime = await admin.broker_runtime_info(broker.address)
        assert (runtime["damagedRanges"], runtime["damagedBytes"]) == ("1", str(size))
        assert broker.store is not None
        bodies = [m.body for m in broker.store.query_message("Damaged", "k19")]
        assert bodies == [b"body-19" + b"." * 64], "the records after the damage are kept"
        assert broker.store.query_message("Damaged", "k10") == []
