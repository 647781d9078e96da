"""A SYNC_FLUSH commit log writes its records with pwrite, not through the mapping: the same
bytes, the same offsets, readable at once (MappedFile.write_at says why)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker_core.model.message import MessageBatchInner, encode_batch
from broker_core.store import commitlog
from broker_core.store.mappedfile import MappedFile
from broker_core.store.store import MessageStore

from .conftest import AUDIT, ORDERS, Clock, message, read_queue, tiny_config

FLUSHES = ("ASYNC_FLUSH", "SYNC_FLUSH")


def feed(store: MessageStore, round_: int) -> None:
    """Singles, a list batch and a producer's encoded batch, on two topics and queues."""
    for i in range(20):
        topic = ORDERS if i % 3 else AUDIT
        body = f"single-{round_}-{i}-".encode() * (1 + i % 7)
        assert store.put_message(message(topic, i % 2, body, TAGS=f"t{i % 2}", KEYS=f"k{i}")).ok
    listed = [message(ORDERS, 1, f"listed-{round_}-{i}".encode() * 9, KEYS=f"l{i}") for i in range(8)]
    assert store.put_messages(listed).ok
    items = [(f"encoded-{round_}-{i}".encode() * 11, {"TAGS": "b", "KEYS": f"e{i}"}, i) for i in range(8)]
    encoded = MessageBatchInner(ORDERS, 0, encode_batch(items), born_host="10.1.2.3:50000", born_timestamp=7)
    assert store.put_messages(encoded).ok


@pytest.mark.parametrize("path", ["compiled", "python"])
def test_a_sync_flush_store_writes_the_bytes_an_async_one_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    if path == "python":  # the reference path, for the writes and the batches alike
        monkeypatch.setattr(commitlog, "_c_write_records", None)
        monkeypatch.setattr(commitlog, "_c_write_batch", None)
    elif commitlog._c_write_records is None:
        pytest.skip("the compiled module is not built here")
    writes: list[int] = []
    write_at = MappedFile.write_at

    def counted(self: MappedFile, pos: int, data: bytes | bytearray | memoryview) -> None:
        writes.append(len(data))
        write_at(self, pos, data)

    monkeypatch.setattr(MappedFile, "write_at", counted)
    stores = {
        f: MessageStore(tiny_config(tmp_path / f, flush_disk_type=f), clock_ms=Clock()).open()
        for f in FLUSHES
    }
    try:
        assert stores["SYNC_FLUSH"].commit_log.write_through
        assert not stores["ASYNC_FLUSH"].commit_log.write_through
        for round_ in range(30):  # past several 64 KiB segments: rolls, blank tails
            for store in stores.values():
                feed(store, round_)
        assert writes, "the SYNC_FLUSH store wrote nothing with pwrite"
        logs = {f: sorted((tmp_path / f / "commitlog").iterdir()) for f in FLUSHES}
        assert len(logs["SYNC_FLUSH"]) >= 3
        assert [p.name for p in logs["SYNC_FLUSH"]] == [p.name for p in logs["ASYNC_FLUSH"]]
        for mapped, written in zip(logs["ASYNC_FLUSH"], logs["SYNC_FLUSH"], strict=True):
            assert written.read_bytes() == mapped.read_bytes(), written.name
        # Read back through the mapping, at once: the pwrite and the mapping share the page cache.
        for topic, queue_id in ((ORDERS, 0), (ORDERS, 1), (AUDIT, 0), (AUDIT, 1)):
            got = {f: read_queue(store, topic, queue_id) for f, store in stores.items()}
            assert got["SYNC_FLUSH"], (topic, queue_id)
            assert [m.body for m in got["SYNC_FLUSH"]] == [m.body for m in got["ASYNC_FLUSH"]]
            assert [m.msg_id for m in got["SYNC_FLUSH"]] == [m.msg_id for m in got["ASYNC_FLUSH"]]
        assert stores["SYNC_FLUSH"].query_message(ORDERS, "e3") == stores["ASYNC_FLUSH"].query_message(
            ORDERS, "e3"
        )
    finally:
        for store in stores.values():
            store.close()


def test_a_write_into_a_closed_file_is_refused(tmp_path: Path) -> None:
    mapped_file = MappedFile.create(tmp_path, 0, 64 * 1024)
    mapped_file.write_at(0, b"record")
    assert mapped_file.mm[:6] == b"record"  # through the descriptor, seen in the mapping
    mapped_file.close()
    with pytest.raises(ValueError, match="closed"):
        mapped_file.write_at(6, b"late")
    assert (tmp_path / f"{0:020d}").read_bytes()[:10] == b"record\0\0\0\0"
