"""Latency fault tolerance: how long a broker is avoided after a send, and where sends go then."""

from __future__ import annotations

from collections import Counter

import pytest

from broker_core.client.producer.faulttolerance import (
    ISOLATION_LATENCY_MS,
    FaultStrategy,
    LatencyFaultTolerance,
    not_available_ms_for,
)
from broker_core.client.producer.queues import TopicPublishInfo
from broker_core.client.routes import BrokerData, TopicRoute
from broker_core.messagequeue import MessageQueue
from broker_core.routedata import QueueData

T0 = 1_000_000


class Clock:
    """A clock the test moves by hand, in milliseconds."""

    def __init__(self, now: int = T0) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now

    def advance(self, ms: int) -> None:
        self.now += ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def strategy(clock: Clock) -> FaultStrategy:
    return FaultStrategy(send_latency_fault_enable=True, now_ms=clock)


def publish_info(*broker_names: str, queues: int = 4, start: int = 0) -> TopicPublishInfo:
    """Orders with ``queues`` writable queues on each of ``broker_names``."""
    topic_route = TopicRoute(
        "Orders",
        tuple(QueueData(name, queues, queues, 6) for name in broker_names),
        tuple(BrokerData(name, "DefaultCluster", {0: f"{name}:10911"}) for name in broker_names),
    )
    return TopicPublishInfo.from_route(topic_route, start=start)


# Each bracket's bounds: (latency of the send, how long its broker is then avoided).
BRACKETS = [
    (0, 0),
    (40, 0),
    (49, 0),
    (50, 0),
    (99, 0),
    (100, 0),
    (549, 0),
    (550, 30_000),
    (600, 30_000),
    (999, 30_000),
    (1000, 60_000),
    (1999, 60_000),
    (2000, 120_000),
    (2999, 120_000),
    (3000, 180_000),
    (14_999, 180_000),
    (15_000, 600_000),
    (90_000, 600_000),
]


@pytest.mark.parametrize(("latency", "avoided"), BRACKETS)
def test_it_brackets_latencies_as_rocketmq_does(latency: int, avoided: int) -> None:
    assert not_available_ms_for(latency) == avoided


@pytest.mark.parametrize(("latency", "avoided"), BRACKETS)
def test_it_avoids_a_broker_for_exactly_its_brackets_duration(
    strategy: FaultStrategy, clock: Clock, latency: int, avoided: int
) -> None:
    strategy.update_fault_item("broker-a", latency, isolation=False)
    if avoided:
        assert not strategy.is_available("broker-a")
        clock.advance(avoided - 1)
        assert not strategy.is_available("broker-a")
        clock.advance(1)
    assert strategy.is_available("broker-a")
    assert strategy.is_available("broker-b")


def test_a_600_ms_send_keeps_its_broker_out_for_30_s_and_a_40_ms_one_not_at_all(
    strategy: FaultStrategy, clock: Clock
) -> None:
    strategy.update_fault_item("broker-a", 600, isolation=False)
    strategy.update_fault_item("broker-b", 40, isolation=False)
    clock.advance(29_999)
    assert (strategy.is_available("broker-a"), strategy.is_available("broker-b")) == (False, True)
    clock.advance(1)
    assert strategy.is_available("broker-a")


def test_a_failed_send_isolates_its_broker_for_ten_minutes_but_keeps_its_real_latency(
    strategy: FaultStrategy, clock: Clock
) -> None:
    strategy.update_fault_item("broker-a", 12, isolation=True)
    assert not_available_ms_for(ISOLATION_LATENCY_MS) == 600_000
    item = strategy.tolerance.fault_item("broker-a")
    assert item is not None and item.current_latency_ms == 12
    clock.advance(599_999)
    assert not strategy.is_available("broker-a")
    clock.advance(1)
    assert strategy.is_available("broker-a")


def test_a_later_report_replaces_the_earlier_one(strategy: FaultStrategy, clock: Clock) -> None:
    strategy.update_fault_item("broker-a", 3000, isolation=False)
    clock.advance(1000)
    strategy.update_fault_item("broker-a", 20, isolation=False)
    assert strategy.is_available("broker-a")


def test_reports_are_ignored_while_the_strategy_is_off(clock: Clock) -> None:
    strategy = FaultStrategy(now_ms=clock)
    strategy.update_fault_item("broker-a", 5000, isolation=True)
    assert strategy.is_available("broker-a")
    assert strategy.tolerance.fault_item("broker-a") is None


def test_it_takes_custom_brackets_of_matching_length(clock: Clock) -> None:
    strategy = FaultStrategy(
        send_latency_fault_enable=True, now_ms=clock, latency_max_ms=(10,), not_available_duration_ms=(500,)
    )
    strategy.update_fault_item("broker-a", 10, isolation=False)
    clock.advance(499)
    assert not strategy.is_available("broker-a")
    with pytest.raises(ValueError, match="same length"):
        FaultStrategy(latency_max_ms=(10, 20), not_available_duration_ms=(500,))


def test_it_runs_on_a_real_clock_by_default() -> None:
    strategy = FaultStrategy(send_latency_fault_enable=True)
    strategy.update_fault_item("broker-a", 600, isolation=False)
    strategy.update_fault_item("broker-b", 10, isolation=False)
    assert (strategy.is_available("broker-a"), strategy.is_available("broker-b")) == (False, True)


# --- queue choice -------------------------------------------------------------------------


def test_with_every_broker_healthy_it_is_plain_round_robin(strategy: FaultStrategy) -> None:
    info = publish_info("broker-a", "broker-b", "broker-c", queues=4)
    counts = Counter(strategy.select_one_message_queue(info) for _ in range(12 * 100))
    assert set(counts) == set(info.message_queues)
    assert set(counts.values()) == {100}


def test_sends_go_around_an_avoided_broker_until_its_time_is_up(
    strategy: FaultStrategy, clock: Clock
) -> None:
    info = publish_info("broker-a", "broker-b")
    strategy.update_fault_item("broker-a", 1500, isolation=False)  # 60 s out
    picks = [strategy.select_one_message_queue(info) for _ in range(40)]
    assert {mq.broker_name for mq in picks} == {"broker-b"}
    clock.advance(60_000)
    picks = [strategy.select_one_message_queue(info) for _ in range(40)]
    assert Counter(mq.broker_name for mq in picks) == {"broker-a": 20, "broker-b": 20}


def test_a_retry_goes_elsewhere_once_the_failed_broker_is_isolated(strategy: FaultStrategy) -> None:
    info = publish_info("broker-a", "broker-b", start=-1)  # next position: broker-a's queue 0
    first = strategy.select_one_message_queue(info)
    assert first.broker_name == "broker-a"
    strategy.update_fault_item(first.broker_name, 3000, isolation=True)
    retry = strategy.select_one_message_queue(info, first.broker_name)
    assert retry == MessageQueue("Orders", "broker-b", 0)


def test_with_the_strategy_on_the_last_broker_alone_does_not_steer_a_retry(strategy: FaultStrategy) -> None:
    # Java 4.9 looks only at fault items here: an available last broker may be chosen again.
    info = publish_info("broker-a", "broker-b", start=-1)
    assert strategy.select_one_message_queue(info, "broker-a") == MessageQueue("Orders", "broker-a", 0)


def test_with_the_strategy_off_a_retry_avoids_the_last_broker(clock: Clock) -> None:
    strategy = FaultStrategy(now_ms=clock)
    info = publish_info("broker-a", "broker-b")
    picks = [strategy.select_one_message_queue(info, "broker-b") for _ in range(20)]
    assert {mq.broker_name for mq in picks} == {"broker-a"}


def test_when_every_broker_is_avoided_it_falls_back_on_the_least_bad(strategy: FaultStrategy) -> None:
    info = TopicPublishInfo.from_route(
        TopicRoute(
            "Orders",
            (QueueData("broker-a", 4, 4, 6), QueueData("broker-b", 4, 2, 6)),
            tuple(
                BrokerData(name, "DefaultCluster", {0: f"{name}:10911"}) for name in ("broker-a", "broker-b")
            ),
        )
    )
    strategy.update_fault_item("broker-a", 3000, isolation=False)  # 180 s out
    strategy.update_fault_item("broker-b", 600, isolation=False)  # 30 s out, and faster
    picks = [strategy.select_one_message_queue(info) for _ in range(10)]
    assert {mq.broker_name for mq in picks} == {"broker-b"}
    assert Counter(mq.queue_id for mq in picks) == {0: 5, 1: 5}


def test_a_fallback_broker_the_topic_cannot_be_written_to_is_forgotten(strategy: FaultStrategy) -> None:
    info = publish_info("broker-a", "broker-b")
    strategy.update_fault_item("broker-a", 3000, isolation=False)
    strategy.update_fault_item("broker-b", 3000, isolation=False)
    strategy.update_fault_item("broker-c", 600, isolation=False)  # another topic's broker, the best
    mq = strategy.select_one_message_queue(info)
    assert mq in info.message_queues
    assert strategy.tolerance.fault_item("broker-c") is None
    assert strategy.tolerance.fault_item("broker-a") is not None


def test_it_refuses_a_topic_without_writable_queues(strategy: FaultStrategy) -> None:
    info = publish_info()
    with pytest.raises(LookupError):
        strategy.select_one_message_queue(info)


# --- pick_one_at_least --------------------------------------------------------------------


def test_pick_one_at_least_knows_nothing_before_the_first_report(clock: Clock) -> None:
    assert LatencyFaultTolerance(clock).pick_one_at_least() is None


def test_pick_one_at_least_with_up_to_three_brokers_is_always_the_best(clock: Clock) -> None:
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("broker-a", 900, 30_000)
    assert {tolerance.pick_one_at_least() for _ in range(4)} == {"broker-a"}
    tolerance.update_fault_item("broker-b", 300, 30_000)
    tolerance.update_fault_item("broker-c", 700, 30_000)
    assert {tolerance.pick_one_at_least() for _ in range(6)} == {"broker-b"}


def test_pick_one_at_least_takes_turns_among_the_better_half(clock: Clock) -> None:
    tolerance = LatencyFaultTolerance(clock, start=0)
    for name, latency in [("broker-a", 900), ("broker-b", 100), ("broker-c", 700), ("broker-d", 300)]:
        tolerance.update_fault_item(name, latency, 60_000)
    picks = [tolerance.pick_one_at_least() for _ in range(6)]
    assert picks == ["broker-d", "broker-b"] * 3


def test_pick_one_at_least_ranks_available_brokers_before_faster_avoided_ones(clock: Clock) -> None:
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("broker-a", 10, 30_000)
    tolerance.update_fault_item("broker-b", 5000, 0)
    assert tolerance.pick_one_at_least() == "broker-b"
    clock.advance(30_000)
    assert tolerance.pick_one_at_least() == "broker-a"


def test_pick_one_at_least_breaks_latency_ties_by_who_comes_back_first(clock: Clock) -> None:
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("broker-b", 600, 30_000)
    clock.advance(1000)
    tolerance.update_fault_item("broker-a", 600, 30_000)
    assert tolerance.pick_one_at_least() == "broker-b"


def test_a_removed_broker_is_available_and_no_longer_picked(clock: Clock) -> None:
    tolerance = LatencyFaultTolerance(clock)
    tolerance.update_fault_item("broker-a", 3000, 180_000)
    tolerance.remove("broker-a")
    tolerance.remove("broker-z")
    assert tolerance.is_available("broker-a")
    assert tolerance.pick_one_at_least() is None
