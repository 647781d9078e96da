"""Our push consumer against a real nameserver and broker (``broker_core.client.consumer.push``).

The consumer's client instance runs on its own thread; the servers run on the test's
loop, so start and shutdown go through ``asyncio.to_thread``.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import zlib
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import orjson
import pytest

from broker_core.broker.controller import BrokerController
from broker_core.client.config import ClientConfig
from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
from broker_core.client.consumer.rebalance import AllocateMessageQueueAveragely
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import COMPRESSED_FLAG, MessageExt, MessageInner
from broker_core.namesrv.server import NamesrvServer
from broker_core.remoting.codes import RequestCode
from broker_core.remoting.command import RemotingCommand

from .clusterhelpers import raw_client, routed_cluster

TOPIC = "PushTopic"


@pytest.fixture
async def cluster(tmp_path: Path) -> AsyncIterator[tuple[NamesrvServer, BrokerController]]:
    async with routed_cluster(tmp_path / "store", TOPIC, 4) as servers:
        yield servers


def produce(broker: BrokerController, count: int, tags: str = "TagA") -> None:
    assert broker.store is not None
    for i in range(count):
        msg = MessageInner(
            TOPIC, i % 4, f"m-{i}".encode(), {"TAGS": tags, "KEYS": f"k-{i}", "UNIQ_KEY": f"U{i:031d}"}
        )
        assert broker.store.put_message(msg).ok


class Collector:
    """A listener that records what it got; ``fail`` names bodies to refuse once."""

    def __init__(self, fail: set[bytes] | None = None) -> None:
        self.got: list[MessageExt] = []
        self.lock = threading.Lock()
        self.fail = set(fail or ())

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.got.extend(msgs)
            for msg in msgs:
                if msg.body in self.fail:
                    self.fail.discard(msg.body)
                    return ConsumeStatus.RECONSUME_LATER
        return ConsumeStatus.CONSUME_SUCCESS

    def bodies(self) -> Counter[bytes]:
        with self.lock:
            return Counter(m.body for m in self.got)


async def until(predicate, timeout: float = 15.0) -> None:  # type: ignore[no-untyped-def]
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.05)


def consumer(
    ns: NamesrvServer,
    collector: Collector,
    group: str = "push-group",
    instance: str = "DEFAULT",
    **options: object,
) -> PushConsumer:
    """A consumer of TOPIC from its first offset; ``instance`` names its client instance
    (two consumers of one group in one process need two, as two processes would have)."""
    config = ClientConfig(namesrv_addr=ns.address, instance_name=instance)
    push = PushConsumer(group, config=config, consume_from_where="CONSUME_FROM_FIRST_OFFSET", **options)  # type: ignore[arg-type]
    return push.subscribe(TOPIC, "*").register_listener(collector)


async def test_it_consumes_everything_once_and_commits_offsets(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    produce(broker, 40)
    collector = Collector()
    push = consumer(ns, collector)
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: sum(collector.bodies().values()) >= 40)
    finally:
        await asyncio.to_thread(push.shutdown)
    assert collector.bodies() == Counter(f"m-{i}".encode() for i in range(40))
    assert {m.tags for m in collector.got} == {"TagA"} and collector.got[0].keys
    assert broker.store is not None
    committed = {q: broker.store.consumer_offsets.query_offset("push-group", TOPIC, q) for q in range(4)}
    assert committed == {0: 10, 1: 10, 2: 10, 3: 10}


async def test_a_refused_message_comes_back_with_reconsume_times_rising(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    produce(broker, 8)
    collector = Collector(fail={b"m-3"})
    push = consumer(ns, collector)
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: collector.bodies()[b"m-3"] >= 2)
    finally:
        await asyncio.to_thread(push.shutdown)
    again = [m for m in collector.got if m.body == b"m-3"]
    assert [m.reconsume_times for m in again[:2]] == [0, 1]
    assert again[1].topic == TOPIC  # the retry shows the original topic
    assert set(collector.bodies()) == {f"m-{i}".encode() for i in range(8)}
    # Its properties as RocketMQ's broker stores a redelivery: where it came from (the first
    # copy's offset msgId), its delay level (3 + reconsume times) and the retry queue it
    # waited for, kept from its delivery.
    props = again[1].properties
    assert props["ORIGIN_MESSAGE_ID"] == again[0].msg_id and props["RETRY_TOPIC"] == TOPIC
    assert props["DELAY"] == "3" and props["WAIT"] == "false"
    assert props["REAL_TOPIC"] == "%RETRY%push-group" and "REAL_QID" in props


async def test_two_consumers_split_the_queues_and_together_get_everything(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    first, second = Collector(), Collector()
    a = consumer(ns, first, instance="a")
    b = consumer(ns, second, instance="b")
    await asyncio.to_thread(a.start)
    await asyncio.to_thread(b.start)
    try:
        await until(
            lambda: len(a.process_queues) + len(b.process_queues) == 4 + 1 and len(a.process_queues) < 4
        )
        produce(broker, 40)
        await until(lambda: sum(first.bodies().values()) + sum(second.bodies().values()) >= 40)
    finally:
        await asyncio.to_thread(a.shutdown)
        await asyncio.to_thread(b.shutdown)
    together = first.bodies() + second.bodies()
    assert set(together) == {f"m-{i}".encode() for i in range(40)}
    assert first.bodies() and second.bodies()  # both had a share


async def test_broadcasting_gives_every_consumer_everything_with_local_offsets(
    cluster: tuple[NamesrvServer, BrokerController], tmp_path: Path
) -> None:
    ns, broker = cluster
    produce(broker, 12)
    collectors = [Collector(), Collector()]
    consumers = [
        consumer(
            ns,
            c,
            group="broadcast-group",
            instance=f"bc{i}",
            message_model="BROADCASTING",
            offset_store_dir=str(tmp_path / "offsets"),
        )
        for i, c in enumerate(collectors)
    ]
    for push in consumers:
        await asyncio.to_thread(push.start)
    try:
        await until(lambda: all(sum(c.bodies().values()) >= 12 for c in collectors))
    finally:
        for push in consumers:
            await asyncio.to_thread(push.shutdown)
    for collector in collectors:
        assert collector.bodies() == Counter(f"m-{i}".encode() for i in range(12))
    assert len(list((tmp_path / "offsets").rglob("offsets.json"))) == 2


async def test_a_reset_by_time_makes_a_running_consumer_consume_again(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    from broker_core.client import AdminClient

    ns, broker = cluster
    produce(broker, 8)
    collector = Collector()
    push = consumer(ns, collector, group="reset-group")
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: sum(collector.bodies().values()) >= 8)
        async with AdminClient(ns.address) as admin:
            await admin.reset_offset_to_earliest("reset-group", TOPIC)
        await until(lambda: sum(collector.bodies().values()) >= 16)
    finally:
        await asyncio.to_thread(push.shutdown)
    assert collector.bodies() == Counter({f"m-{i}".encode(): 2 for i in range(8)})


def in_queue_order(got: list[MessageExt]) -> bool:
    """Per queue, offsets never go back except to repeat the message just refused."""
    last: dict[int, int] = {}
    for msg in got:
        previous = last.get(msg.queue_id, -1)
        if msg.queue_offset < previous:
            return False
        last[msg.queue_id] = msg.queue_offset
    return True


async def test_orderly_keeps_queue_order_across_a_failure_and_a_rebalance(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    produce(broker, 40)
    first, second = Collector(fail={b"m-5", b"m-6"}), Collector()
    a = consumer(
        ns, first, group="orderly-group", instance="oa", orderly=True, suspend_current_queue_time_ms=100
    )
    b = consumer(
        ns, second, group="orderly-group", instance="ob", orderly=True, suspend_current_queue_time_ms=100
    )
    await asyncio.to_thread(a.start)
    try:
        await until(lambda: sum(first.bodies().values()) >= 20)
        await asyncio.to_thread(b.start)  # a rebalance hands some queues over mid-stream
        produce_more = [f"m-{i}".encode() for i in range(40)]
        await until(lambda: set(first.bodies()) | set(second.bodies()) >= set(produce_more))
    finally:
        await asyncio.to_thread(b.shutdown)
        await asyncio.to_thread(a.shutdown)
    assert in_queue_order(first.got) and in_queue_order(second.got)
    refused = [m for m in first.got if m.body == b"m-5"]
    assert len(refused) >= 2 and refused[1].reconsume_times == 1  # retried here, not sent back
    assert broker.store is not None
    assert broker.store.get_max_offset_in_queue("%RETRY%orderly-group", 0) == 0  # nothing sent back


async def test_an_orderly_queue_held_by_another_member_is_taken_soon_after_its_release(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    """A member that finds its queues locked (the one giving them up has not rebalanced yet)
    asks again within seconds, not a whole rebalance interval (20 s) later."""
    ns, broker = cluster
    produce(broker, 8)

    def lock_request(code: int) -> RemotingCommand:
        queues = [{"topic": TOPIC, "brokerName": broker.config.broker_name, "queueId": q} for q in range(4)]
        body = {"clientId": "the-leaving-member", "consumerGroup": "held-group", "mqSet": queues}
        return RemotingCommand.request(code, {}, orjson.dumps(body))

    async with raw_client() as client:
        held = await client.invoke(broker.address, lock_request(RequestCode.LOCK_BATCH_MQ))
        assert len(orjson.loads(held.body)["lockOKMQSet"]) == 4
        collector = Collector()
        push = consumer(ns, collector, group="held-group", instance="taker", orderly=True)
        await asyncio.to_thread(push.start)
        try:
            await asyncio.sleep(0.5)
            assert not collector.got, "nothing is consumed while another member holds the locks"
            await client.invoke(broker.address, lock_request(RequestCode.UNLOCK_BATCH_MQ))
            await until(lambda: sum(collector.bodies().values()) >= 8, timeout=10.0)
        finally:
            await asyncio.to_thread(push.shutdown)
    assert in_queue_order(collector.got)


async def test_consumers_joining_leaving_and_dying_mid_stream_lose_nothing(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    """At least once: every message arrives despite joins, a leave and a death; duplicates
    are counted and stay bounded by what was in flight at the hand-overs."""
    ns, broker = cluster
    total = 400
    collectors = {name: Collector() for name in ("a", "b", "c")}
    stuck = threading.Event()

    def dying_listener(msgs: list[MessageExt]) -> ConsumeStatus:
        collectors["c"](msgs)
        if any(m.body == b"m-302" for m in msgs):
            stuck.wait(30)  # holds m-302 until it "dies"
        return ConsumeStatus.CONSUME_SUCCESS

    def make(name: str) -> PushConsumer:
        config = ClientConfig(
            namesrv_addr=ns.address, instance_name=f"churn-{name}", persist_consumer_offset_interval=300
        )
        push = PushConsumer("churn-group", config=config, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
        listener = dying_listener if name == "c" else collectors[name]
        return push.subscribe(TOPIC, "*").register_listener(listener)

    a, b, c = make("a"), make("b"), make("c")
    await asyncio.to_thread(a.start)
    assert broker.store is not None
    for i in range(total):
        msg = MessageInner(TOPIC, i % 4, f"m-{i}".encode(), {"TAGS": "T"})
        assert broker.store.put_message(msg).ok
        if i == 100:
            await asyncio.to_thread(b.start)  # joins
        elif i == 200:
            await asyncio.to_thread(c.start)  # joins
            await asyncio.to_thread(a.shutdown)  # leaves cleanly
        elif i % 20 == 0:
            await asyncio.sleep(0.02)
    await asyncio.sleep(0.5)  # c is likely holding m-302 by now (if it got that queue)
    # c "dies" holding m-302: its instance stops without committing past what it holds.
    instance = c._instance
    assert instance is not None
    c._instance = None
    await asyncio.to_thread(instance.release)
    stuck.set()
    everything = {f"m-{i}".encode() for i in range(total)}

    def received() -> set[bytes]:
        return set(collectors["a"].bodies()) | set(collectors["b"].bodies()) | set(collectors["c"].bodies())

    await until(lambda: received() >= everything, timeout=30)
    held = bool(collectors["c"].bodies()[b"m-302"])
    if held:  # c died before finishing it: the queue's next owner gets it again
        await until(lambda: collectors["b"].bodies()[b"m-302"] >= 1, timeout=30)
    await asyncio.to_thread(b.shutdown)
    deliveries = sum((collectors[n].bodies() for n in "abc"), Counter())
    duplicates = sum(deliveries.values()) - len(everything)
    assert set(deliveries) == everything
    assert held, "c should have been holding m-302 when it died (its queues: 2 and 3)"
    # Bounded: at most what was pulled but not committed at each hand-over (4 queues x 32).
    assert duplicates <= 3 * 4 * 32, duplicates


async def test_flow_control_stops_pulling_a_queue_that_holds_too_much(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    assert broker.store is not None
    for i in range(200):  # all in queue 0
        assert broker.store.put_message(MessageInner(TOPIC, 0, f"m-{i}".encode(), {"TAGS": "T"})).ok
    collector = Collector()

    def slow(msgs: list[MessageExt]) -> ConsumeStatus:
        time.sleep(0.002)
        return collector(msgs)

    push = consumer(ns, collector, group="flow-group", pull_threshold_for_queue=10, consume_thread_max=2)
    push.register_listener(slow)
    await asyncio.to_thread(push.start)
    most = 0
    try:
        mq = next(mq for mq in push.process_queues if mq.topic == TOPIC and mq.queue_id == 0)
        while sum(collector.bodies().values()) < 200:
            most = max(most, push.process_queues[mq].count)
            await asyncio.sleep(0.001)
    finally:
        await asyncio.to_thread(push.shutdown)
    # Pulling stops once more than 10 are held; one pull (32) may be on its way then.
    assert 10 < most <= 10 + 32, most
    assert collector.bodies() == Counter(f"m-{i}".encode() for i in range(200))


async def test_compressed_bodies_and_tag_filtering_in_big_listener_batches(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    ns, broker = cluster
    assert broker.store is not None
    big = b"compressible " * 800  # over 4 KiB: stored zlib-compressed, as producers send it
    for i in range(12):
        body = zlib.compress(big + b"%d" % i) if i % 3 == 0 else f"m-{i}".encode()
        tags = "TagA" if i % 2 == 0 else "TagB"
        msg = MessageInner(TOPIC, i % 4, body, {"TAGS": tags, "UNIQ_KEY": f"U{i:031d}"})
        if i % 3 == 0:
            msg.sys_flag |= COMPRESSED_FLAG
        assert broker.store.put_message(msg).ok
    collector = Collector()
    push = consumer(ns, collector, consume_message_batch_max_size=32)
    push.subscribe(TOPIC, "TagA")
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: sum(collector.bodies().values()) >= 6)
        await asyncio.sleep(0.3)  # nothing else may come
    finally:
        await asyncio.to_thread(push.shutdown)
    expected = {(big + b"%d" % i) if i % 3 == 0 else f"m-{i}".encode() for i in range(0, 12, 2)}
    assert collector.bodies() == Counter(expected)
    assert all(not m.sys_flag & COMPRESSED_FLAG for m in collector.got)


async def test_a_pull_held_when_its_consumer_leaves_hands_nothing_to_the_group(
    cluster: tuple[NamesrvServer, BrokerController],
) -> None:
    """A consumer's long-polling pulls are held at the broker when it shuts down; messages
    arriving afterwards wake them.  They must not be read for (nor counted as handed to) a
    group member that is gone: the group's figures would say it consumed them."""
    ns, broker = cluster
    produce(broker, 8)
    collector = Collector()
    push = consumer(ns, collector)
    await asyncio.to_thread(push.start)
    try:
        await until(lambda: sum(collector.bodies().values()) >= 8)
        await asyncio.sleep(0.5)  # every queue's next pull is held, waiting for news
    finally:
        await asyncio.to_thread(push.shutdown)
    produce(broker, 4)
    await asyncio.sleep(1.0)  # the held pulls wake for the new messages
    assert broker.stats.totals().gets == {("push-group", TOPIC): 8}


class RefusingStrategy(AllocateMessageQueueAveragely):
    """AVG until ``refuse`` is set; then it refuses its input, as a strategy may (ValueError)."""

    name = "REFUSING"

    def __init__(self) -> None:
        self.refuse = False

    def allocate(
        self, consumer_group: str, current_cid: str, mq_all: Sequence[MessageQueue], cid_all: Sequence[str]
    ) -> list[MessageQueue]:
        if self.refuse:
            raise ValueError("refused for the test")
        return super().allocate(consumer_group, current_cid, mq_all, cid_all)


async def test_a_member_whose_strategy_refuses_keeps_its_queues(
    cluster: tuple[NamesrvServer, BrokerController], caplog: pytest.LogCaptureFixture
) -> None:
    """As RocketMQ's rebalanceByTopic: a topic the strategy cannot allocate keeps its queues."""
    ns, broker = cluster
    strategy = RefusingStrategy()
    a = consumer(ns, Collector(), instance="a", allocate_strategy=strategy)
    b = consumer(ns, Collector(), instance="b")
    await asyncio.to_thread(a.start)
    try:
        await until(lambda: len(a.process_queues) == 4 + 1)  # the topic's and the retry topic's
        strategy.refuse = True
        with caplog.at_level(logging.INFO, logger="broker_core.client.consumer.assignment"):
            await asyncio.to_thread(b.start)
            await until(lambda: len(b.process_queues) == 2)
            await until(lambda: any("refused for the test" in r.getMessage() for r in caplog.records))
        assert len(a.process_queues) == 4 + 1
    finally:
        await asyncio.to_thread(b.shutdown)
        await asyncio.to_thread(a.shutdown)
