"""The broadcasting consumer's local offset file (``LocalFileOffsetStore``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from broker_core.client.consumer.offsetstore import (
    NO_OFFSET,
    LocalFileOffsetStore,
    OffsetFileError,
    ReadOffsetType,
    default_local_offset_store_dir,
    format_offsets,
    parse_offsets,
)
from broker_core.messagequeue import MessageQueue

Q0 = MessageQueue("T", "broker-a", 0)
Q1 = MessageQueue("T", "broker-a", 1)


def store(tmp_path: Path) -> LocalFileOffsetStore:
    return LocalFileOffsetStore("10.0.0.1@app", "group-x", tmp_path)


def test_the_file_lives_where_rocketmq_puts_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert store(tmp_path).path == tmp_path / "10.0.0.1@app" / "group-x" / "offsets.json"
    monkeypatch.delenv("ROCKETMQ_CLIENT_LOCAL_OFFSET_STORE_DIR", raising=False)
    assert default_local_offset_store_dir() == Path.home() / ".rocketmq_offsets"


def test_offsets_survive_a_new_store(tmp_path: Path) -> None:
    first = store(tmp_path)
    first.update(Q0, 5)
    first.update(Q1, 9)
    asyncio.run(first.persist_all())
    second = store(tmp_path)
    asyncio.run(second.load())
    assert second.offsets() == {Q0: 5, Q1: 9}
    assert asyncio.run(second.read(Q0, ReadOffsetType.READ_FROM_MEMORY)) == 5
    assert (
        asyncio.run(second.read(MessageQueue("T", "broker-a", 7), ReadOffsetType.READ_FROM_STORE))
        == NO_OFFSET
    )


def test_the_format_is_java_s_offset_wrapper(tmp_path: Path) -> None:
    data = format_offsets({Q1: 3, Q0: 2})
    assert data == (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"T"}:2,'
        b'{"brokerName":"broker-a","queueId":1,"topic":"T"}:3}}'
    )
    assert parse_offsets(data) == {Q0: 2, Q1: 3}


def test_write_is_atomic_and_keeps_the_previous_file(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.update(Q0, 1)
    s.write_file()
    s.update(Q0, 2)
    s.write_file()
    assert parse_offsets(s.path.read_bytes()) == {Q0: 2}
    assert parse_offsets(s.backup_path.read_bytes()) == {Q0: 1}
    assert not list(s.path.parent.glob("*.tmp"))


def test_only_changes_are_written(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.update(Q0, 1)
    asyncio.run(s.persist_all())
    s.path.unlink()
    asyncio.run(s.persist_all())  # nothing changed: no write
    assert not s.path.exists()
    s.update(Q0, 1, increase_only=True)
    s.update(Q0, 0, increase_only=True)  # never moves back
    assert s.offsets() == {Q0: 1}


def test_a_garbage_file_falls_back_to_the_backup(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.update(Q0, 4)
    s.write_file()
    s.update(Q0, 6)
    s.write_file()
    s.path.write_bytes(b"\x00\x00 torn")
    fresh = store(tmp_path)
    asyncio.run(fresh.load())
    assert fresh.offsets() == {Q0: 4}


def test_a_missing_file_falls_back_to_the_backup(tmp_path: Path) -> None:
    s = store(tmp_path)
    s.update(Q0, 4)
    s.write_file()
    s.update(Q0, 6)
    s.write_file()
    s.path.unlink()
    fresh = store(tmp_path)
    asyncio.run(fresh.load())
    assert fresh.offsets() == {Q0: 4}


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"[1, 2]",
        b'{"offsetTable": 3}',
        b'{"offsetTable":{"x":1}}',
        b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:"many"}}',
    ],
)
def test_garbage_without_a_backup_is_a_clear_error(tmp_path: Path, content: bytes) -> None:
    s = store(tmp_path)
    s.path.parent.mkdir(parents=True)
    s.path.write_bytes(content)
    with pytest.raises(OffsetFileError, match=r"offsets\.json"):
        asyncio.run(s.load())


def test_no_file_is_no_offset(tmp_path: Path) -> None:
    s = store(tmp_path)
    asyncio.run(s.load())
    assert s.offsets() == {}
    assert asyncio.run(s.read(Q0, ReadOffsetType.MEMORY_FIRST_THEN_STORE)) == NO_OFFSET


def test_an_unwritable_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "blocked").write_text("a file where the directory should be")
    s = LocalFileOffsetStore("c", "g", tmp_path / "blocked")
    s.update(Q0, 1)
    with pytest.raises(OffsetFileError, match="cannot write"):
        s.write_file()
