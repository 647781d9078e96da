"""Consume queues (``broker_core.store.consumequeue``) and reads by queue offset through the store."""

from __future__ import annotations

import filecmp
import random
import shutil
from pathlib import Path

import pytest

from broker_core.model.hashcode import tags_code
from broker_core.model.message import TRANSACTION_PREPARED_TYPE, MessageInner, decode_record
from broker_core.store.consumequeue import CQ_STORE_UNIT_SIZE
from broker_core.store.results import GetMessageStatus
from broker_core.store.store import MessageStore
from broker_core.topics import SCHEDULE_TOPIC

from .conftest import AUDIT, HOUR_MS, ORDERS, T0, Clock, message, read_queue, reopen, tiny_config


def fill(
    store: MessageStore, count: int, topic: str = ORDERS, queue_id: int = 0, body_size: int = 20
) -> None:
    for i in range(count):
        assert store.put_message(message(topic, queue_id, b"%0*d" % (body_size, i))).ok
    assert store.wait_dispatched()


# -- statuses ------------------------------------------------------------------------------


def test_it_finds_messages_and_says_where_to_read_next(store: MessageStore) -> None:
    fill(store, 10)
    result = store.get_message(ORDERS, 0, 3, 4)
    assert result.status is GetMessageStatus.FOUND
    assert result.queue_offsets == [3, 4, 5, 6]
    assert result.next_begin_offset == 7
    assert (result.min_offset, result.max_offset) == (0, 10)
    assert [decode_record(r).body for r in result.messages] == [b"%020d" % i for i in range(3, 7)]
    assert result.body == b"".join(result.messages)
    assert result.buffer_total_size == len(result.body)
    assert store.check() == []


def test_it_answers_overflow_one_at_the_end_of_the_queue(store: MessageStore) -> None:
    fill(store, 5)
    result = store.get_message(ORDERS, 0, 5, 32)
    assert result.status is GetMessageStatus.OFFSET_OVERFLOW_ONE
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (5, 0, 5)
    assert result.messages == [] and result.status.no_new_message


def test_it_answers_overflow_badly_past_the_end_and_sends_the_reader_back_to_the_min(
    store: MessageStore,
) -> None:
    fill(store, 5)
    result = store.get_message(ORDERS, 0, 6, 32)
    assert result.status is GetMessageStatus.OFFSET_OVERFLOW_BADLY
    assert result.status.offset_moved
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (0, 0, 5)


def test_it_answers_too_small_below_the_min_offset(store: MessageStore) -> None:
    fill(store, 5)
    result = store.get_message(ORDERS, 0, -1, 32)
    assert result.status is GetMessageStatus.OFFSET_TOO_SMALL
    assert result.next_begin_offset == 0 and result.status.offset_moved


def test_it_answers_too_small_below_an_expired_min_with_the_new_min_as_next(
    tmp_path: Path, clock: Clock
) -> None:
    with MessageStore(tiny_config(tmp_path), clock_ms=clock) as store:
        fill(store, 700, body_size=200)  # 297-byte records: 3.2 segments
        clock.advance(100 * HOUR_MS)
        store.put_message(message(body=b"new"))
        segments = len(store.commit_log.queue.files)
        report = store.delete_expired_files(manual=True)
        assert report.commit_log_files_deleted == segments - 1 == 3
        min_offset = store.get_min_offset_in_queue(ORDERS, 0)
        assert min_offset > 0
        result = store.get_message(ORDERS, 0, 0, 32)
        assert result.status is GetMessageStatus.OFFSET_TOO_SMALL
        assert (result.next_begin_offset, result.min_offset) == (min_offset, min_offset)
        found = store.get_message(ORDERS, 0, min_offset, 1)
        assert found.status is GetMessageStatus.FOUND
        assert decode_record(found.messages[0]).commit_log_offset >= store.commit_log.min_offset
        assert store.check() == []


def test_it_answers_no_matched_logic_queue_for_an_unknown_topic_or_queue(store: MessageStore) -> None:
    fill(store, 1)
    for topic, queue_id in [("nobody", 0), (ORDERS, 5)]:
        result = store.get_message(topic, queue_id, 0, 32)
        assert result.status is GetMessageStatus.NO_MATCHED_LOGIC_QUEUE
        assert (result.next_begin_offset, result.min_offset, result.max_offset) == (0, 0, 0)
    assert store.get_max_offset_in_queue("nobody", 0) == 0
    assert store.get_min_offset_in_queue("nobody", 0) == 0


def test_it_answers_no_message_in_queue_for_a_queue_that_holds_nothing(store: MessageStore) -> None:
    store.consume_queues.find_or_create(AUDIT, 2)  # a queue the broker created, never written
    result = store.get_message(AUDIT, 2, 0, 32)
    assert result.status is GetMessageStatus.NO_MESSAGE_IN_QUEUE
    assert (result.next_begin_offset, result.min_offset, result.max_offset) == (0, 0, 0)


def test_it_reports_min_and_max_offsets(store: MessageStore) -> None:
    fill(store, 7, queue_id=1)
    assert store.get_min_offset_in_queue(ORDERS, 1) == 0
    assert store.get_max_offset_in_queue(ORDERS, 1) == 7


# -- filters and limits ----------------------------------------------------------------------


def test_it_filters_by_tag_hash_and_skips_the_others(store: MessageStore) -> None:
    tags = ["TagA", "TagB", "TagC"]
    for i in range(30):
        store.put_message(message(body=b"m%d" % i, TAGS=tags[i % 3]))
    store.wait_dispatched()
    wanted = {tags_code("TagA"), tags_code("TagC")}
    result = store.get_message(ORDERS, 0, 0, 32, tags_codes=wanted)
    assert result.status is GetMessageStatus.FOUND
    found = [decode_record(r) for r in result.messages]
    assert {m.tags for m in found} == {"TagA", "TagC"}
    assert result.queue_offsets == [i for i in range(30) if i % 3 != 1]
    assert result.next_begin_offset == 30

    limited = store.get_message(ORDERS, 0, 0, 3, tags_codes={tags_code("TagB")})
    assert limited.queue_offsets == [1, 4, 7]
    assert limited.next_begin_offset == 8


def test_it_answers_no_matched_message_when_no_tag_matches_and_skips_past_them(store: MessageStore) -> None:
    for i in range(10):
        store.put_message(message(body=b"m%d" % i, TAGS="TagA"))
    store.wait_dispatched()
    result = store.get_message(ORDERS, 0, 2, 32, tags_codes={tags_code("TagZ")})
    assert result.status is GetMessageStatus.NO_MATCHED_MESSAGE
    assert result.messages == []
    assert result.next_begin_offset == 10


def test_it_returns_at_most_max_count_and_at_most_the_transfer_count(store: MessageStore) -> None:
    fill(store, 50)
    assert store.get_message(ORDERS, 0, 0, 5).queue_offsets == list(range(5))
    capped = store.get_message(ORDERS, 0, 0, 100)
    assert len(capped.messages) == store.config.max_transfer_count_on_message_in_memory == 32
    assert capped.next_begin_offset == 32


def test_it_stops_at_the_byte_limit_but_always_returns_one_message(tmp_path: Path, clock: Clock) -> None:
    config = tiny_config(tmp_path, max_transfer_bytes_on_message_in_memory=1000)
    with MessageStore(config, clock_ms=clock) as store:
        for _ in range(5):
            store.put_message(message(body=b"x" * 200))  # 297-byte records
        store.put_message(message(body=b"y" * 2000))  # a 2097-byte record
        store.wait_dispatched()
        result = store.get_message(ORDERS, 0, 0, 32)
        assert result.queue_offsets == [0, 1, 2]
        assert result.buffer_total_size == 3 * 297
        assert result.next_begin_offset == 3
        big = store.get_message(ORDERS, 0, 5, 32)
        assert big.status is GetMessageStatus.FOUND
        assert big.buffer_total_size == 2097 and big.next_begin_offset == 6


# -- time ------------------------------------------------------------------------------------


def test_it_finds_the_first_offset_stored_at_or_after_a_time(store: MessageStore, clock: Clock) -> None:
    for i in range(10):
        clock.ms = T0 + 10 * i
        store.put_message(message(body=b"m%d" % i))
    store.wait_dispatched()
    by_time = store.get_offset_in_queue_by_time
    assert by_time(ORDERS, 0, T0 + 15) == 2
    assert by_time(ORDERS, 0, T0 + 20) == 2
    assert by_time(ORDERS, 0, T0 + 21) == 3
    assert by_time(ORDERS, 0, T0) == 0
    assert by_time(ORDERS, 0, T0 - 1000) == 0
    assert by_time(ORDERS, 0, T0 + 90) == 9
    assert by_time(ORDERS, 0, T0 + 91) == 10  # every message older: the max offset
    assert by_time("nobody", 0, T0) == 0


def test_it_finds_offsets_by_time_among_equal_store_times(store: MessageStore, clock: Clock) -> None:
    for i in range(9):
        clock.ms = T0 + 100 * (i // 3)  # three messages per millisecond
        store.put_message(message(body=b"m%d" % i))
    store.wait_dispatched()
    assert [store.get_offset_in_queue_by_time(ORDERS, 0, T0 + t) for t in (0, 1, 100, 150, 200, 201)] == [
        0,
        3,
        3,
        6,
        6,
        9,
    ]


def test_it_reports_the_earliest_store_time_of_a_queue_and_of_the_store(
    store: MessageStore, clock: Clock
) -> None:
    assert store.get_earliest_message_time(ORDERS, 0) == -1
    clock.ms = T0 + 5
    store.put_message(message(AUDIT, 0, b"first"))
    for i in range(3):
        clock.ms = T0 + 100 + i
        store.put_message(message(ORDERS, 1, b"m%d" % i))
    store.wait_dispatched()
    assert store.get_earliest_message_time(ORDERS, 1) == T0 + 100
    assert store.get_earliest_message_time() == T0 + 5
    assert store.get_message_store_timestamp(ORDERS, 1, 2) == T0 + 102
    assert store.get_message_store_timestamp(ORDERS, 1, 3) == -1


# -- rebuild ---------------------------------------------------------------------------------


def consume_queue_files(root: Path) -> dict[str, Path]:
    return {str(p.relative_to(root)): p for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("drain_each", [False, True], ids=["batches", "one-at-a-time"])
def test_it_rebuilds_consume_queues_byte_for_byte_from_the_commit_log(
    tmp_path: Path, drain_each: bool
) -> None:
    # one-at-a-time: each append is dispatched alone (the dispatcher's one-record path, as
    # a broker's one-at-a-time sends are); batches: as the dispatcher thread finds them.
    config = tiny_config(tmp_path / "store")
    clock = Clock()
    rng = random.Random(3)
    store = MessageStore(config, clock_ms=clock).open()
    queues = [(ORDERS, 0), (ORDERS, 1), (ORDERS, 2), (AUDIT, 0)]
    for i in range(900):
        clock.advance(rng.randrange(0, 3))
        topic, queue_id = queues[rng.randrange(len(queues))]
        props = {"TAGS": rng.choice(["TagA", "TagB", "流"]), "KEYS": f"k{i}", "UNIQ_KEY": f"U{i:08d}"}
        if i % 50 == 7:
            props["DELAY"] = str(1 + i % 3)
        msg = MessageInner(topic, queue_id, rng.randbytes(rng.randrange(1, 300)), props)
        if i % 10 == 0:
            assert store.put_messages([msg, MessageInner(topic, queue_id, b"pair", {"TAGS": "TagA"})]).ok
        else:
            assert store.put_message(msg).ok
        if drain_each:
            store.dispatcher.drain()
    assert store.check() == []
    assert store.get_max_offset_in_queue(ORDERS, 0) > 2 * 100, "consume-queue files must roll"
    assert store.get_max_offset_in_queue(SCHEDULE_TOPIC, 0) > 0
    store.close()

    original = tmp_path / "original-consumequeue"
    shutil.copytree(config.root / "consumequeue", original)
    fresh = MessageStore(config, clock_ms=clock)
    fresh.rebuild_consume_queues()
    assert not (config.root / "consumequeue").exists()
    fresh.open()
    assert fresh.check() == []
    fresh.close()

    rebuilt = consume_queue_files(config.root / "consumequeue")
    expected = consume_queue_files(original)
    assert sorted(rebuilt) == sorted(expected)
    assert len(expected) > 8
    for name, path in expected.items():
        assert filecmp.cmp(path, rebuilt[name], shallow=False), f"{name} differs after the rebuild"


def test_it_gives_half_messages_no_queue_slot_so_later_messages_stay_readable(store: MessageStore) -> None:
    # RocketMQ stores PREPARED and ROLLBACK records with QUEUEOFFSET 0 and does not advance
    # the queue's next offset: they never get a consume-queue entry.
    store.put_message(message(body=b"before"))
    half = MessageInner(ORDERS, 0, b"half", {"TAGS": "TagA"}, sys_flag=TRANSACTION_PREPARED_TYPE)
    assert store.put_message(half).ok
    after = store.put_message(message(body=b"after"))
    assert after.queue_offset == 1, "a half message must not take a queue offset"
    assert [m.body for m in read_queue(store, ORDERS, 0)] == [b"before", b"after"]
    assert store.check() == []


# -- a million messages ----------------------------------------------------------------------


def test_it_keeps_a_million_small_messages_contiguous_through_file_rollover(tmp_path: Path) -> None:
    config = tiny_config(
        tmp_path, mapped_file_size_commit_log=16 * 1024 * 1024, mapped_file_size_consume_queue=20 * 1000
    )
    total, batch = 1_000_000, 250
    store = MessageStore(config, clock_ms=Clock()).open()
    try:
        for start in range(0, total, batch):
            queue_id = (start // batch) % 2
            result = store.put_messages(
                [MessageInner("m", queue_id, b"%016d" % i) for i in range(start, start + batch)]
            )
            assert result.ok, result.remark
        assert store.wait_dispatched(timeout=60)
        per_queue = total // 2
        for queue_id in (0, 1):
            cq = store.consume_queues.find("m", queue_id)
            assert cq is not None
            assert (cq.min_offset, cq.max_offset) == (0, per_queue)
            names = sorted(p.name for p in (config.root / "consumequeue" / "m" / str(queue_id)).iterdir())
            assert names == [f"{n * 20_000:020d}" for n in range(per_queue // 1000)]
            previous_end = -1
            offset = 0
            while offset < per_queue:
                entries = cq.entries(offset, 1000)
                assert len(entries) == 1000, f"queue {queue_id} has a hole at {offset}"
                for phys, size, tag in entries:
                    assert size == 91 + 16 + 1 and tag == 0
                    assert phys >= previous_end
                    previous_end = phys + size
                offset += len(entries)
        rng = random.Random(11)
        for _ in range(300):
            queue_id = rng.randrange(2)
            offset = rng.randrange(per_queue)
            result = store.get_message("m", queue_id, offset, 1)
            assert result.status is GetMessageStatus.FOUND
            msg = decode_record(result.messages[0])
            index = int(msg.body)
            # Batches of 250 alternate between the queues.
            assert (index // batch) % 2 == queue_id
            assert (index // (2 * batch)) * batch + index % batch == offset == msg.queue_offset
        assert store.check() == []
    finally:
        store.close()
    reopened = reopen(config)
    try:
        assert reopened.get_max_offset_in_queue("m", 1) == total // 2
        assert reopened.put_message(MessageInner("m", 1, b"one more")).queue_offset == total // 2
    finally:
        reopened.close()


def test_it_writes_blank_entries_before_the_first_entry_of_a_queue_that_starts_late(tmp_path: Path) -> None:
    # A consume queue whose files were all deleted restarts at its next offset, not at 0.
    config = tiny_config(tmp_path)
    store = MessageStore(config, clock_ms=Clock()).open()
    fill(store, 250, queue_id=0)
    store.close()
    shutil.rmtree(config.root / "consumequeue" / ORDERS)
    (config.root / "checkpoint").unlink()
    store = reopen(config)
    try:
        assert store.get_max_offset_in_queue(ORDERS, 0) == 250
        assert [m.queue_offset for m in read_queue(store, ORDERS, 0)] == list(range(250))
        assert store.check() == []
        size = CQ_STORE_UNIT_SIZE * 100
        assert (config.root / "consumequeue" / ORDERS / "0" / f"{2 * size:020d}").exists()
    finally:
        store.close()


@pytest.mark.parametrize("queue_id", [0, 3])
def test_it_keeps_queue_offsets_after_a_clean_reopen(tmp_path: Path, queue_id: int) -> None:
    config = tiny_config(tmp_path)
    store = MessageStore(config, clock_ms=Clock()).open()
    fill(store, 120, queue_id=queue_id)
    store.close()
    store = reopen(config)
    try:
        assert store.put_message(message(queue_id=queue_id, body=b"again")).queue_offset == 120
        assert len(read_queue(store, ORDERS, queue_id)) == 121
        assert store.check() == []
    finally:
        store.close()
