"""Queries by message key through the store (``MessageStore.query_message`` over the index files)."""

from __future__ import annotations

from pathlib import Path

from broker_core.model.hashcode import java_hash_code
from broker_core.store.store import MessageStore

from .conftest import AUDIT, ORDERS, T0, Clock, message, reopen, tiny_config

SECOND = 1000


def put_at(store: MessageStore, clock: Clock, ms: int, body: bytes, **props: str) -> int:
    clock.ms = ms
    result = store.put_message(message(body=body, **props))
    assert result.ok
    return result.wrote_offset


def test_it_finds_messages_by_key_within_a_time_range(store: MessageStore, clock: Clock) -> None:
    for i in range(6):
        put_at(store, clock, T0 + i * 10 * SECOND, b"m%d" % i, KEYS="order-1")
    put_at(store, clock, T0 + 15 * SECOND, b"other", KEYS="order-2")
    store.wait_dispatched()
    everything = store.query_message(ORDERS, "order-1", 32, 0, T0 + 3600 * SECOND)
    assert [m.body for m in everything] == [b"m5", b"m4", b"m3", b"m2", b"m1", b"m0"]
    window = store.query_message(ORDERS, "order-1", 32, T0 + 15 * SECOND, T0 + 35 * SECOND)
    assert [m.body for m in window] == [b"m3", b"m2"]
    assert store.query_message(ORDERS, "order-1", 32, T0 + 100 * SECOND, T0 + 200 * SECOND) == []
    assert store.query_message(ORDERS, "order-3", 32, 0, T0 + 3600 * SECOND) == []
    assert store.check() == []


def test_it_finds_a_message_by_its_unique_key(store: MessageStore, clock: Clock) -> None:
    uniq = "0100007F0000C2FC0000B9C58E730100"
    put_at(store, clock, T0, b"first", UNIQ_KEY="0100007F0000C2FC0000B9C58E730000")
    offset = put_at(store, clock, T0 + SECOND, b"mine", UNIQ_KEY=uniq, KEYS="k")
    store.wait_dispatched()
    found = store.query_message(ORDERS, uniq, 32, T0 - SECOND, T0 + 10 * SECOND)
    assert [(m.body, m.commit_log_offset, m.uniq_key) for m in found] == [(b"mine", offset, uniq)]
    assert store.check() == []


def test_it_indexes_each_space_separated_key(store: MessageStore, clock: Clock) -> None:
    put_at(store, clock, T0, b"both", KEYS="alpha beta")
    put_at(store, clock, T0, b"beta only", KEYS="beta")
    store.wait_dispatched()
    end = T0 + SECOND
    assert [m.body for m in store.query_message(ORDERS, "alpha", 32, 0, end)] == [b"both"]
    assert [m.body for m in store.query_message(ORDERS, "beta", 32, 0, end)] == [b"beta only", b"both"]
    assert store.query_message(ORDERS, "alpha beta", 32, 0, end) == []


def test_it_keeps_keys_of_one_topic_apart_from_another(store: MessageStore, clock: Clock) -> None:
    put_at(store, clock, T0, b"order", KEYS="shared")
    clock.ms = T0
    store.put_message(message(AUDIT, 0, b"audit", KEYS="shared"))
    store.wait_dispatched()
    assert [m.body for m in store.query_message(ORDERS, "shared", 32, 0, T0 + SECOND)] == [b"order"]
    assert [m.body for m in store.query_message(AUDIT, "shared", 32, 0, T0 + SECOND)] == [b"audit"]


def test_it_returns_only_matching_messages_when_every_key_shares_one_slot(tmp_path: Path) -> None:
    clock = Clock()
    with MessageStore(tiny_config(tmp_path, max_hash_slot_num=1), clock_ms=clock) as store:
        for i in range(40):
            put_at(store, clock, T0 + i, b"m%d" % i, KEYS=f"key-{i % 4}")
        store.wait_dispatched()
        found = store.query_message(ORDERS, "key-2", 32, 0, T0 + SECOND)
        assert [m.body for m in found] == [b"m%d" % i for i in range(38, 0, -4)]
        assert all(m.keys == "key-2" for m in found)
        assert store.check() == []


def test_it_filters_out_keys_with_the_same_java_hash(store: MessageStore, clock: Clock) -> None:
    assert java_hash_code("Aa") == java_hash_code("BB")  # the classic collision
    put_at(store, clock, T0, b"Aa-0", KEYS="Aa")
    put_at(store, clock, T0, b"BB-0", KEYS="BB")
    put_at(store, clock, T0, b"Aa-1", KEYS="Aa")
    store.wait_dispatched()
    assert [m.body for m in store.query_message(ORDERS, "Aa", 32, 0, T0 + SECOND)] == [b"Aa-1", b"Aa-0"]
    assert [m.body for m in store.query_message(ORDERS, "BB", 32, 0, T0 + SECOND)] == [b"BB-0"]


def test_it_finds_max_num_matches_behind_many_newer_colliding_keys(store: MessageStore, clock: Clock) -> None:
    # The index stores only hashes: newer "BB" entries come first in the chain for "Aa".
    for i in range(3):
        put_at(store, clock, T0, b"Aa-%d" % i, KEYS="Aa")
    for i in range(10):
        put_at(store, clock, T0, b"BB-%d" % i, KEYS="BB")
    store.wait_dispatched()
    found = store.query_message(ORDERS, "Aa", 2, 0, T0 + SECOND)
    assert [m.body for m in found] == [b"Aa-2", b"Aa-1"]


def test_it_returns_newest_first_and_at_most_max_num(store: MessageStore, clock: Clock) -> None:
    for i in range(20):
        put_at(store, clock, T0 + i * SECOND, b"m%02d" % i, KEYS="hot")
    store.wait_dispatched()
    found = store.query_message(ORDERS, "hot", 5, 0, T0 + 60 * SECOND)
    assert [m.body for m in found] == [b"m19", b"m18", b"m17", b"m16", b"m15"]
    assert len(store.query_message(ORDERS, "hot", 1, 0, T0 + 60 * SECOND)) == 1


def test_it_finds_keys_across_index_files_and_after_a_reopen(tmp_path: Path) -> None:
    clock = Clock()
    config = tiny_config(tmp_path)  # 255 entries per index file
    store = MessageStore(config, clock_ms=clock).open()
    for i in range(400):
        put_at(store, clock, T0 + i, b"m%d" % i, KEYS=f"k{i % 10} all", UNIQ_KEY=f"U{i:05d}")
    store.wait_dispatched()
    assert store.index is not None and len(store.index.files) >= 4
    store.close()
    store = reopen(config, clock)
    try:
        found = store.query_message(ORDERS, "k7", 100, 0, T0 + 10 * SECOND)
        assert [m.body for m in found] == [b"m%d" % i for i in range(397, -1, -10)]
        assert [m.body for m in store.query_message(ORDERS, "U00003", 32, 0, T0 + 10 * SECOND)] == [b"m3"]
        assert len(store.query_message(ORDERS, "all", 32, 0, T0 + 10 * SECOND)) == 32
        assert store.check() == []
    finally:
        store.close()
