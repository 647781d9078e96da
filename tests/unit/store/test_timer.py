"""Timer messages in the store (``store/timer.py``): any delivery time, in due order, refused
beyond ``timerMaxDelaySec``, and delivered exactly once across a crash (SIGKILL of a real
process in the middle of its deliveries) and a clean restart.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
from pathlib import Path

import pytest

from broker_core.model.message import (
    TRANSACTION_PREPARED_TYPE,
    MessageExt,
)
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore
from broker_core.store.timer import TimerProgress, apply_timer, requested_due_ms
from broker_core.topics import SCHEDULE_TOPIC, TIMER_TOPIC

from .conftest import (
    ORDERS,
    T0,
    Clock,
    config_json,
    message,
    read_queue,
    reopen,
    spawn_python,
    tiny_config,
)

MAX_DELAY_MS = 3 * 24 * 3600 * 1000


def bodies(store: MessageStore, queue_id: int = 0) -> list[bytes]:
    return [m.body for m in read_queue(store, ORDERS, queue_id)]


# -- what makes a timer message ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "due"),
    [
        ({"TIMER_DELAY_SEC": "3"}, T0 + 3000),
        ({"TIMER_DELAY_MS": "1500"}, T0 + 1500),
        ({"TIMER_DELIVER_MS": str(T0 + 7777)}, T0 + 7777),
        ({"__STARTDELIVERTIME": str(T0 + 4242)}, T0 + 4242),
        # RocketMQ's order: the delay in seconds, then in ms, then the absolute time.
        ({"TIMER_DELIVER_MS": str(T0 + 9000), "TIMER_DELAY_SEC": "2"}, T0 + 2000),
        ({"TIMER_DELIVER_MS": str(T0 + 9000), "TIMER_DELAY_MS": "20"}, T0 + 20),
        ({"KEYS": "k"}, None),
    ],
)
def test_the_requested_time_comes_from_each_property(props: dict[str, str], due: int | None) -> None:
    assert requested_due_ms(props, T0) == due


def test_a_timer_message_waits_in_the_timer_topic_with_its_real_place_and_due_time() -> None:
    msg = message(ORDERS, 3, b"t", TIMER_DELAY_SEC="5")
    assert apply_timer(msg, T0, MAX_DELAY_MS) is None
    assert (msg.topic, msg.queue_id) == (TIMER_TOPIC, 0)
    assert msg.properties["REAL_TOPIC"] == ORDERS and msg.properties["REAL_QID"] == "3"
    assert msg.properties["TIMER_OUT_MS"] == str(T0 + 5000)


@pytest.mark.parametrize(
    "props",
    [
        {"TIMER_DELIVER_MS": str(T0)},  # due now
        {"TIMER_DELIVER_MS": str(T0 - 60_000)},  # past: delivered at once (RocketMQ)
        {"TIMER_DELAY_SEC": "-1"},
        {"TIMER_DELIVER_MS": str(T0 + 5000), "TIMER_OUT_MS": str(T0 + 5000)},  # already delivered once
    ],
)
def test_a_time_already_come_or_resolved_stores_the_message_in_its_topic(props: dict[str, str]) -> None:
    msg = message(ORDERS, 1, b"now", **props)
    assert apply_timer(msg, T0, MAX_DELAY_MS) is None
    assert (msg.topic, msg.queue_id) == (ORDERS, 1)


def test_a_delay_level_wins_and_the_timer_properties_are_dropped() -> None:
    msg = message(ORDERS, 0, b"d", DELAY="2", TIMER_DELIVER_MS=str(T0 + 9000), TIMER_DELAY_SEC="9")
    assert apply_timer(msg, T0, MAX_DELAY_MS) is None
    assert msg.topic == ORDERS and "TIMER_DELIVER_MS" not in msg.properties
    assert "TIMER_DELAY_SEC" not in msg.properties and msg.properties["DELAY"] == "2"


def test_a_transactional_half_message_is_not_held() -> None:
    msg = message(ORDERS, 0, b"half", TIMER_DELAY_SEC="5")
    msg.sys_flag = TRANSACTION_PREPARED_TYPE
    assert apply_timer(msg, T0, MAX_DELAY_MS) is None
    assert msg.topic == ORDERS


@pytest.mark.parametrize(
    ("props", "says"),
    [
        ({"TIMER_DELAY_SEC": str(3 * 24 * 3600 + 1)}, "timerMaxDelaySec"),
        ({"TIMER_DELIVER_MS": str(T0 + MAX_DELAY_MS + 1)}, "timerMaxDelaySec"),
        ({"TIMER_DELIVER_MS": "soon"}, "TIMER_DELIVER_MS must be a whole number"),
        ({"TIMER_DELAY_MS": "1.5"}, "TIMER_DELAY_MS must be a whole number"),
    ],
)
def test_a_bad_or_too_distant_time_is_refused_with_a_reason(
    store: MessageStore, props: dict[str, str], says: str
) -> None:
    result = store.put_message(message(ORDERS, 0, b"x", **props))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "timer message illegal" in result.remark and says in result.remark
    assert store.get_max_offset_in_queue(TIMER_TOPIC, 0) == 0


def test_the_limit_follows_timer_max_delay_sec(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store", timer_max_delay_sec=10)
    with MessageStore(config, clock_ms=Clock(T0)) as store:
        assert store.put_message(message(ORDERS, 0, b"ok", TIMER_DELAY_SEC="10")).ok
        refused = store.put_message(message(ORDERS, 0, b"far", TIMER_DELAY_SEC="11"))
        assert refused.status is PutMessageStatus.MESSAGE_ILLEGAL and "10000 ms" in refused.remark


def test_nobody_writes_the_timer_topic_directly(store: MessageStore) -> None:
    result = store.put_message(message(TIMER_TOPIC, 0, b"sneaky"))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL and TIMER_TOPIC in result.remark


# -- delivery --------------------------------------------------------------------------------


def test_messages_come_out_in_due_order_whatever_order_they_went_in(
    store: MessageStore, clock: Clock
) -> None:
    for body, delay in ((b"third", 3000), (b"first", 1000), (b"second", 2000), (b"also-first", 1000)):
        assert store.put_message(message(ORDERS, 0, body, TIMER_DELAY_MS=str(delay))).ok
    store.put_message(message(ORDERS, 0, b"plain"))
    assert bodies(store) == [b"plain"]  # (and every entry dispatched)
    assert store.deliver_due(T0 + 999) == (0, T0 + 1000)
    assert store.deliver_due(T0 + 1000) == (2, T0 + 2000)
    assert bodies(store) == [b"plain", b"first", b"also-first"]  # equal times: in send order
    assert store.deliver_due(T0 + 10_000) == (2, None)
    assert bodies(store) == [b"plain", b"first", b"also-first", b"second", b"third"]
    assert store.deliver_due(T0 + 20_000) == (0, None)
    assert store.stats["timerDelivered"] == 4 and store.stats["timerWaiting"] == 0


def test_a_delivered_message_is_back_in_its_queue_with_the_timer_properties(
    store: MessageStore, clock: Clock
) -> None:
    sent = message(ORDERS, 1, b"payload", TIMER_DELIVER_MS=str(T0 + 500), KEYS="t-1", TAGS="blue")
    sent.flag = 7
    assert store.put_message(sent).ok
    assert store.wait_dispatched()  # the timer reads its queue, which follows the log
    clock.advance(600)
    assert store.deliver_due() == (1, None)
    [got] = read_queue(store, ORDERS, 1)
    assert (got.body, got.flag, got.born_host) == (b"payload", 7, "10.1.2.3:50000")
    props = got.properties
    assert props["TIMER_DELIVER_MS"] == str(T0 + 500) and props["TIMER_OUT_MS"] == str(T0 + 500)
    assert props["TIMER_ENQUEUE_MS"] == str(T0) and props["TIMER_DEQUEUE_MS"] == str(T0 + 600)
    assert "REAL_TOPIC" not in props and "REAL_QID" not in props
    assert props["TAGS"] == "blue"
    assert [m.body for m in store.query_message(ORDERS, "t-1")] == [b"payload"]
    assert store.check() == []


def test_a_message_read_in_after_later_ones_were_delivered_goes_at_once(
    store: MessageStore, clock: Clock
) -> None:
    assert store.put_message(message(ORDERS, 0, b"a", TIMER_DELAY_MS="100")).ok
    assert store.wait_dispatched()
    assert store.deliver_due(T0 + 100) == (1, None)
    clock.ms = T0 + 40  # stored (as a clock step back would) with a due time under the last delivery's
    assert store.put_message(message(ORDERS, 0, b"b", TIMER_DELAY_MS="20")).ok
    assert store.wait_dispatched()
    assert store.deliver_due(T0 + 100) == (1, None)
    assert bodies(store) == [b"a", b"b"]


def test_a_pass_stops_at_max_messages_and_says_to_come_back_now(store: MessageStore) -> None:
    for i in range(5):
        assert store.put_message(message(ORDERS, 0, b"m%d" % i, TIMER_DELAY_MS=str(10 + i))).ok
    store.wait_dispatched()
    assert store.timers.deliver_due(T0 + 100, max_messages=3) == (3, T0 + 100)
    assert store.timers.deliver_due(T0 + 100) == (2, None)
    assert bodies(store) == [b"m%d" % i for i in range(5)]


def test_delay_levels_and_timers_share_the_scan(store: MessageStore) -> None:
    assert store.put_message(message(ORDERS, 0, b"level-1", DELAY="1")).ok
    assert store.put_message(message(ORDERS, 0, b"timer", TIMER_DELAY_MS="500")).ok
    assert store.wait_dispatched()
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 0) == 1
    assert store.deliver_due(T0) == (0, T0 + 500)
    assert store.deliver_due(T0 + 500) == (1, T0 + 1000)
    assert store.deliver_due(T0 + 1000) == (1, None)
    assert bodies(store) == [b"timer", b"level-1"]


def test_the_earliest_due_time_sees_messages_no_pass_has_read_yet(store: MessageStore) -> None:
    assert store.timers.earliest_due_ms() is None
    assert store.put_message(message(ORDERS, 0, b"x", TIMER_DELAY_MS="700")).ok
    store.wait_dispatched()
    assert store.timers.earliest_due_ms() == T0 + 700
    assert store.timers.backlog() == {"waiting": 1, "next_due_ms": T0 + 700}


def test_a_foreign_delivery_marker_moves_nothing(store: MessageStore) -> None:
    assert store.put_message(message(ORDERS, 0, b"x", TIMER_DELAY_MS="700")).ok
    store.wait_dispatched()
    before = store.timers.progress
    # A copy of a message another broker's timer delivered names an entry that is not this one's.
    store.timers.observe({"TIMER_OFFSET": "0", "TIMER_OUT_MS": str(T0 + 9000), "TIMER_ENQUEUE_MS": "123"})
    assert store.timers.progress == before
    store.timers.observe({"TIMER_OFFSET": "0", "TIMER_OUT_MS": str(T0 + 700), "TIMER_ENQUEUE_MS": str(T0)})
    assert store.timers.progress.enqueued == 1


# -- restarts ----------------------------------------------------------------------------------


def test_a_clean_restart_keeps_waiting_messages_and_delivers_nothing_twice(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    clock = Clock(T0)
    with MessageStore(config, clock_ms=clock) as store:
        # One long wait ahead of many short ones: the restart must read back to it.
        assert store.put_message(message(ORDERS, 0, b"long", TIMER_DELAY_SEC="3600")).ok
        for i in range(150):
            assert store.put_message(message(ORDERS, 0, b"s%d" % i, TIMER_DELAY_MS=str(1000 + i))).ok
        assert store.wait_dispatched()
        assert store.deliver_due(T0 + 1100)[0] == 101
    saved = json.loads((tmp_path / "store" / "config" / "delayOffset.json").read_text())
    assert saved["timerProgress"]["lowOffset"] == 0 and saved["timerProgress"]["enqueuedOffset"] == 151
    with MessageStore(config, clock_ms=clock) as store:
        assert store.timers.backlog() == {"waiting": 50, "next_due_ms": T0 + 1101}
        assert store.deliver_due(T0 + 2000) == (49, T0 + 3_600_000)
        assert store.deliver_due(T0 + 3_600_000) == (1, None)
        got = bodies(store)
        assert sorted(got) == sorted([b"long"] + [b"s%d" % i for i in range(150)])
        assert len(got) == len(set(got)) == 151


def test_a_slave_takes_the_progress_with_the_delay_offsets(tmp_path: Path) -> None:
    with MessageStore(tiny_config(tmp_path / "store"), clock_ms=Clock(T0)) as store:
        master = {"offsetTable": {"1": 4}, "timerProgress": TimerProgress(2, 9, 0).to_json()}
        assert store.schedule.copy_from(master)
        assert store.timers.progress == TimerProgress(2, 9, 0)
        assert store.schedule.encode() == master
        with pytest.raises(ValueError):
            store.schedule.decode({"offsetTable": {}, "timerProgress": {"lowOffset": -1}})
        assert store.schedule.offset_table == {1: 4}


DELIVERER = """
import json, os, signal, sys, time
from broker_core.config import StoreConfig
from broker_core.store.store import MessageStore

config = StoreConfig(**json.loads(sys.argv[1]))
now = int(sys.argv[2])
kill_at = int(sys.argv[3])  # die once this many delivered messages are dispatched (0: never)
store = MessageStore(config, clock_ms=lambda: now).open()

def crash_midway(arrived):
    # The arrival listener runs on the dispatcher thread while deliver_due runs on this one.
    delivered = sum(store.get_max_offset_in_queue("orders", q) for q in (0, 1))
    if kill_at and delivered >= kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

store.add_arrival_listener(crash_midway)
print("ready", flush=True)
delivered, next_due = store.deliver_due(now)
print("done", delivered, flush=True)
time.sleep(60)
"""

TIMERS = 240


def due_offsets() -> list[int]:
    """Message i's delay, ms: spread over 1-20 s in no order."""
    rng = random.Random(5)
    return [rng.randrange(1000, 20_000) for _ in range(TIMERS)]


def store_timer_messages(config_root: Path) -> None:
    config = tiny_config(config_root, flush_disk_type="SYNC_FLUSH", flush_interval_consume_queue=20)
    with MessageStore(config, clock_ms=Clock(T0)) as store:
        for i, delay in enumerate(due_offsets()):
            props = {"TIMER_DELAY_MS": str(delay), "UNIQ_KEY": f"T{i}", "KEYS": f"t{i}"}
            assert store.put_message(message(ORDERS, i % 2, b"timer-%d" % i, **props)).ok


def uniq_counts(store: MessageStore) -> dict[str, int]:
    counts: dict[str, int] = {}
    for queue_id in (0, 1):
        for msg in read_queue(store, ORDERS, queue_id):
            assert msg.uniq_key is not None
            counts[msg.uniq_key] = counts.get(msg.uniq_key, 0) + 1
    return counts


def due_keys(now_offset_ms: int) -> set[str]:
    return {f"T{i}" for i, delay in enumerate(due_offsets()) if delay <= now_offset_ms}


@pytest.mark.parametrize(
    "kill_at", [1, 40, 90, 0], ids=lambda n: f"kill-after-{n}" if n else "kill-when-done"
)
def test_it_delivers_timer_messages_exactly_once_across_a_crash(tmp_path: Path, kill_at: int) -> None:
    config = tiny_config(tmp_path / "store", flush_disk_type="SYNC_FLUSH", flush_interval_consume_queue=20)
    store_timer_messages(tmp_path / "store")
    now = T0 + 10_000
    due = len(due_keys(10_000))
    assert 100 < due < TIMERS - 50
    deliverer = spawn_python(DELIVERER, config_json(config), str(now), str(kill_at))
    assert deliverer.stdout is not None
    try:
        assert deliverer.stdout.readline().strip() == "ready"
        if not kill_at:
            assert deliverer.stdout.readline().startswith(f"done {due}")
        deliverer.wait(timeout=30 if kill_at else 0.01)
    except subprocess.TimeoutExpired:
        assert not kill_at, "the deliverer did not crash itself"
    finally:
        deliverer.send_signal(signal.SIGKILL)
        deliverer.communicate(timeout=10)
    assert deliverer.returncode == -signal.SIGKILL

    clock = Clock(now)
    store = reopen(config, clock)
    try:
        before = sum(uniq_counts(store).values())
        assert kill_at <= before <= due
        store.deliver_due(now)
        counts = uniq_counts(store)
        duplicates = {k: n for k, n in counts.items() if n > 1}
        assert duplicates == {}, f"delivered more than once: {sorted(duplicates)[:10]}"
        assert set(counts) == due_keys(10_000)
        assert store.check() == []
    finally:
        store.close()

    clock.ms = T0 + 30_000
    store = reopen(config, clock)
    try:
        delivered, next_due = store.deliver_due(T0 + 30_000)
        assert delivered == TIMERS - due and next_due is None
        counts = uniq_counts(store)
        assert set(counts) == {f"T{i}" for i in range(TIMERS)}
        assert set(counts.values()) == {1}
        sample: MessageExt = store.query_message(ORDERS, "t5", 4, 0, 2**62)[0]
        assert sample.body == b"timer-5" and sample.queue_id == 1
        assert store.check() == []
    finally:
        store.close()
