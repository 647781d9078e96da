"""Bad input and hostile conditions: each gets a clear status and remark, and nothing already
stored is lost.  Disk-full runs in a subprocess whose RLIMIT_FSIZE stops new segments."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from broker_core.model.message import MessageInner
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore

from .conftest import (
    ORDERS,
    Clock,
    config_json,
    message,
    read_queue,
    reopen,
    run_python,
    tiny_config,
    with_config,
)

ILLEGAL = PutMessageStatus.MESSAGE_ILLEGAL


@pytest.fixture
def stored_before(store: MessageStore) -> list[bytes]:
    """Three good messages already in the store before the bad input arrives."""
    bodies = [b"good-%d" % i for i in range(3)]
    for body in bodies:
        assert store.put_message(message(body=body)).ok
    return bodies


def assert_nothing_lost(store: MessageStore, bodies: list[bytes]) -> None:
    assert [m.body for m in read_queue(store, ORDERS, 0)] == bodies
    assert store.put_message(message(body=b"after")).queue_offset == len(bodies)
    assert store.check() == []


def test_it_refuses_a_body_over_max_message_size(store: MessageStore, stored_before: list[bytes]) -> None:
    result = store.put_message(message(body=b"x" * (16 * 1024 + 1)))
    assert result.status is ILLEGAL and not result.ok
    assert "16385" in result.remark and "maxMessageSize" in result.remark
    assert_nothing_lost(store, stored_before)


def test_it_refuses_a_record_over_max_message_size_even_when_the_body_fits(
    store: MessageStore, stored_before: list[bytes]
) -> None:
    result = store.put_message(message(body=b"x" * (16 * 1024)))
    assert result.status is ILLEGAL
    assert "maxMessageSize" in result.remark
    assert_nothing_lost(store, stored_before)


def test_it_refuses_an_empty_body(store: MessageStore, stored_before: list[bytes]) -> None:
    result = store.put_message(message(body=b""))
    assert result.status is ILLEGAL and "empty" in result.remark
    assert_nothing_lost(store, stored_before)


@pytest.mark.parametrize("topic", ["", "T" * 128, "has space", "a/b", "tab\tbed", "ünïcode", "dot.ted"])
def test_it_refuses_an_invalid_topic_name(
    store: MessageStore, stored_before: list[bytes], topic: str
) -> None:
    result = store.put_message(message(topic, 0, b"x"))
    assert result.status is ILLEGAL
    assert "topic" in result.remark
    assert_nothing_lost(store, stored_before)


def test_it_accepts_the_longest_and_the_oddest_valid_topic_names(store: MessageStore) -> None:
    for topic in ["T" * 127, "%RETRY%group-1", "a|b_c-D"]:
        assert store.put_message(message(topic, 0, b"x")).ok
    assert store.check() == []


@pytest.mark.parametrize(("queue_id", "words"), [(-1, "out of range"), (1024, "out of range")])
def test_it_refuses_a_queue_id_outside_0_to_1023(
    store: MessageStore, stored_before: list[bytes], queue_id: int, words: str
) -> None:
    result = store.put_message(message(queue_id=queue_id))
    assert result.status is ILLEGAL and words in result.remark and str(queue_id) in result.remark
    assert store.put_message(message(queue_id=1023)).ok
    assert_nothing_lost(store, stored_before)


def test_it_refuses_a_queue_the_topic_does_not_have(tmp_path: Path) -> None:
    queue_nums = {ORDERS: 4}
    with MessageStore(tiny_config(tmp_path), clock_ms=Clock(), topic_queue_nums=queue_nums.get) as store:
        assert store.put_message(message(queue_id=3)).ok
        result = store.put_message(message(queue_id=4))
        assert result.status is ILLEGAL
        assert "queue 4 does not exist" in result.remark and "4 queue(s)" in result.remark
        assert store.put_message(message("unknown-topic", 9, b"x")).ok  # no opinion: accepted
        assert store.check() == []


@pytest.mark.parametrize("props", [{"na\x01me": "v"}, {"name": "va\x02lue"}, {"": "v"}])
def test_it_refuses_properties_with_separators(
    store: MessageStore, stored_before: list[bytes], props: dict[str, str]
) -> None:
    result = store.put_message(MessageInner(ORDERS, 0, b"x", props))
    assert result.status is ILLEGAL
    assert result.remark
    assert_nothing_lost(store, stored_before)


def test_it_refuses_properties_over_32767_bytes(store: MessageStore, stored_before: list[bytes]) -> None:
    result = store.put_message(MessageInner(ORDERS, 0, b"x", {"big": "v" * 40_000}))
    assert result.status in (PutMessageStatus.PROPERTIES_SIZE_EXCEEDED, ILLEGAL)
    assert "32767" in result.remark
    assert_nothing_lost(store, stored_before)


@pytest.mark.parametrize(
    "bad",
    [
        MessageInner(ORDERS, 0, b""),
        MessageInner("bad topic", 0, b"x"),
        MessageInner(ORDERS, 0, b"x", {"k": "\x01"}),
        MessageInner(ORDERS, 0, b"x" * 20_000),
        MessageInner(ORDERS, 2000, b"x"),
    ],
    ids=["empty-body", "bad-topic", "separator", "too-big", "bad-queue"],
)
def test_it_refuses_a_whole_batch_for_one_bad_message(
    store: MessageStore, stored_before: list[bytes], bad: MessageInner
) -> None:
    end = store.commit_log.max_offset
    batch = [message(body=b"batch-a"), bad, message(body=b"batch-b")]
    result = store.put_messages(batch)
    assert result.status in (ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED)
    assert result.remark and result.record_offsets == ()
    assert store.commit_log.max_offset == end
    assert_nothing_lost(store, stored_before)


def test_it_refuses_an_empty_batch(store: MessageStore) -> None:
    result = store.put_messages([])
    assert result.status is ILLEGAL and "empty" in result.remark


def test_it_refuses_writes_after_close_as_service_not_available(config, clock: Clock) -> None:  # type: ignore[no-untyped-def]
    store = MessageStore(config, clock_ms=clock).open()
    store.close()
    result = store.put_message(message())
    assert result.status is PutMessageStatus.SERVICE_NOT_AVAILABLE and "shut down" in result.remark


# -- a full disk -----------------------------------------------------------------------------------

DISK_FULL = """
import json, resource, signal, sys, time
from broker_core.config import StoreConfig
from broker_core.model.message import MessageInner
from broker_core.store.store import MessageStore

config = StoreConfig(**json.loads(sys.argv[1]))
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a too-big file fails with EFBIG instead
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
store = MessageStore(config).open()
acked = []

def put(i):
    result = store.put_message(MessageInner("orders", 0, b"%04d" % i + b"." * 2000, {"KEYS": f"k{i}"}))
    if result.ok:
        acked.append(result.msg_id)
    return result

for i in range(10):
    assert put(i).ok
# From now on no file may grow past 32 KiB: the next 64 KiB segment cannot be created.
resource.setrlimit(resource.RLIMIT_FSIZE, (32 * 1024, hard))
i = 10
while True:
    result = put(i)
    i += 1
    if not result.ok:
        break
full = {"status": result.status.name, "remark": result.remark, "acked": len(acked)}
again = put(i)
full["again"] = again.status.name
full["readable"] = all(store.view_message_by_id(m) is not None for m in acked)
store.wait_dispatched(timeout=1.0)
full["in_queue"] = store.get_max_offset_in_queue("orders", 0)
full["dispatched"] = store.wait_dispatched(timeout=1.0)

resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
started = time.monotonic()
while time.monotonic() - started < 5:
    i += 1
    result = put(i)
    if result.ok:
        break
    time.sleep(0.05)
full["resumed"] = result.status.name
full["resumed_after_s"] = time.monotonic() - started
full["acked_ids"] = acked
store.close()
print(json.dumps(full))
"""


def test_it_goes_read_only_when_no_segment_can_be_created_and_recovers(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    done = run_python(DISK_FULL, config_json(config))
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "DISK_FULL"
    assert "read-only" in report["remark"]
    assert report["again"] == "DISK_FULL"
    assert report["acked"] >= 30, "the first segment must fill before the disk is full"
    assert report["readable"], "messages stored before the disk filled must stay readable"
    assert report["in_queue"] == report["acked"]
    assert report["resumed"] == "PUT_OK"
    assert report["resumed_after_s"] < 2.0
    acked = report["acked_ids"]
    store = reopen(config)
    try:
        for msg_id in acked:
            found = store.view_message_by_id(msg_id)
            assert found is not None and found.body_crc_ok
        assert [m.keys for m in read_queue(store, ORDERS, 0)] == [
            store.view_message_by_id(m).keys
            for m in acked  # type: ignore[union-attr]
        ]
        assert store.check() == []
    finally:
        store.close()


def test_it_answers_every_dispatched_record_while_read_only(tmp_path: Path) -> None:
    # wait_dispatched must not wait for the blank tail of a segment nothing follows.
    config = tiny_config(tmp_path / "store")
    done = run_python(DISK_FULL, config_json(config))
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["status"] == "DISK_FULL"
    assert report["dispatched"], "wait_dispatched() timed out although every stored record was dispatched"


def test_it_refuses_writes_above_the_disk_warning_ratio_and_accepts_them_below(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, disk_space_warning_level_ratio=0.0)
    with MessageStore(config, clock_ms=Clock()) as store:
        ratio = store.check_disk_space()
        assert 0.0 < ratio <= 1.0
        result = store.put_message(message(body=b"refused"))
        assert result.status is PutMessageStatus.DISK_FULL
        assert "read-only" in result.remark and "diskSpaceWarningLevelRatio" in result.remark
        assert store.commit_log.max_offset == 0
    store = reopen(with_config(config, disk_space_warning_level_ratio=1.0))
    try:
        store.check_disk_space()
        assert store.put_message(message(body=b"accepted")).ok
        assert [m.body for m in read_queue(store, ORDERS, 0)] == [b"accepted"]
        assert store.check() == []
    finally:
        store.close()


# -- a disk too slow for SYNC_FLUSH -------------------------------------------------------------------


def test_it_answers_flush_disk_timeout_but_keeps_the_message(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    with MessageStore(config, clock_ms=Clock()) as store:
        assert store.put_message(message(body=b"first")).status is PutMessageStatus.PUT_OK
        flush_lock = store.commit_log.queue.files[0]._flush_lock
        with flush_lock:  # the flush thread blocks as on a stalled disk
            started = time.monotonic()
            result = store.put_message(message(body=b"slow"))
            waited = time.monotonic() - started
        assert result.status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert result.ok, "FLUSH_DISK_TIMEOUT still stores the message"
        assert "200" in result.remark
        assert 0.15 <= waited < 2.0
        found = store.view_message_by_id(result.msg_id)
        assert found is not None and found.body == b"slow"
        assert [m.body for m in read_queue(store, ORDERS, 0)] == [b"first", b"slow"]
        assert store.put_message(message(body=b"fast again")).status is PutMessageStatus.PUT_OK
        assert store.check() == []


def test_it_does_not_make_a_message_without_wait_wait_for_the_disk(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    with MessageStore(config, clock_ms=Clock()) as store:
        assert store.put_message(message(body=b"first")).ok
        with store.commit_log.queue.files[0]._flush_lock:
            result = store.put_message(message(body=b"fire and forget", WAIT="false"))
        assert result.status is PutMessageStatus.PUT_OK and result.flush_future is None
