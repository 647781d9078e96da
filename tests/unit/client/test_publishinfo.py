"""TopicPublishInfo: which queues a producer may send to, and the turn it takes them in."""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from broker_core.client.producer.queues import POSITIVE_MASK, RoundRobinIndex, TopicPublishInfo
from broker_core.client.routes import BrokerData, TopicRoute
from broker_core.messagequeue import MessageQueue
from broker_core.routedata import QueueData

PERM_RW = 6
PERM_READ_ONLY = 4


def master(name: str, *slave_ids: int) -> BrokerData:
    addrs = {0: f"{name}:10911"} | {i: f"{name}-s{i}:10911" for i in slave_ids}
    return BrokerData(name, "DefaultCluster", addrs)


def route(
    *queue_datas: QueueData, brokers: tuple[BrokerData, ...] = (), order_conf: str | None = None
) -> TopicRoute:
    return TopicRoute("Orders", queue_datas, brokers, order_conf)


def two_brokers(start: int | None = None, queues: int = 4) -> TopicPublishInfo:
    """Orders on broker-a and broker-b, ``queues`` writable queues each."""
    return TopicPublishInfo.from_route(
        route(
            QueueData("broker-b", queues, queues, PERM_RW),
            QueueData("broker-a", queues, queues, PERM_RW),
            brokers=(master("broker-a"), master("broker-b")),
        ),
        start=start,
    )


def test_it_lists_write_queues_of_writable_masters_in_broker_name_order() -> None:
    info = two_brokers(queues=2)
    assert info.message_queues == (
        MessageQueue("Orders", "broker-a", 0),
        MessageQueue("Orders", "broker-a", 1),
        MessageQueue("Orders", "broker-b", 0),
        MessageQueue("Orders", "broker-b", 1),
    )
    assert info.ok() and not info.order_topic and info.topic == "Orders"


def test_it_names_the_queues_of_a_new_topic_sent_over_the_auto_create_route() -> None:
    tbw102 = TopicRoute("TBW102", (QueueData("broker-a", 8, 2, PERM_RW),), (master("broker-a"),))
    info = TopicPublishInfo.from_route(tbw102, topic="NewTopic")
    assert info.topic == "NewTopic"
    assert info.message_queues == (
        MessageQueue("NewTopic", "broker-a", 0),
        MessageQueue("NewTopic", "broker-a", 1),
    )
    assert info.write_queue_nums("broker-a") == 2


def test_it_counts_write_queues_not_read_queues() -> None:
    info = TopicPublishInfo.from_route(
        route(QueueData("broker-a", 8, 2, PERM_RW), brokers=(master("broker-a"),))
    )
    assert [mq.queue_id for mq in info.message_queues] == [0, 1]


def test_it_leaves_out_read_only_brokers() -> None:
    info = TopicPublishInfo.from_route(
        route(
            QueueData("broker-a", 4, 4, PERM_READ_ONLY),
            QueueData("broker-b", 4, 4, PERM_RW),
            brokers=(master("broker-a"), master("broker-b")),
        )
    )
    assert {mq.broker_name for mq in info.message_queues} == {"broker-b"}
    assert info.write_queue_nums("broker-a") == 0
    assert info.write_queue_nums("broker-b") == 4


def test_it_leaves_out_brokers_with_only_slaves_or_no_broker_data() -> None:
    only_slaves = BrokerData("broker-a", "DefaultCluster", {1: "a-s1:10911", 2: "a-s2:10911"})
    info = TopicPublishInfo.from_route(
        route(
            QueueData("broker-a", 4, 4, PERM_RW),
            QueueData("broker-b", 4, 4, PERM_RW),
            QueueData("broker-c", 4, 4, PERM_RW),
            brokers=(only_slaves, master("broker-b", 1)),
        )
    )
    assert {mq.broker_name for mq in info.message_queues} == {"broker-b"}
    assert len(info.message_queues) == 4


def test_it_is_not_ok_without_a_writable_queue() -> None:
    info = TopicPublishInfo.from_route(
        route(QueueData("broker-a", 4, 4, PERM_READ_ONLY), brokers=(master("broker-a"),))
    )
    assert not info.ok()
    with pytest.raises(LookupError):
        info.select_one_message_queue()
    with pytest.raises(LookupError):
        info.select_one_message_queue("broker-a")


def test_it_takes_an_order_topics_queues_from_its_conf_in_the_confs_order() -> None:
    info = TopicPublishInfo.from_route(
        route(
            # The conf wins over queue data, perm and masters alike.
            QueueData("broker-a", 8, 8, PERM_READ_ONLY),
            brokers=(master("broker-a"),),
            order_conf="broker-b:2;broker-a:3;",
        )
    )
    assert info.order_topic
    assert [(mq.broker_name, mq.queue_id) for mq in info.message_queues] == [
        ("broker-b", 0),
        ("broker-b", 1),
        ("broker-a", 0),
        ("broker-a", 1),
        ("broker-a", 2),
    ]


@pytest.mark.parametrize("conf", ["broker-a", "broker-a:x", ":4", "broker-a:4;broker-b"])
def test_it_refuses_a_malformed_order_topic_conf(conf: str) -> None:
    with pytest.raises(ValueError, match="orderTopicConf"):
        TopicPublishInfo.from_route(route(order_conf=conf))


def test_it_takes_queues_in_turn_from_the_given_start() -> None:
    info = two_brokers(start=5)
    picks = [info.select_one_message_queue() for _ in range(8)]
    assert picks == [info.message_queues[(6 + i) % 8] for i in range(8)]


def test_it_chooses_each_queue_equally_often() -> None:
    info = TopicPublishInfo.from_route(
        route(
            QueueData("broker-a", 4, 4, PERM_RW),
            QueueData("broker-b", 4, 3, PERM_RW),
            QueueData("broker-c", 4, 5, PERM_RW),
            brokers=(master("broker-a"), master("broker-b"), master("broker-c")),
        )
    )
    counts = Counter(info.select_one_message_queue() for _ in range(12 * 250))
    assert set(counts) == set(info.message_queues)
    assert set(counts.values()) == {250}


def test_a_retry_avoids_the_broker_that_just_failed() -> None:
    for start in range(8):
        info = two_brokers(start=start)
        picks = [info.select_one_message_queue("broker-a") for _ in range(20)]
        assert {mq.broker_name for mq in picks} == {"broker-b"}, start


def test_a_retry_skips_to_the_next_queue_of_another_broker_and_turns_on_from_there() -> None:
    info = two_brokers(start=-1 & POSITIVE_MASK)  # the next position is 0: broker-a's queue 0
    assert info.select_one_message_queue("broker-a") == MessageQueue("Orders", "broker-b", 0)
    # Every position tried was used up; plain turns continue after the one taken.
    assert info.select_one_message_queue() == MessageQueue("Orders", "broker-b", 1)


def test_a_retry_stays_on_the_only_broker_there_is() -> None:
    info = TopicPublishInfo.from_route(
        route(QueueData("broker-a", 2, 2, PERM_RW), brokers=(master("broker-a"),))
    )
    picks = [info.select_one_message_queue("broker-a") for _ in range(4)]
    assert {mq.broker_name for mq in picks} == {"broker-a"}
    assert Counter(mq.queue_id for mq in picks) == {0: 2, 1: 2}


def test_a_retry_after_an_unknown_broker_is_plain_round_robin() -> None:
    info = two_brokers(start=0)
    assert info.select_one_message_queue("broker-z") == info.message_queues[1]
    assert info.select_one_message_queue(None) == info.message_queues[2]


def test_the_position_starts_at_random_and_never_goes_negative() -> None:
    starts = {RoundRobinIndex().increment_and_get() for _ in range(20)}
    assert len(starts) > 1
    index = RoundRobinIndex(POSITIVE_MASK - 1)
    assert [index.increment_and_get() for _ in range(3)] == [POSITIVE_MASK, 0, 1]


def test_the_position_is_shared_safely_between_threads() -> None:
    index = RoundRobinIndex(0)
    seen: list[list[int]] = [[] for _ in range(4)]

    def take(out: list[int]) -> None:
        for _ in range(2000):
            out.append(index.increment_and_get())

    threads = [threading.Thread(target=take, args=(out,)) for out in seen]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    values = [v for out in seen for v in out]
    assert sorted(values) == list(range(1, 8001))
