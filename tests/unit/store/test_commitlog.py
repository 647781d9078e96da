"""The commit log (``broker_core.store.commitlog``), through ``MessageStore`` and on its own.

Sizes here are computed to the byte: a record on topic ``orders`` (6 bytes) with no
properties and an IPv4 born host is ``91 + body + 6`` bytes, and a 64 KiB segment takes
records while ``position + size + 8 <= 65536`` (8 bytes are kept for the blank marker).
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker_core.errors import MessageIllegalError
from broker_core.model.message import BLANK_MAGIC_CODE, MessageInner, decode_record, encode_host
from broker_core.store.commitlog import CommitLog
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore

from .conftest import AUDIT, ORDERS, T0, Clock, message, read_queue, reopen, tiny_config

SEGMENT = 64 * 1024
OVERHEAD = 91 + len(ORDERS)  # record size minus body, for topic "orders" without properties


def body_for(record_size: int) -> bytes:
    """A body that makes an ``orders`` record exactly ``record_size`` bytes."""
    return b"b" * (record_size - OVERHEAD)


def segment_names(store: MessageStore) -> list[str]:
    return sorted(p.name for p in (store.root / "commitlog").iterdir())


def test_it_returns_where_a_single_message_went(store: MessageStore, clock: Clock) -> None:
    clock.ms = T0 + 123
    first = store.put_message(message(body=b"one"))
    second = store.put_message(message(body=b"two"))
    assert first.status is PutMessageStatus.PUT_OK and first.remark == ""
    assert (first.wrote_offset, first.wrote_bytes, first.queue_offset) == (0, OVERHEAD + 3, 0)
    assert first.store_timestamp == T0 + 123
    assert first.msg_id == "7F00000100002A9F0000000000000000"
    assert (second.wrote_offset, second.queue_offset) == (OVERHEAD + 3, 1)
    assert second.msg_id == "7F00000100002A9F" + f"{OVERHEAD + 3:016X}"
    assert store.commit_log.max_offset == 2 * (OVERHEAD + 3)
    assert store.check() == []


def test_it_hands_out_consecutive_queue_offsets_per_topic_and_queue(store: MessageStore) -> None:
    seen: dict[tuple[str, int], list[int]] = {}
    for i in range(30):
        topic, queue_id = [(ORDERS, 0), (ORDERS, 1), (AUDIT, 0)][i % 3]
        result = store.put_message(message(topic, queue_id, b"m%d" % i))
        seen.setdefault((topic, queue_id), []).append(result.queue_offset)
    assert seen == {key: list(range(10)) for key in [(ORDERS, 0), (ORDERS, 1), (AUDIT, 0)]}
    store.wait_dispatched()
    assert [m.queue_offset for m in read_queue(store, ORDERS, 1)] == list(range(10))
    assert store.check() == []


def test_it_appends_a_batch_contiguously_with_consecutive_queue_offsets(
    store: MessageStore, clock: Clock
) -> None:
    store.put_message(message(body=b"before"))
    clock.ms = T0 + 7
    batch = [message(body=b"batch-%d" % i, KEYS=f"bk{i}") for i in range(4)]
    result = store.put_messages(batch)
    assert result.status is PutMessageStatus.PUT_OK
    assert result.msg_count == 4
    assert result.queue_offset == 1
    assert result.store_timestamp == T0 + 7
    offsets = result.record_offsets
    assert offsets[0] == result.wrote_offset == OVERHEAD + 6
    sizes = [store.look_message_by_offset(o).store_size for o in offsets]  # type: ignore[union-attr]
    assert [offsets[i] + sizes[i] for i in range(3)] == list(offsets[1:])
    assert result.wrote_bytes == sum(sizes)
    assert len(result.msg_ids) == 4
    for i, msg_id in enumerate(result.msg_ids):
        found = store.view_message_by_id(msg_id)
        assert found is not None
        assert (found.body, found.queue_offset, found.store_timestamp) == (b"batch-%d" % i, 1 + i, T0 + 7)
    assert store.check() == []


def test_it_gives_a_mixed_batch_consecutive_offsets_in_each_of_its_queues(store: MessageStore) -> None:
    store.put_message(message(ORDERS, 1, b"x"))
    result = store.put_messages(
        [message(ORDERS, 0, b"a"), message(ORDERS, 1, b"b"), message(ORDERS, 0, b"c")]
    )
    assert result.ok
    found = [store.look_message_by_offset(o) for o in result.record_offsets]
    assert [(m.queue_id, m.queue_offset) for m in found] == [(0, 0), (1, 1), (0, 1)]  # type: ignore[union-attr]
    assert store.check() == []


def test_it_fits_a_record_that_leaves_exactly_eight_bytes_then_rolls(store: MessageStore) -> None:
    for _ in range(4):
        assert store.put_message(message(body=body_for(16097))).ok
    assert store.commit_log.max_offset == 4 * 16097
    edge = store.put_message(message(body=body_for(SEGMENT - 8 - 4 * 16097)))
    assert edge.ok and edge.wrote_offset == 4 * 16097
    assert edge.wrote_offset + edge.wrote_bytes == SEGMENT - 8
    assert segment_names(store) == ["00000000000000000000"]

    rolled = store.put_message(message(body=b"next"))
    assert rolled.wrote_offset == SEGMENT
    assert rolled.queue_offset == 5
    assert segment_names(store) == ["00000000000000000000", f"{SEGMENT:020d}"]
    first = (store.root / "commitlog" / "00000000000000000000").read_bytes()
    assert struct.unpack_from(">iI", first, SEGMENT - 8) == (8, BLANK_MAGIC_CODE)
    assert store.check() == []


def test_it_closes_a_segment_with_a_blank_when_a_record_would_leave_seven_bytes(store: MessageStore) -> None:
    for _ in range(4):
        store.put_message(message(body=body_for(16097)))
    too_big = store.put_message(message(body=body_for(SEGMENT - 7 - 4 * 16097)))
    assert too_big.ok and too_big.wrote_offset == SEGMENT
    first = (store.root / "commitlog" / "00000000000000000000").read_bytes()
    assert struct.unpack_from(">iI", first, 4 * 16097) == (SEGMENT - 4 * 16097, BLANK_MAGIC_CODE)
    assert [m.queue_offset for m in read_queue(store, ORDERS, 0)] == list(range(5))
    assert store.check() == []


def test_it_reads_everything_across_the_roll_after_a_reopen(config, clock: Clock) -> None:  # type: ignore[no-untyped-def]
    store = MessageStore(config, clock_ms=clock).open()
    bodies = [body_for(16097 if i % 5 else 1140) for i in range(12)]
    ids = [store.put_message(message(body=b)).msg_id for b in bodies]
    store.close()
    store = reopen(config, clock)
    try:
        assert [store.view_message_by_id(i).body for i in ids] == bodies  # type: ignore[union-attr]
        assert [m.body for m in read_queue(store, ORDERS, 0)] == bodies
        after = store.put_message(message(body=b"after"))
        assert after.queue_offset == 12
        assert store.check() == []
    finally:
        store.close()


def test_it_puts_a_batch_that_does_not_fit_wholly_in_the_next_segment(store: MessageStore) -> None:
    for _ in range(3):
        store.put_message(message(body=body_for(16097)))
    result = store.put_messages([message(body=body_for(5097)) for _ in range(4)])
    assert result.ok
    assert result.record_offsets == tuple(SEGMENT + i * 5097 for i in range(4))
    assert result.queue_offset == 3
    first = (store.root / "commitlog" / "00000000000000000000").read_bytes()
    assert struct.unpack_from(">iI", first, 3 * 16097) == (SEGMENT - 3 * 16097, BLANK_MAGIC_CODE)
    assert [m.queue_offset for m in read_queue(store, ORDERS, 0)] == list(range(7))
    assert store.check() == []


def test_it_takes_a_record_of_a_whole_segment_less_eight_bytes(tmp_path: Path, clock: Clock) -> None:
    config = tiny_config(tmp_path, max_message_size=128 * 1024)
    with MessageStore(config, clock_ms=clock) as store:
        store.put_message(message(body=b"small"))
        whole = store.put_message(message(body=body_for(SEGMENT - 8)))
        assert whole.ok and (whole.wrote_offset, whole.wrote_bytes) == (SEGMENT, SEGMENT - 8)
        after = store.put_message(message(body=b"after"))
        assert after.wrote_offset == 2 * SEGMENT
        assert store.check() == []


def test_it_refuses_a_record_bigger_than_a_segment_with_a_clear_remark(tmp_path: Path, clock: Clock) -> None:
    config = tiny_config(tmp_path, max_message_size=128 * 1024)
    with MessageStore(config, clock_ms=clock) as store:
        kept = store.put_message(message(body=b"kept"))
        result = store.put_message(message(body=body_for(SEGMENT - 7)))
        assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert f"{SEGMENT - 7} bytes" in result.remark and str(SEGMENT - 8) in result.remark
        assert result.msg_id == "" and not result.ok
        batch = store.put_messages([message(body=body_for(40_000)), message(body=body_for(40_000))])
        assert batch.status is PutMessageStatus.MESSAGE_ILLEGAL
        assert "smaller batches" in batch.remark
        assert store.commit_log.max_offset == kept.wrote_bytes
        assert store.put_message(message(body=b"next")).queue_offset == 1
        assert store.check() == []


def test_it_reads_by_physical_offset_and_by_msg_id(store: MessageStore, clock: Clock) -> None:
    clock.ms = T0 + 55
    result = store.put_message(message(AUDIT, 3, b"find me", KEYS="k", TAGS="T"))
    by_offset = store.look_message_by_offset(result.wrote_offset)
    by_id = store.view_message_by_id(result.msg_id)
    assert by_offset == by_id
    assert by_id is not None
    assert (by_id.topic, by_id.queue_id, by_id.body, by_id.store_timestamp) == (AUDIT, 3, b"find me", T0 + 55)
    assert by_id.born_host == "10.1.2.3:50000" and by_id.store_host == "127.0.0.1:10911"
    assert by_id.properties == {"KEYS": "k", "TAGS": "T"}
    raw = store.commit_log.read_record(result.wrote_offset)
    assert raw is not None and decode_record(raw) == by_id
    assert store.look_message_by_offset(result.wrote_offset + 4) is None  # not a record start
    assert store.look_message_by_offset(store.commit_log.max_offset) is None
    assert store.look_message_by_offset(10 * SEGMENT) is None
    assert store.view_message_by_id("7F00000100002A9F" + f"{10 * SEGMENT:016X}") is None
    with pytest.raises(MessageIllegalError):
        store.view_message_by_id("not-an-id")


# -- the CommitLog class on its own --------------------------------------------------------------


def test_it_recovers_on_its_own_and_redispatches_every_record(tmp_path: Path) -> None:
    clock = Clock()
    host = encode_host("127.0.0.1:10911")
    log = CommitLog(
        tmp_path, SEGMENT, store_host=host, max_message_size=16384, clock_ms=clock, preallocate=False
    )
    log.load()
    ends = []
    for i in range(40):
        result = log.append(MessageInner(ORDERS, i % 2, body_for(3000 + i)))
        ends.append(result.wrote_offset + result.wrote_bytes)
    log.close()

    again = CommitLog(
        tmp_path, SEGMENT, store_host=host, max_message_size=16384, clock_ms=clock, preallocate=False
    )
    assert again.load() == []
    seen = []
    end = again.recover(0, seen.append)
    assert end == ends[-1] == again.max_offset
    assert [(r.queue_id, r.queue_offset) for r in seen] == [(i % 2, i // 2) for i in range(40)]
    assert [r.commit_log_offset + r.msg_size for r in seen] == ends
    again.close()
