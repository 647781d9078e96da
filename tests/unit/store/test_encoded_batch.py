"""A producer's encoded batch (RocketMQ's batch body) stored item by item, straight from its bytes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.errors import MessageIllegalError
from broker_core.model.message import MessageBatchInner, decode_batch, encode_batch, iter_records
from broker_core.store import commitlog
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore

from .conftest import ORDERS, Clock, read_queue, reopen, tiny_config

speedups = pytest.importorskip("broker_core._speedups")


def items(n: int, start: int = 0) -> list[tuple[bytes, dict[str, str], int]]:
    return [
        (
            f"body-{i}-é".encode() * (1 + i % 3),
            {"TAGS": f"tag{i % 2}", "KEYS": f"order-{i} shared", "UNIQ_KEY": f"U{i:031d}", "WAIT": "true"},
            i % 5,
        )
        for i in range(start, start + n)
    ]


def batch(n: int, queue_id: int = 0, start: int = 0) -> MessageBatchInner:
    return MessageBatchInner(
        ORDERS,
        queue_id,
        encode_batch(items(n, start)),
        born_host="10.1.2.3:50000",
        born_timestamp=1234,
        properties={"WAIT": "true"},
    )


def test_it_stores_each_item_as_its_own_record_with_consecutive_queue_offsets(store: MessageStore) -> None:
    first = store.put_messages(batch(5))
    second = store.put_messages(batch(3, start=5))
    assert first.status is PutMessageStatus.PUT_OK and first.msg_count == 5
    assert (first.queue_offset, second.queue_offset) == (0, 5)
    assert len(first.msg_ids) == 5 and len(set(first.msg_ids)) == 5
    stored = read_queue(store, ORDERS, 0)
    assert [m.queue_offset for m in stored] == list(range(8))
    for msg, (body, props, flag) in zip(stored, items(8), strict=True):
        assert (msg.body, msg.flag, msg.born_timestamp, msg.born_host) == (body, flag, 1234, "10.1.2.3:50000")
        assert msg.properties == props and msg.body_crc_ok
    assert [m.commit_log_offset for m in stored[:5]] == list(first.record_offsets)
    assert store.check() == []


def test_it_writes_the_same_bytes_as_the_message_by_message_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fill(root: Path) -> bytes:
        with MessageStore(tiny_config(root), clock_ms=Clock()) as store:
            for n in range(4):
                assert store.put_messages(batch(6, queue_id=n % 2, start=n * 6)).ok
            files = sorted((root / "commitlog").iterdir())
            return b"".join(f.read_bytes() for f in files)

    with_c = fill(tmp_path / "c")
    monkeypatch.setattr(commitlog, "_c_batch_items", None)
    without_c = fill(tmp_path / "py")
    assert with_c == without_c


def test_it_indexes_and_filters_batch_items_like_single_messages(store: MessageStore) -> None:
    store.put_messages(batch(10))
    store.wait_dispatched()
    assert [m.body for m in store.query_message(ORDERS, "order-7")] == [items(10)[7][0]]
    assert len(store.query_message(ORDERS, "shared", max_num=32)) == 10
    assert [m.queue_offset for m in store.query_message(ORDERS, f"U{3:031d}")] == [3]
    from broker_core.model.hashcode import tags_code

    pulled = store.get_message(ORDERS, 0, 0, 32, tags_codes={tags_code("tag1")})
    assert [m.properties["TAGS"] for m in iter_records(pulled.body)] == ["tag1"] * 5


def test_it_rebuilds_batch_queues_identically_from_the_commit_log(tmp_path: Path) -> None:
    config = tiny_config(tmp_path / "store")
    with MessageStore(config, clock_ms=Clock()) as store:
        for n in range(30):
            assert store.put_messages(batch(7, queue_id=n % 3, start=n * 7)).ok
    original = tmp_path / "cq-original"
    shutil.copytree(tmp_path / "store" / "consumequeue", original)
    MessageStore(config).rebuild_consume_queues()
    reopen(config).close()
    for path in original.rglob("*"):
        if path.is_file():
            rebuilt = tmp_path / "store" / "consumequeue" / path.relative_to(original)
            assert rebuilt.read_bytes() == path.read_bytes(), path


@pytest.mark.parametrize(
    "mangle, reason",
    [
        (lambda raw: raw[:-3], "inconsistent sizes"),
        (lambda raw: raw[:16] + (10**6).to_bytes(4, "big") + raw[20:], "inconsistent sizes"),
        (lambda raw: b"\x00\x00\x00\x05" + raw[4:], "inconsistent sizes"),
        (lambda raw: raw + b"\x00" * 10, "truncated"),
    ],
)
def test_it_refuses_a_malformed_batch_whole_and_writes_nothing(
    store: MessageStore, mangle, reason: str
) -> None:
    store.put_messages(batch(2))
    before = store.commit_log.max_offset
    good = encode_batch(items(3))
    bad = MessageBatchInner(ORDERS, 0, mangle(good), born_host="10.1.2.3:1")
    result = store.put_messages(bad)
    assert result.status is PutMessageStatus.MESSAGE_ILLEGAL
    assert reason in result.remark
    assert store.commit_log.max_offset == before
    assert len(read_queue(store, ORDERS, 0)) == 2


def test_it_refuses_an_empty_item_an_oversized_item_and_an_empty_batch(store: MessageStore) -> None:
    empty_item = MessageBatchInner(ORDERS, 0, encode_batch([(b"", {}, 0)]))
    huge = MessageBatchInner(ORDERS, 0, encode_batch([(b"x" * (32 * 1024), {}, 0)]))
    nothing = MessageBatchInner(ORDERS, 0, b"")
    assert "empty body" in store.put_messages(empty_item).remark
    assert "maxMessageSize" in store.put_messages(huge).remark
    assert store.put_messages(nothing).status is PutMessageStatus.MESSAGE_ILLEGAL
    assert store.put_messages(MessageBatchInner("bad topic", 0, encode_batch(items(1)))).status is (
        PutMessageStatus.MESSAGE_ILLEGAL
    )


@given(st.binary(max_size=300))
@settings(max_examples=300)
def test_it_splits_batches_exactly_like_the_python_reference(raw: bytes) -> None:
    try:
        expected = decode_batch(raw, 16 * 1024)
    except MessageIllegalError as exc:
        with pytest.raises(ValueError) as c_error:
            speedups.batch_items(raw, 16 * 1024)
        assert str(c_error.value) == exc.remark
    else:
        items, largest = speedups.batch_items(raw, 16 * 1024)
        assert items == expected
        assert largest == max((body + props for _at, body, props, _flag in expected), default=0)
