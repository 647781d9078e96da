"""File expiry (``MessageStore.delete_expired_files`` and ``broker_core.store.cleanup``).

Times are local wall-clock times (``deleteWhen`` is a local hour, as in RocketMQ), built
with ``datetime`` so the tests hold in any time zone.  Records on ``orders`` with a 200-byte
body and no properties other than KEYS are about 300 bytes: some 218 per 64 KiB segment.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import logging
from pathlib import Path

import pytest

from broker_core.store.results import GetMessageStatus
from broker_core.store.store import MessageStore

from .conftest import AUDIT, HOUR_MS, ORDERS, Clock, message, read_queue, reopen, tiny_config


def local_ms(day: int, hour: int, minute: int = 0) -> int:
    return int(dt.datetime(2024, 1, day, hour, minute).timestamp() * 1000)


OLD = local_ms(10, 1)  # when the old messages were stored
AT_DELETE_HOUR = local_ms(13, 4, 30)  # 75.5 h later, inside deleteWhen ("04")
OTHER_HOUR = local_ms(13, 10, 30)  # 81.5 h later, outside deleteWhen


def fill(
    store: MessageStore, clock: Clock, at_ms: int, count: int, start: int = 0
) -> list[tuple[int, bytes]]:
    """Append ``count`` messages stored at ``at_ms``; return (commit-log offset, body) of each."""
    clock.ms = at_ms
    written = []
    for i in range(start, start + count):
        body = b"%0200d" % i
        result = store.put_message(message(ORDERS, 0, body, KEYS=f"k{i}"))
        assert result.ok
        written.append((result.wrote_offset, body))
    assert store.wait_dispatched()
    return written


def segments(store: MessageStore) -> list[str]:
    return sorted(p.name for p in (store.root / "commitlog").iterdir())


def old_then_new(tmp_path: Path, **overrides: object) -> tuple[MessageStore, list[tuple[int, bytes]]]:
    """700 old messages (3 full segments and part of a 4th), then 10 new ones."""
    clock = Clock(OLD)
    store = MessageStore(tiny_config(tmp_path, delete_when="04", **overrides), clock_ms=clock).open()
    written = fill(store, clock, OLD, 700)
    written += fill(store, clock, local_ms(13, 3), 10, start=700)
    assert len(segments(store)) == 4
    return store, written


def test_it_deletes_expired_segments_at_the_delete_when_hour(tmp_path: Path) -> None:
    store, _written = old_then_new(tmp_path)
    try:
        report = store.delete_expired_files(AT_DELETE_HOUR)
        assert report.ran and "deleteWhen" in report.reason
        assert report.commit_log_files_deleted == 3
        assert segments(store) == [f"{3 * 65536:020d}"]
        assert report.commit_log_min_offset == store.commit_log.min_offset == 3 * 65536
        assert report.errors == []
        assert 0.0 <= report.disk_used_ratio <= 1.0
        assert store.check() == []
    finally:
        store.close()


def test_it_deletes_nothing_outside_the_delete_when_hour_unless_asked(tmp_path: Path) -> None:
    store, _written = old_then_new(tmp_path)
    try:
        report = store.delete_expired_files(OTHER_HOUR)
        assert not report.ran
        assert report.commit_log_files_deleted == report.consume_queue_files_deleted == 0
        assert len(segments(store)) == 4
        assert report.commit_log_min_offset == 0
        manual = store.delete_expired_files(OTHER_HOUR, manual=True)
        assert manual.ran and manual.reason == "requested"
        assert manual.commit_log_files_deleted == 3
        assert store.check() == []
    finally:
        store.close()


def test_it_keeps_segments_younger_than_the_reserved_time(tmp_path: Path) -> None:
    store, _written = old_then_new(tmp_path)
    try:
        young = local_ms(12, 4, 30)  # 51.5 h after the old messages
        report = store.delete_expired_files(young)
        assert report.ran and report.commit_log_files_deleted == 0
        assert len(segments(store)) == 4
        # The reserved time is read from the config: 48 h makes the same files expired.
        store.close()
        config = tiny_config(tmp_path, delete_when="04", file_reserved_time=48)
        store = MessageStore(config, clock_ms=Clock(young)).open()
        assert store.delete_expired_files(young).commit_log_files_deleted == 3
    finally:
        store.close()


def test_it_never_deletes_the_segment_being_written(tmp_path: Path) -> None:
    clock = Clock(OLD)
    with MessageStore(tiny_config(tmp_path), clock_ms=clock) as store:
        fill(store, clock, OLD, 400)
        assert len(segments(store)) == 2
        report = store.delete_expired_files(OLD + 1000 * HOUR_MS, manual=True)
        assert report.commit_log_files_deleted == 1
        assert segments(store) == [f"{65536:020d}"]
        again = store.delete_expired_files(OLD + 2000 * HOUR_MS, manual=True)
        assert again.commit_log_files_deleted == 0
        assert segments(store) == [f"{65536:020d}"]
        fill(store, clock, OLD + 2000 * HOUR_MS, 5, start=400)
        assert read_queue(store, ORDERS, 0)[-1].body == b"%0200d" % 404
        assert store.check() == []


def test_it_deletes_consume_queue_and_index_files_wholly_below_the_new_minimum(tmp_path: Path) -> None:
    store, _written = old_then_new(tmp_path)
    try:
        queue_dir = store.root / "consumequeue" / ORDERS / "0"
        cq_before = sorted(p.name for p in queue_dir.iterdir())
        assert store.index is not None
        index_before = len(store.index.files)
        assert len(cq_before) == 8 and index_before >= 3
        report = store.delete_expired_files(AT_DELETE_HOUR)
        commit_min = store.commit_log.min_offset
        cq_after = sorted(p.name for p in queue_dir.iterdir())
        assert report.consume_queue_files_deleted == len(cq_before) - len(cq_after) > 0
        cq = store.consume_queues.find(ORDERS, 0)
        assert cq is not None
        first = cq.entries(int(cq_after[0]) // 20, 100)
        assert first[-1][0] + first[-1][1] > commit_min, "a kept file still holds a live record"
        assert report.index_files_deleted == index_before - len(store.index.files) > 0
        assert all(f.end_phy_offset >= commit_min for f in store.index.files)
        assert store.check() == []
    finally:
        store.close()


def test_it_answers_too_small_below_the_new_minimum_and_points_at_it(tmp_path: Path) -> None:
    store, written = old_then_new(tmp_path)
    try:
        store.delete_expired_files(AT_DELETE_HOUR)
        commit_min = store.commit_log.min_offset
        min_offset = store.get_min_offset_in_queue(ORDERS, 0)
        assert min_offset > 0
        result = store.get_message(ORDERS, 0, 0, 32)
        assert result.status is GetMessageStatus.OFFSET_TOO_SMALL and result.status.offset_moved
        assert result.next_begin_offset == min_offset
        found = store.get_message(ORDERS, 0, min_offset, 32)
        assert found.status is GetMessageStatus.FOUND
        live = [body for phys, body in written if phys >= commit_min]
        assert [m.body for m in read_queue(store, ORDERS, 0)] == live
        assert store.get_earliest_message_time(ORDERS, 0) == OLD
        assert store.check() == []
    finally:
        store.close()


def test_it_keeps_the_new_minimum_across_a_reopen(tmp_path: Path) -> None:
    store, written = old_then_new(tmp_path)
    store.delete_expired_files(AT_DELETE_HOUR)
    expected = [body for phys, body in written if phys >= 3 * 65536]
    store.close()
    store = reopen(tiny_config(tmp_path, delete_when="04"))
    try:
        assert store.commit_log.min_offset == 3 * 65536
        assert [m.body for m in read_queue(store, ORDERS, 0)] == expected
        assert store.get_message(ORDERS, 0, 0, 1).status is GetMessageStatus.OFFSET_TOO_SMALL
        assert store.check() == []
    finally:
        store.close()


def test_it_expires_old_segments_at_any_hour_when_the_disk_passes_the_max_used_ratio(tmp_path: Path) -> None:
    store, _written = old_then_new(tmp_path, disk_max_used_space_ratio=0)
    try:
        report = store.delete_expired_files(OTHER_HOUR)
        assert report.ran and "diskMaxUsedSpaceRatio" in report.reason
        assert report.commit_log_files_deleted == 3
        # Not forced: young segments stay.
        clock = store.clock_ms
        assert isinstance(clock, Clock)
        fill(store, clock, OTHER_HOUR, 400, start=710)
        assert store.delete_expired_files(OTHER_HOUR + HOUR_MS).commit_log_files_deleted == 0
        assert store.check() == []
    finally:
        store.close()


def test_it_deletes_even_young_segments_when_the_disk_passes_the_forced_ratio(tmp_path: Path) -> None:
    clock = Clock(OLD)
    config = tiny_config(tmp_path, disk_space_clean_forcibly_ratio=0.0, delete_files_batch_max=2)
    with MessageStore(config, clock_ms=clock) as store:
        fill(store, clock, OLD, 1000)  # 5 segments, all young at OLD + 1 h
        assert len(segments(store)) == 5
        first = store.delete_expired_files(OLD + HOUR_MS)
        assert first.ran and "forced" in first.reason
        assert first.commit_log_files_deleted == 2  # delete_files_batch_max
        second = store.delete_expired_files(OLD + HOUR_MS)
        assert second.commit_log_files_deleted == 2
        third = store.delete_expired_files(OLD + HOUR_MS)
        assert third.commit_log_files_deleted == 0, "the segment being written stays"
        assert len(segments(store)) == 1
        assert store.put_message(message(body=b"still writable")).ok
        assert store.check() == []


def test_a_run_that_deletes_says_what_went_at_warning_and_whose_messages_were_unconsumed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Issue 14 item 4: space- or age-based expiry deleted acknowledged and unacknowledged
    # messages alike with nothing above INFO in the log.
    clock = Clock(OLD)
    store = MessageStore(tiny_config(tmp_path, delete_when="04"), clock_ms=clock).open()
    try:
        queues = [(ORDERS, 0), (ORDERS, 1), (AUDIT, 0)]
        written: list[tuple[str, int, int]] = []  # (topic, queue id, commit-log offset)
        for i in range(720):
            clock.ms = OLD if i < 700 else local_ms(13, 3)
            topic, qid = queues[i % 3]
            result = store.put_message(message(topic, qid, b"%0200d" % i, KEYS=f"k{i}"))
            assert result.ok
            written.append((topic, qid, result.wrote_offset))
        assert store.wait_dispatched()
        offsets = store.consumer_offsets
        ends = {q: store.get_max_offset_in_queue(*q) for q in queues}
        offsets.commit_offset("test", "billing", ORDERS, 0, 100)  # behind on queue 0
        offsets.commit_offset("test", "billing", ORDERS, 1, ends[(ORDERS, 1)])
        offsets.commit_offset("test", "reporting", ORDERS, 0, ends[(ORDERS, 0)])  # caught up
        offsets.commit_offset("test", "reporting", ORDERS, 1, ends[(ORDERS, 1)])
        offsets.commit_offset("test", "partial", ORDERS, 0, ends[(ORDERS, 0)])  # never on queue 1
        offsets.commit_offset("test", "auditors", AUDIT, 0, 0)  # consumed nothing
        before = segments(store)

        with caplog.at_level(logging.INFO, logger="broker_core"):
            report = store.delete_expired_files(AT_DELETE_HOUR)
        commit_min = store.commit_log.min_offset
        assert report.commit_log_files_deleted == 3 and commit_min == 3 * 65536
        assert report.segments_deleted == before[:3]
        assert (report.deleted_from_offset, report.deleted_to_offset) == (0, commit_min)
        # Counted from what was written, not from the store's own bookkeeping.
        gone = collections.Counter((t, q) for t, q, phys in written if phys < commit_min)
        assert report.messages_deleted == {
            ORDERS: gone[(ORDERS, 0)] + gone[(ORDERS, 1)],
            AUDIT: gone[(AUDIT, 0)],
        }
        assert {q: store.get_min_offset_in_queue(*q) for q in queues} == {q: gone[q] for q in queues}
        assert [dataclasses.asdict(u) for u in report.unconsumed] == [
            {"group": "auditors", "topic": AUDIT, "messages": gone[(AUDIT, 0)], "queues": 1},
            {"group": "billing", "topic": ORDERS, "messages": gone[(ORDERS, 0)] - 100, "queues": 1},
            {"group": "partial", "topic": ORDERS, "messages": gone[(ORDERS, 1)], "queues": 1},
        ]
        warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(warnings) == 1, [r.getMessage() for r in warnings]
        line = warnings[0].getMessage()
        assert "deleteWhen" in line and all(name in line for name in before[:3])
        assert (
            f"{ORDERS} {gone[(ORDERS, 0)] + gone[(ORDERS, 1)]}" in line
            and f"{AUDIT} {gone[(AUDIT, 0)]}" in line
        )
        assert f"billing {gone[(ORDERS, 0)] - 100} of {ORDERS}" in line and "reporting" not in line

        caplog.clear()
        with caplog.at_level(logging.INFO, logger="broker_core"):
            again = store.delete_expired_files(AT_DELETE_HOUR + 60_000)
        assert again.ran and not again.deleted_anything and again.unconsumed == []
        assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
        assert store.check() == []
    finally:
        store.close()
