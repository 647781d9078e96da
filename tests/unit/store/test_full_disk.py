"""A full disk is a state, not a crash: the store on a small tmpfs that the test fills.

The disk fills under a running store (config files, the index) or while it is down (the
read-only state at open).  Each test then gives the space back and sees the store write
again what waited.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from broker_core.config import StoreConfig
from broker_core.store.results import GetMessageStatus, PutMessageStatus
from broker_core.store.store import MessageStore
from tests.disk import fill, small_disk

from .conftest import ORDERS, Clock, message, reopen, tiny_config

# Index files of 7 entries: a message with one key each, the eighth needs a new file.
INDEX_ENTRIES = 8


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[Path]:
    with small_disk(tmp_path / "disk", 4) as mounted:
        yield mounted


def small_config(disk: Path, **overrides: object) -> StoreConfig:
    settings: dict[str, object] = {"max_index_num": INDEX_ENTRIES, "flush_interval_consume_queue": 50}
    settings.update(overrides)
    return tiny_config(disk / "store", **settings)


def eventually(condition: Callable[[], bool], timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def tracebacks(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.exc_info]


def test_offsets_and_delay_offsets_keep_their_old_file_and_warn_once_while_the_disk_is_full(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config_dir = disk / "store" / "config"
    store = MessageStore(small_config(disk), clock_ms=Clock()).open()
    try:
        store.consumer_offsets.commit_offset("10.0.0.1", "g", ORDERS, 0, 5)
        assert store.persist_offsets()
        assert eventually(lambda: (config_dir / "delayOffset.json").exists())
        before = {p.name: p.read_bytes() for p in config_dir.iterdir()}
        filler = fill(disk)
        caplog.clear()
        with caplog.at_level(logging.INFO):
            store.consumer_offsets.commit_offset("10.0.0.1", "g", ORDERS, 0, 9)
            store.schedule.offset_table[1] = 3  # as a delivery moves it
            refused = [store.persist_offsets() for _ in range(3)]
            # The checkpoint cycle (every 50 ms) tries delayOffset.json: let it try a few times.
            assert eventually(lambda: "delayOffset.json" in caplog.text)
            time.sleep(0.3)
        assert refused == [False, False, False]
        # The flush cycle keeps trying delayOffset.json in the background: a .tmp of an attempt
        # under way may be seen for a moment, but none may stay behind.
        assert eventually(lambda: {p.name: p.read_bytes() for p in config_dir.iterdir()} == before), (
            "old files kept, no .tmp"
        )
        warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
        assert len([w for w in warnings if "consumerOffset.json" in w]) == 1, warnings
        assert len([w for w in warnings if "delayOffset.json" in w]) == 1, warnings
        assert tracebacks(caplog) == []

        filler.unlink()
        assert store.persist_offsets()
        assert b'"0": 9' in (config_dir / "consumerOffset.json").read_bytes()
        assert eventually(lambda: b'"1": 3' in (config_dir / "delayOffset.json").read_bytes())
    finally:
        store.close()


def test_a_message_stored_while_the_index_cannot_grow_is_found_by_key_and_indexed_later(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MessageStore(small_config(disk), clock_ms=Clock()).open()
    try:
        for i in range(INDEX_ENTRIES - 1):
            assert store.put_message(message(KEYS=f"k{i}")).ok
        assert store.wait_dispatched()
        filler = fill(disk)
        # The commit log's segment has room: the message is stored and acknowledged.
        late = store.put_message(message(body=b"late", KEYS="late"))
        assert late.status is PutMessageStatus.PUT_OK
        assert store.wait_dispatched()
        assert [m.body for m in store.query_message(ORDERS, "late")] == [b"late"]
        assert [m.keys for m in store.query_message(ORDERS, "k3")] == ["k3"]
        # No index file could be made: the store takes no more writes until there is room.
        refused = store.put_message(message(KEYS="refused"))
        assert refused.status is PutMessageStatus.DISK_FULL and "read-only" in refused.remark
        assert tracebacks(caplog) == []

        filler.unlink()
        assert eventually(lambda: store.put_message(message(KEYS="again")).ok)
        assert store.stats["indexKeysWaiting"] == 0
        assert len(store.index.files) == 2  # type: ignore[union-attr]
        assert [m.body for m in store.query_message(ORDERS, "late")] == [b"late"]
        assert store.check() == []
    finally:
        store.close()
    store = reopen(small_config(disk))
    try:
        assert [m.body for m in store.query_message(ORDERS, "late")] == [b"late"]
    finally:
        store.close()


def test_it_reopens_on_a_full_disk_with_keys_waiting_and_serves_reads(
    disk: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = MessageStore(small_config(disk), clock_ms=Clock()).open()
    for i in range(INDEX_ENTRIES - 1):
        assert store.put_message(message(KEYS=f"k{i}")).ok
    assert store.wait_dispatched()
    filler = fill(disk)
    assert store.put_message(message(body=b"late", KEYS="late")).ok
    assert store.wait_dispatched()
    store.close()

    store = reopen(small_config(disk))  # the index's recovery cannot make the file it needs
    try:
        assert store.disk_full_reason is not None
        assert store.put_message(message(KEYS="refused")).status is PutMessageStatus.DISK_FULL
        result = store.get_message(ORDERS, 0, 0, 32)
        assert result.status is GetMessageStatus.FOUND and len(result.messages) == INDEX_ENTRIES
        assert [m.body for m in store.query_message(ORDERS, "late")] == [b"late"]
        assert [m.keys for m in store.query_message(ORDERS, "k0")] == ["k0"]
        assert tracebacks(caplog) == []
        filler.unlink()
        assert eventually(lambda: store.put_message(message(KEYS="again")).ok)
        assert store.stats["indexKeysWaiting"] == 0
    finally:
        store.close()


def test_it_opens_read_only_on_a_disk_that_filled_while_it_was_down(disk: Path) -> None:
    config = small_config(disk, disk_space_warning_level_ratio=0.9)
    store = MessageStore(config, clock_ms=Clock()).open()
    assert store.put_message(message(body=b"before")).ok
    store.close()
    filler = fill(disk)

    store = reopen(config)
    try:
        # Read-only from the first send, not from the first periodic disk check.
        first = store.put_message(message(body=b"first"))
        assert first.status is PutMessageStatus.DISK_FULL
        assert "diskSpaceWarningLevelRatio" in first.remark
        assert store.get_message(ORDERS, 0, 0, 32).status is GetMessageStatus.FOUND
        filler.unlink()
        assert eventually(lambda: store.put_message(message(body=b"after")).ok)
    finally:
        store.close()


def test_it_recovers_a_damaged_index_on_a_full_disk_and_finds_its_keys(disk: Path) -> None:
    store = MessageStore(small_config(disk), clock_ms=Clock()).open()
    for i in range(INDEX_ENTRIES):
        assert store.put_message(message(KEYS=f"k{i}")).ok
    assert store.wait_dispatched()
    newest = store.index.files[-1].path  # type: ignore[union-attr]
    store.close()
    with open(newest, "r+b") as raw:
        raw.truncate(100)  # torn by a power loss: set aside at open, its records re-indexed
    filler = fill(disk)

    store = reopen(small_config(disk))  # recovery needs a new index file and gets no space
    try:
        assert [m.keys for m in store.query_message(ORDERS, f"k{INDEX_ENTRIES - 1}")] == [
            f"k{INDEX_ENTRIES - 1}"
        ]
        assert store.put_message(message(KEYS="refused")).status is PutMessageStatus.DISK_FULL
        filler.unlink()
        assert eventually(lambda: store.put_message(message(KEYS="again")).ok)
        assert store.stats["indexKeysWaiting"] == 0
        assert store.wait_dispatched()
        assert [m.keys for m in store.query_message(ORDERS, "again")] == ["again"]
    finally:
        store.close()
