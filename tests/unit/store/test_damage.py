"""Damage in the middle of the commit log is survived, recorded and reported (issue 14, finding 2).

A record that fails its checks is skipped, not taken as the end of the log: everything
acknowledged after it is kept, the bad range goes to ``damaged.json`` and the log at
ERROR, and neither a pull nor a lookup serves it.  Damaged properties (outside the body
CRC) are caught by comparing the record with its consume-queue entry.
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from broker_core.config import StoreConfig
from broker_core.model.message import decode_record
from broker_core.store.store import MessageStore

from .conftest import ORDERS, REPO, Clock, message, reopen, tiny_config

QUEUES = 2
COUNT = 1000


def fill(config: StoreConfig, count: int = COUNT) -> list[tuple[int, int, bytes, str]]:
    """``count`` messages with a tag, closed cleanly; (phys, size, body, msg id) of each."""
    written = []
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(count):
            body = b"message-%05d " % i + b"x" * 80
            result = store.put_message(message(ORDERS, i % QUEUES, body, TAGS="TagA", KEYS=f"k{i}"))
            assert result.ok
            written.append((result.wrote_offset, result.wrote_bytes, body, result.msg_id))
    return written


def flip(config: StoreConfig, phys: int) -> None:
    """Invert one byte of the commit log at offset ``phys``, as a failing disk would."""
    size = config.mapped_file_size_commit_log
    path = config.root / "commitlog" / f"{phys - phys % size:020d}"
    with open(path, "r+b") as f:
        f.seek(phys % size)
        byte = f.read(1)
        f.seek(phys % size)
        f.write(bytes([byte[0] ^ 0xFF]))


def bodies(store: MessageStore) -> set[bytes]:
    """Every body a consumer reading each queue to its end would get (past blank entries)."""
    assert store.wait_dispatched()
    found = set()
    for queue_id in range(QUEUES):
        offset = store.get_min_offset_in_queue(ORDERS, queue_id)
        while offset < store.get_max_offset_in_queue(ORDERS, queue_id):
            result = store.get_message(ORDERS, queue_id, offset, 32)
            found.update(decode_record(raw).body for raw in result.messages)
            assert result.next_begin_offset > offset
            offset = result.next_begin_offset
    return found


def check(config: StoreConfig, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "broker_core", "store", "check", "--store", str(config.root), *extra],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path: Path) -> StoreConfig:
    # One segment holds them all: the damage sits in the middle of the segment recovery walks.
    return tiny_config(tmp_path / "store", mapped_file_size_commit_log=1024 * 1024)


def test_a_flipped_byte_mid_segment_costs_one_message_not_the_rest(
    config: StoreConfig, caplog: pytest.LogCaptureFixture
) -> None:
    written = fill(config)
    phys, size, damaged_body, damaged_id = written[COUNT // 2]
    flip(config, phys + size - 40)  # inside the body: the body CRC fails
    with caplog.at_level(logging.ERROR, logger="broker_core.store"):
        store = reopen(config)
    try:
        expected = {w[2] for w in written} - {damaged_body}
        assert bodies(store) == expected, "every message after the damaged one is kept"
        assert store.view_message_by_id(damaged_id) is None
        assert store.query_message(ORDERS, f"k{COUNT // 2}") == []
        assert [m.body for m in store.query_message(ORDERS, f"k{COUNT - 1}")] == [written[-1][2]]
        errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
        assert any(f"[{phys}, {phys + size})" in r.getMessage() for r in errors)
        recorded = json.loads((config.root / "damaged.json").read_text())["ranges"]
        assert [(r["start"], r["end"]) for r in recorded] == [(phys, phys + size)]
        fresh = store.put_message(message(ORDERS, 0, b"after the damage"))
        assert fresh.ok and fresh.wrote_offset == written[-1][0] + written[-1][1]
    finally:
        store.close()
    again = reopen(config)
    try:
        assert len(bodies(again)) == COUNT, "999 old ones and the fresh one survive a second start"
    finally:
        again.close()


def test_after_a_crash_the_rebuilt_queues_skip_the_damaged_record_and_keep_the_rest(
    config: StoreConfig,
) -> None:
    """No checkpoint: consume queues are rebuilt from the log, with a blank where the
    damaged record was (a gap fill once blanked the whole file's earlier entries)."""
    written = fill(config)
    phys, size, damaged_body, _ = written[COUNT // 2]
    flip(config, phys + size - 40)
    (config.root / "abort").write_bytes(b"")
    (config.root / "checkpoint").unlink()
    store = reopen(config)
    try:
        assert bodies(store) == {w[2] for w in written} - {damaged_body}
        assert store.damage.contains(phys)
    finally:
        store.close()


def test_a_damaged_record_size_is_resynchronised_past(config: StoreConfig) -> None:
    written = fill(config)
    phys, size, damaged_body, _ = written[300]
    flip(config, phys + 1)  # TOTALSIZE: the record's length, and so the next record's start, is lost
    store = reopen(config)
    try:
        assert bodies(store) == {w[2] for w in written} - {damaged_body}
    finally:
        store.close()


def test_damaged_properties_are_caught_by_the_consume_queue_entry(config: StoreConfig) -> None:
    """The TAGS value lies outside the body CRC: its consume-queue entry's tag hash tells."""
    written = fill(config)
    phys, size, damaged_body, damaged_id = written[COUNT // 2]
    with MessageStore(config, clock_ms=Clock()) as store:
        raw = store.commit_log.read(phys, size)
    assert raw is not None
    tag_at = phys + raw.rindex(b"TagA") + 3
    flip(config, tag_at)  # "TagA" -> another tag; the record still parses and its body CRC holds
    store = reopen(config)
    try:
        assert damaged_body not in bodies(store)
        assert len(bodies(store)) == COUNT - 1
        assert store.view_message_by_id(damaged_id) is None
        assert store.damage.contains(phys)
    finally:
        store.close()


def test_store_check_reports_damage_without_changing_a_byte_and_repair_says_what_it_did(
    config: StoreConfig,
) -> None:
    written = fill(config)
    phys, size, damaged_body, _ = written[COUNT // 2]
    flip(config, phys + size - 40)
    files = sorted(p for p in config.root.rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in files}
    report = check(config)
    assert report.returncode == 1, report.stdout
    assert f"damaged range [{phys}, {phys + size})" in report.stdout
    assert "check: 1 problem(s)" in report.stdout
    assert sorted(p for p in config.root.rglob("*") if p.is_file()) == files
    assert all(p.read_bytes() == data for p, data in before.items()), "check changed nothing"
    repaired = check(config, "--repair")
    assert f"changed: skipped and recorded damaged range [{phys}, {phys + size})" in repaired.stdout
    assert repaired.returncode == 0, repaired.stdout
    assert "damaged ranges on record (damaged.json): 1" in repaired.stdout
    store = reopen(config)
    try:
        assert bodies(store) == {w[2] for w in written} - {damaged_body}
    finally:
        store.close()


def test_a_torn_tail_still_ends_the_log(config: StoreConfig) -> None:
    """Bad bytes with nothing valid after them are a torn write, cut as before."""
    written = fill(config, 50)
    phys, size, _body, _ = written[-1]
    flip(config, phys + size - 40)
    store = reopen(config)
    try:
        assert store.commit_log.max_offset == phys
        assert len(bodies(store)) == 49
        assert not (config.root / "damaged.json").exists()
        assert store.recovery_changes == [f"cut a torn tail after commit-log offset {phys}"]
    finally:
        store.close()


def test_decode_of_the_served_records_is_unchanged(config: StoreConfig) -> None:
    written = fill(config, 20)
    store = reopen(config)
    try:
        raw = store.commit_log.read(written[3][0], written[3][1])
        assert raw is not None and decode_record(raw).body == written[3][2]
    finally:
        store.close()
