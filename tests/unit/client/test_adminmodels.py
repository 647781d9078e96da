"""The admin client's values, read from the bodies brokers and nameservers send."""

from __future__ import annotations

import pytest

from broker_core.client.admin import MAINTENANCE_JOBS, parse_namesrv_addr
from broker_core.client.adminmodels import (
    ConsumerConnection,
    ConsumeStats,
    QueueProgress,
    TopicStats,
    as_message_queue,
    parse_properties_text,
)
from broker_core.client.routes import ClusterInfo, TopicRoute
from broker_core.messagequeue import MessageQueue
from broker_core.model.maintenance import JOBS
from broker_core.remoting import fastjson

MQ0 = MessageQueue("Orders", "broker-a", 0)
MQ1 = MessageQueue("Orders", "broker-a", 1)


def test_it_splits_namesrv_addr_as_rocketmq_does() -> None:
    assert parse_namesrv_addr("10.0.0.1:9876; 10.0.0.2:9876;") == ["10.0.0.1:9876", "10.0.0.2:9876"]
    assert parse_namesrv_addr("a:1,b:2") == ["a:1", "b:2"]
    assert parse_namesrv_addr(["a:1", " "]) == ["a:1"]
    assert parse_namesrv_addr("") == [] and parse_namesrv_addr(None) == []


def test_it_reads_routes_with_fastjsons_bare_integer_broker_ids() -> None:
    body = (
        b'{"brokerDatas":[{"brokerAddrs":{0:"10.0.0.1:10911",1:"10.0.0.2:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster"}],"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSynFlag":0,"writeQueueNums":2}],"orderTopicConf":"broker-a:2"}'
    )
    route = TopicRoute.from_json("Orders", fastjson.loads(body))
    assert route.broker_datas[0].addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}
    assert route.master_addrs() == {"broker-a": "10.0.0.1:10911"}
    assert (route.queue_datas[0].read_queue_nums, route.queue_datas[0].write_queue_nums) == (4, 2)
    assert route.order_topic_conf == "broker-a:2"
    assert route.to_json()["brokerDatas"][0]["brokerAddrs"] == {"0": "10.0.0.1:10911", "1": "10.0.0.2:10911"}


def test_it_reads_cluster_info_and_reads_from_a_slave_when_the_master_is_gone() -> None:
    info = ClusterInfo.from_json(
        {
            "brokerAddrTable": {
                "broker-a": {"brokerAddrs": {"0": "a0:1"}, "brokerName": "broker-a", "cluster": "C1"},
                "broker-b": {
                    "brokerAddrs": {"2": "b2:1", "1": "b1:1"},
                    "brokerName": "broker-b",
                    "cluster": "C1",
                },
            },
            "clusterAddrTable": {"C1": ["broker-b", "broker-a"]},
        }
    )
    assert info.clusters == {"C1": ("broker-a", "broker-b")}
    assert info.master_addrs("C1") == {"broker-a": "a0:1"}
    assert info.brokers["broker-b"].any_addr == "b1:1"
    assert info.broker_by_addr("b2:1") is info.brokers["broker-b"]
    assert info.brokers_of("Nowhere") == []


def test_it_reads_message_queue_keys_in_either_dialect() -> None:
    assert as_message_queue(MQ0) is MQ0
    assert as_message_queue('{"brokerName":"broker-a","queueId":1,"topic":"Orders"}') == MQ1
    with pytest.raises(ValueError):
        as_message_queue("Orders")


def test_it_computes_lag_per_queue_and_in_total() -> None:
    body = fastjson.loads(
        b'{"consumeTps":1.5,"offsetTable":{'
        b'{"brokerName":"broker-a","queueId":1,"topic":"Orders"}:{"brokerOffset":3,"consumerOffset":3,"lastTimestamp":9},'
        b'{"brokerName":"broker-a","queueId":0,"topic":"Orders"}:{"brokerOffset":5,"consumerOffset":2,"lastTimestamp":7}}}'
    )
    queues = ConsumeStats.queues_from_body(body)
    stats = ConsumeStats("billing", tuple(sorted(queues, key=lambda q: q.queue)), 1.5)
    assert [(q.queue, q.lag) for q in stats.queues] == [(MQ0, 3), (MQ1, 0)]
    assert stats.total_lag == 3 and stats.lag_by_topic() == {"Orders": 3}
    assert stats.to_json()["queues"][0] == {
        "topic": "Orders",
        "brokerName": "broker-a",
        "queueId": 0,
        "brokerOffset": 5,
        "consumerOffset": 2,
        "lag": 3,
        "lastTimestamp": 7,
    }
    # A queue never committed counts from 0; a consumer ahead of the broker never lags.
    assert QueueProgress(MQ0, 4, -1).lag == 4
    assert QueueProgress(MQ0, 4, 6).lag == 0


def test_it_reads_topic_stats_and_connection_bodies() -> None:
    stats = TopicStats.queues_from_body(
        fastjson.loads(
            b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"Orders"}:'
            b'{"lastUpdateTimestamp":12,"maxOffset":8,"minOffset":2}}}'
        )
    )
    assert [(s.queue, s.min_offset, s.max_offset, s.last_update_timestamp) for s in stats] == [
        (MQ0, 2, 8, 12)
    ]
    conn = ConsumerConnection.from_body(
        "g",
        {
            "connectionSet": [
                {"clientId": "b", "clientAddr": "1.1.1.1:5", "language": "CPP", "version": 1},
                {"clientId": "a", "clientAddr": "1.1.1.2:5", "language": "JAVA", "version": "401"},
            ],
            "subscriptionTable": {
                "Orders": {"topic": "Orders", "subString": "*", "tagsSet": [], "subVersion": 3}
            },
            "consumeType": "CONSUME_PASSIVELY",
            "messageModel": "BROADCASTING",
            "consumeFromWhere": "CONSUME_FROM_LAST_OFFSET",
        },
    )
    assert [(c.client_id, c.version) for c in conn.connections] == [("a", 401), ("b", 1)]
    assert conn.subscriptions["Orders"].sub_version == 3 and conn.message_model == "BROADCASTING"


def test_it_reads_broker_config_text() -> None:
    text = "# comment\nbrokerName=broker-a\n\nmessageDelayLevel=1s 5s\nlistenPort = 10911\nnoise\n"
    assert parse_properties_text(text) == {
        "brokerName": "broker-a",
        "messageDelayLevel": "1s 5s",
        "listenPort": "10911",
    }


def test_it_knows_the_same_maintenance_jobs_as_the_broker() -> None:
    assert MAINTENANCE_JOBS == JOBS
