"""Failures found in review, each reproduced here so it stays fixed."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from broker_core.model.hashcode import tags_code
from broker_core.model.message import MessageBatchInner, MessageInner, encode_batch, encode_properties
from broker_core.store.mappedfilequeue import MappedFileQueue
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore
from broker_core.topics import SCHEDULE_TOPIC

from .conftest import ORDERS, T0, Clock, message, read_queue, reopen, tiny_config

SECOND = 1000


@pytest.mark.skipif(shutil.which("chattr") is None, reason="needs chattr to make a directory immutable")
def test_it_keeps_dispatching_after_an_index_file_could_not_be_created_mid_batch(tmp_path: Path) -> None:
    # A failed index roll puts the batch back; the retry meets keys indexed before the
    # failure.  That path once re-entered the index lock and hung the dispatcher for good.
    config = tiny_config(tmp_path / "store", max_index_num=20, max_hash_slot_num=8)
    index_dir = tmp_path / "store" / "index"
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(10):
            store.put_message(message(body=b"before", UNIQ_KEY=f"B{i}"))
        assert store.wait_dispatched()
        subprocess.run(["chattr", "+i", str(index_dir)], check=True)
        try:
            for i in range(30):
                assert store.put_message(message(body=b"during", UNIQ_KEY=f"D{i}")).ok
            time.sleep(0.3)  # the dispatcher fills the current index file, then fails to roll
        finally:
            subprocess.run(["chattr", "-i", str(index_dir)], check=True)
        assert store.wait_dispatched(timeout=10), "dispatch never resumed after the index roll failed"
        for i in range(30):
            assert [m.body for m in store.query_message(ORDERS, f"D{i}")] == [b"during"]
        assert len(read_queue(store, ORDERS, 0)) == 40
        assert store.check() == []


def test_it_never_deletes_the_last_file_or_one_another_run_already_took(tmp_path: Path) -> None:
    queue = MappedFileQueue(tmp_path, 4096)
    for _ in range(4):
        mf = queue.last_for_write()
        mf.wrote_position = mf.file_size
    stale = list(queue.files)
    assert [m.file_from_offset for m in queue.delete_first(stale[:2])] == [0, 4096]
    # A second run that decided from the same old snapshot deletes nothing now.
    assert queue.delete_first(stale[:3]) == []
    # Asked for everything, it still keeps the newest file: the log keeps its position.
    assert len(queue.delete_first(list(queue.files))) == 1
    assert [m.file_from_offset for m in queue.files] == [3 * 4096]
    assert queue.max_offset == 4 * 4096
    queue.close()


def test_it_serialises_concurrent_expiry_runs(tmp_path: Path) -> None:
    clock = Clock()
    with MessageStore(tiny_config(tmp_path / "store"), clock_ms=clock) as store:
        for _ in range(600):
            store.put_message(message(body=b"x" * 500))
        clock.advance(100 * 3_600_000)
        end = store.commit_log.max_offset
        threads = [
            threading.Thread(target=store.delete_expired_files, kwargs={"manual": True}) for _ in range(4)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert store.commit_log.queue.files, "the segment being written was deleted"
        result = store.put_message(message(body=b"after"))
        assert result.ok and result.wrote_offset >= end


def test_it_skips_a_delayed_message_that_can_no_longer_be_delivered_and_delivers_the_rest(
    tmp_path: Path,
) -> None:
    clock = Clock()
    config = tiny_config(tmp_path / "store", max_message_size=4000)
    topic = "orders-archive-of-2023"  # longer than SCHEDULE_TOPIC_XXXX: the delivered copy is larger
    with MessageStore(config, clock_ms=clock) as store:
        # Stored in SCHEDULE_TOPIC_XXXX the record is exactly maxMessageSize; back in its
        # topic (a longer name, the same properties) it is 3 bytes over.
        props = encode_properties({"DELAY": "2", "REAL_TOPIC": topic, "REAL_QID": "0"})
        body_len = 4000 - 91 - len(SCHEDULE_TOPIC) - len(props)
        big = store.put_message(MessageInner(topic, 0, b"b" * body_len, {"DELAY": "2"}))
        assert big.ok and big.wrote_bytes == 4000, big.remark
        assert store.put_message(MessageInner(topic, 0, b"small", {"DELAY": "2"})).ok
        assert store.wait_dispatched()
        clock.advance(10 * SECOND)
        delivered, next_due = store.deliver_due()
        assert delivered == 1
        assert [m.body for m in read_queue(store, topic, 0)] == [b"small"]
        assert next_due is None


def test_it_delivers_each_delayed_message_once_when_scans_overlap(tmp_path: Path) -> None:
    clock = Clock()
    with MessageStore(tiny_config(tmp_path / "store"), clock_ms=clock) as store:
        for i in range(300):
            assert store.put_message(message(queue_id=i % 2, body=b"d%d" % i, DELAY="1", UNIQ_KEY=f"K{i}")).ok
        assert store.wait_dispatched()
        clock.advance(5 * SECOND)
        threads = [threading.Thread(target=store.deliver_due) for _ in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        seen = Counter(m.properties["UNIQ_KEY"] for q in range(2) for m in read_queue(store, ORDERS, q))
        assert len(seen) == 300 and set(seen.values()) == {1}


def test_it_refuses_messages_sent_straight_to_the_schedule_topic(store: MessageStore) -> None:
    result = store.put_message(MessageInner(SCHEDULE_TOPIC, 0, b"sneaky"))
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert "DELAY" in result.remark
    assert store.deliver_due(T0 + 10**9) == (0, None)


def test_it_does_not_take_a_record_shaped_body_for_a_message(store: MessageStore) -> None:
    inner = MessageInner("payments", 0, b"transfer 1000")
    forged = inner.encode(store.store_host)
    outer = store.put_message(message(body=bytes(forged)))
    # The body starts right after the 88-byte header: there sits a perfect record.
    assert store.look_message_by_offset(outer.wrote_offset + 88) is None
    # The real record is found, by offset and by id.
    assert store.look_message_by_offset(outer.wrote_offset).topic == ORDERS
    assert store.view_message_by_id(outer.msg_id).topic == ORDERS


def test_it_indexes_again_what_an_unreadable_index_file_held(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store", max_index_num=50)
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(120):
            store.put_message(message(body=b"m%d" % i, KEYS=f"order-{i}"))
    first = sorted((tmp_path / "store" / "index").iterdir())[0]
    with first.open("r+b") as f:
        f.write(b"\xff" * 40)  # an impossible header
    store = reopen(config)
    try:
        for i in range(120):
            assert [m.body for m in store.query_message(ORDERS, f"order-{i}")] == [b"m%d" % i], i
    finally:
        store.close()


def test_it_reads_duplicate_batch_properties_as_the_decoder_does(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    props = b"TAGS\x01red\x02KEYS\x01k-red\x02TAGS\x01blue\x02KEYS\x01k-blue\x02"
    with MessageStore(config, clock_ms=Clock()) as store:
        store.put_messages(MessageBatchInner(ORDERS, 0, encode_batch([(b"dup", props, 0)])))
        assert store.wait_dispatched()
        entry = store.consume_queues.find(ORDERS, 0).get(0)
        assert entry is not None and entry[2] == tags_code("blue")
        assert [m.body for m in store.query_message(ORDERS, "k-blue")] == [b"dup"]
