"""The nameserver's four route tables (``broker_core.namesrv.routeinfo``)."""

from __future__ import annotations

from broker_core.namesrv.routeinfo import ORDER_TOPIC_CONFIG_NAMESPACE, RouteInfoManager
from broker_core.store.configfile import DataVersion


class Clock:
    def __init__(self) -> None:
        self.ms = 1_700_000_000_000

    def __call__(self) -> int:
        return self.ms


def topics(*names: str, queues: int = 4, perm: int = 6) -> dict[str, dict[str, int]]:
    return {
        n: {"readQueueNums": queues, "writeQueueNums": queues, "perm": perm, "topicSysFlag": 0} for n in names
    }


def register(
    rim: RouteInfoManager,
    name: str,
    addr: str,
    *,
    broker_id: int = 0,
    version: int = 1,
    cluster: str = "DefaultCluster",
    configs: dict | None = None,
    channel: object = None,
):
    return rim.register_broker(
        cluster,
        addr,
        name,
        broker_id,
        addr.replace(":10911", ":10912"),
        DataVersion(version, 1),
        configs if configs is not None else topics("Orders"),
        [],
        channel,
    )


def test_it_builds_a_route_from_a_master_registration() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, "broker-a", "10.0.0.1:10911", configs=topics("Orders", "Pay", queues=8))
    route = rim.pickup_topic_route("Orders")
    assert route == {
        "queueDatas": [
            {"brokerName": "broker-a", "readQueueNums": 8, "writeQueueNums": 8, "perm": 6, "topicSysFlag": 0}
        ],
        "brokerDatas": [
            {"cluster": "DefaultCluster", "brokerName": "broker-a", "brokerAddrs": {"0": "10.0.0.1:10911"}}
        ],
        "filterServerTable": {},
    }
    assert rim.topic_list() == ["Orders", "Pay"]
    assert rim.pickup_topic_route("Missing") is None


def test_it_merges_brokers_and_tells_a_slave_where_its_master_is() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, "broker-a", "10.0.0.1:10911")
    register(rim, "broker-b", "10.0.0.2:10911")
    slave = register(rim, "broker-a", "10.0.0.3:10911", broker_id=1)
    assert (slave.master_addr, slave.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    route = rim.pickup_topic_route("Orders")
    assert [q["brokerName"] for q in route["queueDatas"]] == ["broker-a", "broker-b"]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.3:10911"}
    assert rim.cluster_info()["clusterAddrTable"] == {"DefaultCluster": ["broker-a", "broker-b"]}


def test_it_drops_a_topic_the_master_no_longer_lists_when_its_data_version_moves() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, "broker-a", "10.0.0.1:10911", configs=topics("Orders", "Pay"))
    register(
        rim, "broker-a", "10.0.0.1:10911", configs=topics("Orders"), version=1
    )  # same version: no change
    assert rim.topic_list() == ["Orders", "Pay"]
    register(rim, "broker-a", "10.0.0.1:10911", configs=topics("Orders"), version=2)
    assert rim.topic_list() == ["Orders"]


def test_it_forgets_a_broker_silent_past_the_expiry_and_everything_it_brought() -> None:
    clock = Clock()
    rim = RouteInfoManager(clock_ms=clock, broker_expire_ms=120_000)
    register(rim, "broker-a", "10.0.0.1:10911", channel="chan-a")
    register(rim, "broker-b", "10.0.0.2:10911", configs=topics("Orders", "Other"))
    clock.ms += 100_000
    rim.update_live_timestamp("10.0.0.2:10911")
    clock.ms += 30_000
    assert rim.scan_not_active_brokers() == [("10.0.0.1:10911", "chan-a")]
    assert [q["brokerName"] for q in rim.pickup_topic_route("Orders")["queueDatas"]] == ["broker-b"]
    assert "broker-a" not in rim.broker_addr_table
    assert rim.cluster_info()["clusterAddrTable"] == {"DefaultCluster": ["broker-b"]}


def test_it_drops_a_broker_whose_connection_closed_and_on_unregister() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, "broker-a", "10.0.0.1:10911", channel="chan-a")
    register(rim, "broker-b", "10.0.0.2:10911", channel="chan-b")
    assert rim.on_channel_destroyed("chan-a") == "10.0.0.1:10911"
    rim.unregister_broker("DefaultCluster", "10.0.0.2:10911", "broker-b", 0)
    assert rim.pickup_topic_route("Orders") is None
    assert rim.topic_list() == [] and rim.cluster_info() == {"brokerAddrTable": {}, "clusterAddrTable": {}}


def test_it_wipes_write_permission_deletes_topics_and_lists_them_by_cluster() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, "broker-a", "10.0.0.1:10911", configs=topics("Orders", "Pay"))
    register(rim, "broker-x", "10.0.1.1:10911", cluster="Other", configs=topics("Audit"))
    assert rim.topics_by_cluster("DefaultCluster") == ["Orders", "Pay"]
    assert rim.wipe_write_perm("broker-a") == 2
    assert rim.pickup_topic_route("Orders")["queueDatas"][0]["perm"] == 4
    rim.delete_topic("Pay")
    assert rim.topic_list() == ["Audit", "Orders"]


def test_it_serves_order_topic_config_from_the_kv_table() -> None:
    rim = RouteInfoManager(clock_ms=Clock())
    register(rim, "broker-a", "10.0.0.1:10911")
    rim.put_kv(ORDER_TOPIC_CONFIG_NAMESPACE, "Orders", "broker-a:4")
    assert rim.pickup_topic_route("Orders")["orderTopicConf"] == "broker-a:4"
    assert rim.get_kv(ORDER_TOPIC_CONFIG_NAMESPACE, "Orders") == "broker-a:4"
    rim.delete_kv(ORDER_TOPIC_CONFIG_NAMESPACE, "Orders")
    assert rim.kv_list(ORDER_TOPIC_CONFIG_NAMESPACE) is None
