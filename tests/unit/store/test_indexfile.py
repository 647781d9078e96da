"""Tests for the message index (``broker_core.store.indexfile``): real files, tiny dimensions."""

from __future__ import annotations

import os
import random
import struct
import tempfile
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker_core.errors import CorruptFileError
from broker_core.model.hashcode import index_key_hash, java_hash_code
from broker_core.store.indexfile import (
    INDEX_HEADER_SIZE,
    INDEX_SIZE,
    IndexFile,
    IndexService,
    index_file_size,
)

T0 = 1_700_000_000_000  # a store timestamp in ms
ALL_TIME = (0, 2**62)


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self, ms: int = T0) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock() -> Clock:
    return Clock()


def new_file(tmp_path: Path, slots: int = 8, entries: int = 32, name: str = "20240101000000000") -> IndexFile:
    return IndexFile(tmp_path / name, slots, entries, create=True)


def new_service(tmp_path: Path, clock: Clock, slots: int = 4, entries: int = 4) -> IndexService:
    service = IndexService(tmp_path / "index", slots, entries, clock_ms=clock)
    service.load()
    return service


def select(index_file: IndexFile, key: str, max_num: int = 100) -> list[int]:
    return index_file.select_phy_offsets(key, max_num, *ALL_TIME)


# -- one file --------------------------------------------------------------------------------


def test_it_finds_a_key_after_putting_it(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    assert f.put_key("T#order-1", 100, T0)
    assert f.put_key("T#order-2", 200, T0 + 1000)
    assert f.put_key("T#order-1", 300, T0 + 2000)

    assert select(f, "T#order-1") == [300, 100]
    assert select(f, "T#order-2") == [200]
    assert select(f, "T#order-3") == []
    assert (f.begin_phy_offset, f.end_phy_offset) == (100, 300)
    assert (f.begin_timestamp, f.end_timestamp) == (T0, T0 + 2000)
    assert f.index_count == 4
    assert f.check() == []


def test_it_starts_a_new_file_with_index_count_one_and_the_rocketmq_size(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=8, entries=32)
    assert f.index_count == 1
    assert not f.is_full
    assert select(f, "T#anything") == []
    assert os.path.getsize(f.path) == 40 + 8 * 4 + 32 * 20 == index_file_size(8, 32)
    assert struct.unpack_from(">qqqqii", f.path.read_bytes()) == (0, 0, 0, 0, 0, 1)


def test_it_writes_entries_in_the_rocketmq_layout(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=8, entries=32)
    f.put_key("T#k", 4096, T0 + 5500)
    f.put_key("T#k", 8192, T0 + 7000)
    f.flush()
    raw = f.path.read_bytes()
    key_hash = index_key_hash("T#k")
    header = struct.unpack_from(">qqqqii", raw)
    assert header == (T0 + 5500, T0 + 7000, 4096, 8192, 1, 3)
    assert struct.unpack_from(">i", raw, INDEX_HEADER_SIZE + (key_hash % 8) * 4) == (2,)
    entries = INDEX_HEADER_SIZE + 8 * 4
    assert struct.unpack_from(">iqii", raw, entries + 1 * INDEX_SIZE) == (key_hash, 4096, 0, 0)
    assert struct.unpack_from(">iqii", raw, entries + 2 * INDEX_SIZE) == (key_hash, 8192, 1, 1)


def test_it_keeps_keys_apart_when_all_of_them_share_one_slot(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=1, entries=64)
    for i in range(40):
        f.put_key(f"T#key-{i % 10}", i * 100, T0 + i)

    for k in range(10):
        assert select(f, f"T#key-{k}") == [i * 100 for i in range(39, -1, -1) if i % 10 == k]
    assert f.hash_slot_count == 1
    assert f.check() == []


def test_it_returns_both_messages_when_two_keys_have_the_same_java_hash(tmp_path: Path) -> None:
    assert java_hash_code("Aa") == java_hash_code("BB")  # Java's classic collision
    assert index_key_hash("T#Aa") == index_key_hash("T#BB")
    f = new_file(tmp_path, slots=1024)
    f.put_key("T#Aa", 100, T0)
    f.put_key("T#BB", 200, T0)
    f.put_key("T#Ab", 300, T0)

    # Only the hash is stored: the caller tells Aa from BB by reading the messages.
    assert select(f, "T#Aa") == [200, 100]
    assert select(f, "T#BB") == [200, 100]
    assert select(f, "T#Ab") == [300]


def test_it_filters_by_store_time_to_the_second(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put_key("T#k", 100, T0)
    f.put_key("T#k", 200, T0 + 10_000)
    f.put_key("T#k", 300, T0 + 20_500)

    assert f.select_phy_offsets("T#k", 10, T0 + 5_000, T0 + 15_000) == [200]
    assert f.select_phy_offsets("T#k", 10, T0 + 10_000, T0 + 30_000) == [300, 200]
    assert f.select_phy_offsets("T#k", 10, T0 - 5_000, T0 - 1) == []
    assert f.select_phy_offsets("T#k", 10, T0 + 30_000, T0 + 40_000) == []
    # The entry keeps 20 s; the message was stored at 20.5 s, so a range from 20.5 s finds it.
    assert f.select_phy_offsets("T#k", 10, T0 + 20_500, T0 + 21_000) == [300]


def test_it_stops_at_max_num_with_the_newest_first(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    for i in range(1, 11):
        f.put_key("T#k", i * 10, T0)

    assert f.select_phy_offsets("T#k", 3, *ALL_TIME) == [100, 90, 80]
    assert f.select_phy_offsets("T#k", 0, *ALL_TIME) == []


def test_it_clamps_the_time_diff_to_int32_and_never_below_zero(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put_key("T#a", 1, T0)
    f.put_key("T#b", 2, T0 - 60_000)  # the clock stepped back
    f.put_key("T#c", 3, T0 + 2**31 * 1000 + 5_000)
    entries = INDEX_HEADER_SIZE + 8 * 4
    diffs = [
        struct.unpack_from(">i", f.path.read_bytes(), entries + i * INDEX_SIZE + 12)[0] for i in (1, 2, 3)
    ]
    assert diffs == [0, 0, 2**31 - 1]
    assert f.check() == []


def test_it_refuses_a_key_when_the_file_is_full(tmp_path: Path) -> None:
    f = new_file(tmp_path, entries=4)
    assert [f.put_key(f"T#{i}", i, T0) for i in range(4)] == [True, True, True, False]
    assert f.is_full
    assert f.index_count == 4
    assert f.end_phy_offset == 2


def test_it_keeps_its_contents_when_opened_again(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put_key("T#k", 100, T0)
    f.put_key("T#k", 200, T0 + 3000)
    f.flush()
    f.close()

    again = IndexFile(f.path, 8, 32, create=False)
    assert select(again, "T#k") == [200, 100]
    assert (again.begin_timestamp, again.end_timestamp, again.index_count) == (T0, T0 + 3000, 3)


def test_it_refuses_to_open_a_file_of_another_size_or_an_impossible_header(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.close()
    with pytest.raises(CorruptFileError, match="expected"):
        IndexFile(f.path, 16, 32, create=False)
    with open(f.path, "r+b") as raw:
        raw.seek(36)
        raw.write(struct.pack(">i", 33))  # indexCount beyond index_num
    with pytest.raises(CorruptFileError, match="indexCount"):
        IndexFile(f.path, 8, 32, create=False)


def test_it_refuses_to_create_over_an_existing_file(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    with pytest.raises(FileExistsError):
        IndexFile(f.path, 8, 32, create=True)


# -- truncate --------------------------------------------------------------------------------


def records(count: int, seed: int) -> list[tuple[str, int, int]]:
    """(key, phy offset, store time) in commit-log order, several keys per offset at times."""
    rng = random.Random(seed)
    out = []
    phy, ts = 1000, T0
    for _ in range(count):
        for _ in range(rng.choice((1, 1, 2, 3))):
            out.append((f"T#key-{rng.randrange(12)}", phy, ts))
        phy += rng.randrange(50, 500)
        ts += rng.randrange(0, 2500)
    return out


@pytest.mark.parametrize("cut", [0, 1, 7, 20, 39, 40])
def test_it_truncates_to_the_bytes_of_a_file_built_without_the_tail(tmp_path: Path, cut: int) -> None:
    kept = records(40, seed=cut)
    replacement = [(key, phy + 7, ts) for key, phy, ts in records(15, seed=99)]
    tail_start = kept[cut][1] if cut < len(kept) else 10**12
    kept_prefix = [r for r in kept if r[1] < tail_start]
    base = kept_prefix[-1][1] if kept_prefix else 0
    base_ts = kept_prefix[-1][2] if kept_prefix else T0
    replacement = [(key, phy - 1000 + base + 1, ts - T0 + base_ts) for key, phy, ts in replacement]

    truncated = new_file(tmp_path, slots=5, entries=200, name="20240101000000000")
    for r in kept:
        truncated.put_key(*r)
    truncated.truncate(tail_start)
    assert truncated.check() == []
    assert truncated.end_phy_offset == base
    for r in replacement:
        truncated.put_key(*r)

    fresh = new_file(tmp_path, slots=5, entries=200, name="20240101000000001")
    for r in kept_prefix + replacement:
        fresh.put_key(*r)

    truncated.flush()
    fresh.flush()
    assert truncated.path.read_bytes() == fresh.path.read_bytes()
    assert truncated.check() == []


def test_it_becomes_a_fresh_file_when_truncated_below_its_first_entry(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    for i in range(5):
        f.put_key(f"T#{i}", 100 + i, T0 + i)
    f.truncate(100)
    assert f.index_count == 1
    assert (f.begin_phy_offset, f.end_phy_offset, f.hash_slot_count) == (0, 0, 0)
    assert f.path.read_bytes() == bytes([0] * 36) + struct.pack(">i", 1) + bytes(8 * 4 + 32 * 20)


def test_it_leaves_a_file_alone_when_truncating_above_its_last_entry(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    for i in range(5):
        f.put_key(f"T#{i}", 100 + i, T0 + i)
    before = f.path.read_bytes()
    f.truncate(105)
    assert f.path.read_bytes() == before


def test_it_truncates_a_full_default_sized_slot_table_quickly(tmp_path: Path) -> None:
    f = IndexFile(tmp_path / "20240101000000000", 5_000_000, 1_000, create=True)
    for i in range(900):
        f.put_key(f"T#{i}", i, T0)
    started = time.perf_counter()
    f.truncate(450)
    elapsed = time.perf_counter() - started
    assert f.index_count == 451
    assert select(f, "T#449") == [449]
    assert select(f, "T#450") == []
    assert elapsed < 2.0


def test_it_repairs_slots_left_pointing_past_a_stale_entry_count(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=2, entries=32)
    for i in range(1, 11):
        f.put_key(f"T#key-{i % 3}", i * 100, T0 + i)
    f.close()
    with open(f.path, "r+b") as raw:  # a power loss kept the entries and slots, not the header
        raw.seek(24)
        raw.write(struct.pack(">q", 500))
        raw.seek(36)
        raw.write(struct.pack(">i", 6))
    f = IndexFile(f.path, 2, 32, create=False)

    f.truncate(400)  # recovery: the commit log ends before the record at 400

    assert f.index_count == 4
    for k in range(3):
        assert select(f, f"T#key-{k}") == [i * 100 for i in (3, 2, 1) if i % 3 == k]
    assert f.check() == []
    f.put_key("T#key-1", 400, T0 + 4)
    assert select(f, "T#key-1") == [400, 100]


# -- check -----------------------------------------------------------------------------------


def test_it_reports_a_scrambled_slot_table_and_queries_still_end(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=16, entries=64)
    for i in range(50):
        f.put_key(f"T#key-{i % 7}", i * 10, T0 + i * 100)
    rng = random.Random(7)
    entries_pos = INDEX_HEADER_SIZE + 16 * 4
    f._mm[INDEX_HEADER_SIZE:entries_pos] = rng.randbytes(16 * 4)

    problems = f.check()
    assert problems
    assert any("slot" in p for p in problems)
    for k in range(7):
        select(f, f"T#key-{k}")  # returns: no hang, no exception


def test_it_reports_a_chain_that_loops_and_queries_still_end(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=1, entries=16)
    for i in range(10):
        f.put_key("T#k", i, T0)
    entries_pos = INDEX_HEADER_SIZE + 1 * 4
    struct.pack_into(">i", f._mm, entries_pos + 5 * INDEX_SIZE + 16, 8)  # 5 -> 8: a forward link
    struct.pack_into(">i", f._mm, entries_pos + 3 * INDEX_SIZE + 16, 3)  # 3 -> 3: a self link

    problems = f.check()
    assert any("entry 5: prevIndex 8" in p for p in problems)
    assert any("entry 3: prevIndex 3" in p for p in problems)
    assert select(f, "T#k") == [9, 8, 7, 6, 5, 4]


def test_it_reports_offsets_that_go_backwards(tmp_path: Path) -> None:
    f = new_file(tmp_path)
    f.put_key("T#a", 100, T0)
    f.put_key("T#b", 500, T0)
    f.put_key("T#c", 400, T0)
    assert any("entry 3: phyOffset 400 below the previous 500" in p for p in f.check())


def test_it_survives_random_garbage_anywhere_after_the_header(tmp_path: Path) -> None:
    f = new_file(tmp_path, slots=8, entries=64)
    for i in range(60):
        f.put_key(f"T#key-{i % 9}", i * 10, T0 + i * 10)
    rng = random.Random(3)
    size = index_file_size(8, 64)
    for _ in range(200):
        pos = rng.randrange(INDEX_HEADER_SIZE, size - 4)
        f._mm[pos : pos + 4] = rng.randbytes(4)
    assert f.check()
    for k in range(9):
        assert len(select(f, f"T#key-{k}")) <= 63
    f.truncate(300)  # recovery must cope too
    for k in range(9):
        select(f, f"T#key-{k}")


# -- the service -----------------------------------------------------------------------------


def test_it_indexes_the_unique_key_and_every_key_of_a_record(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=16, entries=64)
    service.build_index("T", 100, T0, "UNIQ1", "k1 k2")
    service.build_index("T", 200, T0, None, "k2  k3 k3 ")
    service.build_index("U", 300, T0, "UNIQ2", None)

    assert service.query("T", "UNIQ1", 10, *ALL_TIME) == [100]
    assert service.query("T", "k1", 10, *ALL_TIME) == [100]
    assert service.query("T", "k2", 10, *ALL_TIME) == [200, 100]
    assert service.query("T", "k3", 10, *ALL_TIME) == [200]  # a key repeated in KEYS counts once
    assert service.query("U", "UNIQ2", 10, *ALL_TIME) == [300]
    assert service.query("U", "k1", 10, *ALL_TIME) == []  # keys belong to their topic
    assert service.files[0].index_count == 1 + 6
    assert service.max_phy_offset == 300
    assert service.check() == []


def test_it_rolls_to_a_new_file_when_full_and_queries_across_files(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=2, entries=4)  # 3 entries per file
    for i in range(10):
        clock.ms = T0 + i
        service.build_index("T", i * 100, T0 + i * 1000, None, f"k{i % 2}")

    files = service.files
    assert len(files) == 4
    assert [f.index_count for f in files] == [4, 4, 4, 2]
    assert service.query("T", "k0", 100, *ALL_TIME) == [800, 600, 400, 200, 0]
    assert service.query("T", "k1", 3, *ALL_TIME) == [900, 700, 500]
    assert service.query("T", "k1", 100, T0 + 2_000, T0 + 6_000) == [500, 300]
    assert service.check() == []


def test_it_splits_one_record_across_files_when_a_file_fills_up(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=4, entries=3)  # 2 entries per file
    service.build_index("T", 100, T0, "U1", "a b c")
    assert len(service.files) == 2
    for key in ("U1", "a", "b", "c"):
        assert service.query("T", key, 10, *ALL_TIME) == [100]
    assert service.check() == []


def test_it_names_files_after_the_clock_and_keeps_names_in_creation_order(
    tmp_path: Path, clock: Clock
) -> None:
    clock.ms = 1_704_067_200_123  # 2024-01-01 00:00:00.123 UTC
    service = new_service(tmp_path, clock, slots=2, entries=2)  # 1 entry per file
    for i in range(3):
        service.build_index("T", i, T0, None, "k")
    assert [f.name for f in service.files] == [
        "20240101000000123",
        "20240101000000124",
        "20240101000000125",
    ]


def test_it_skips_records_it_has_already_indexed(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=4, entries=4)
    for i in range(5):
        service.build_index("T", i * 100, T0 + i, f"U{i}", "k")
    before = [f.path.read_bytes() for f in service.files]

    for i in range(5):  # the dispatcher re-delivers after a recovery
        service.build_index("T", i * 100, T0 + i, f"U{i}", "k")

    assert [f.path.read_bytes() for f in service.files] == before
    assert service.query("T", "k", 100, *ALL_TIME) == [400, 300, 200, 100, 0]
    service.build_index("T", 500, T0 + 5, "U5", "k")
    assert service.query("T", "k", 100, *ALL_TIME) == [500, 400, 300, 200, 100, 0]


def test_it_completes_a_partly_indexed_record_without_duplicating_keys(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=8, entries=4)  # 3 entries per file
    service.build_index("T", 100, T0, "U1", None)
    service.build_index("T", 200, T0, "U2", "a")  # as if a crash came before "b"

    service.build_index("T", 200, T0, "U2", "a b")  # the re-dispatch after recovery
    service.build_index("T", 200, T0, "U2", "a b")  # and once more: the record spans two files

    assert service.query("T", "U2", 10, *ALL_TIME) == [200]
    assert service.query("T", "a", 10, *ALL_TIME) == [200]
    assert service.query("T", "b", 10, *ALL_TIME) == [200]
    assert [f.index_count - 1 for f in service.files] == [3, 1]
    assert service.check() == []


def test_it_truncates_across_files(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=2, entries=4)  # 3 entries per file
    for i in range(10):
        service.build_index("T", i * 100, T0 + i * 1000, None, "k")
    paths = [f.path for f in service.files]

    service.truncate(450)

    assert service.query("T", "k", 100, *ALL_TIME) == [400, 300, 200, 100, 0]
    assert service.max_phy_offset == 400
    assert [f.path for f in service.files] == paths[:2]
    assert not paths[2].exists() and not paths[3].exists()
    assert service.check() == []

    service.build_index("T", 450, T0 + 20_000, None, "k")
    assert service.query("T", "k", 2, *ALL_TIME) == [450, 400]

    service.truncate(0)
    assert service.files == []
    assert service.max_phy_offset == 0


def test_it_keeps_everything_across_close_and_load(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=4, entries=5)
    for i in range(20):
        clock.ms = T0 + i
        service.build_index("T", i * 10, T0 + i * 1000, f"U{i}", f"k{i % 3}")
    expected = {k: service.query("T", k, 100, *ALL_TIME) for k in ("k0", "k1", "k2", "U7")}
    names = [f.name for f in service.files]
    service.close()

    again = IndexService(tmp_path / "index", 4, 5, clock_ms=clock)
    again.load()
    assert [f.name for f in again.files] == names
    assert {k: again.query("T", k, 100, *ALL_TIME) for k in expected} == expected
    assert again.max_phy_offset == 190
    assert again.rebuild_from is None
    assert again.check() == []
    again.build_index("T", 190, T0 + 19_000, "U19", "k1")  # already there
    again.build_index("T", 200, T0 + 20_000, "U20", "k2")
    assert again.query("T", "k2", 2, *ALL_TIME) == [200, 170]


def test_it_deletes_files_below_an_offset_but_never_the_newest(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=2, entries=4)  # 3 entries per file
    for i in range(9):
        service.build_index("T", i * 100, T0 + i, None, "k")
    files = service.files  # ends: 200, 500, 800

    assert service.delete_files_below(200) == 0
    assert service.delete_files_below(201) == 1
    assert not files[0].path.exists()
    assert service.query("T", "k", 100, *ALL_TIME) == [800, 700, 600, 500, 400, 300]

    assert service.delete_files_below(10**9) == 1
    assert service.files == [files[2]]
    assert service.query("T", "k", 100, *ALL_TIME) == [800, 700, 600]
    assert service.check() == []


def test_it_queries_only_files_whose_time_range_overlaps(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=2, entries=3)  # 2 entries per file
    for i in range(6):
        service.build_index("T", i, T0 + i * 60_000, None, "k")
    assert service.query("T", "k", 10, T0 + 60_000, T0 + 180_000) == [3, 2, 1]
    assert service.query("T", "k", 10, T0 + 400_000, T0 + 500_000) == []


def test_it_sets_a_damaged_file_and_its_successors_aside_for_rebuild(tmp_path: Path, clock: Clock) -> None:
    service = new_service(tmp_path, clock, slots=2, entries=4)
    for i in range(9):
        service.build_index("T", i * 100, T0 + i, None, "k")
    first, second, third = (f.path for f in service.files)
    service.close()
    with open(second, "r+b") as raw:
        raw.truncate(100)

    again = IndexService(tmp_path / "index", 2, 4, clock_ms=clock)
    again.load()

    assert [f.path for f in again.files] == [first]
    assert again.rebuild_from == 200
    assert Path(f"{second}.corrupt").exists()
    assert Path(f"{third}.superseded").exists()
    problems = again.check()
    assert len(problems) == 1 and "100 bytes" in problems[0]
    for i in range(2, 9):  # the store re-dispatches from rebuild_from
        again.build_index("T", i * 100, T0 + i, None, "k")
    assert again.query("T", "k", 100, *ALL_TIME) == [800, 700, 600, 500, 400, 300, 200, 100, 0]


def test_it_removes_interrupted_creations_and_empty_files_on_load(tmp_path: Path, clock: Clock) -> None:
    index_dir = tmp_path / "index"
    index_dir.mkdir()
    (index_dir / "20240101000000000.tmp").write_bytes(b"torn")
    IndexFile(index_dir / "20240101000000001", 2, 4, create=True).close()
    (index_dir / "README").write_text("not an index file")

    service = IndexService(index_dir, 2, 4, clock_ms=clock)
    service.load()

    assert service.files == []
    assert sorted(p.name for p in index_dir.iterdir()) == ["README"]
    assert service.check() == []


def test_it_agrees_with_a_plain_model_under_random_use(tmp_path: Path) -> None:
    @settings(max_examples=60, deadline=None)
    @given(
        ops=st.lists(
            st.one_of(
                st.tuples(st.just("put"), st.lists(st.sampled_from("abcdeAaBB"), max_size=3)),
                st.tuples(st.just("truncate"), st.integers(0, 40)),
            ),
            max_size=40,
        )
    )
    def run(ops: list[tuple[str, object]]) -> None:
        with tempfile.TemporaryDirectory(dir=tmp_path) as scratch:
            service = IndexService(Path(scratch), 3, 4, clock_ms=Clock())
            service.load()
            model: list[tuple[int, str]] = []  # (phy offset, key)
            phy = 0
            for op, arg in ops:
                if op == "put":
                    assert isinstance(arg, list)
                    service.build_index("T", phy, T0 + phy, None, " ".join(arg))
                    model.extend((phy, key) for key in dict.fromkeys(arg))
                    phy += 1
                else:
                    assert isinstance(arg, int)
                    cut = min(arg, phy)
                    service.truncate(cut)
                    model = [(p, k) for p, k in model if p < cut]
                    phy = cut
            for key in "abcdeAaBB":
                wanted = index_key_hash(f"T#{key}")
                expected = [p for p, k in reversed(model) if index_key_hash(f"T#{k}") == wanted]
                assert service.query("T", key, 100, *ALL_TIME) == expected
            assert service.check() == []
            service.close()

    run()


def test_it_answers_queries_while_the_dispatcher_writes_rolls_and_expires(
    tmp_path: Path, clock: Clock
) -> None:
    service = new_service(tmp_path, clock, slots=8, entries=64)
    errors: list[BaseException] = []
    done = threading.Event()

    def dispatcher() -> None:
        try:
            for i in range(2000):
                service.build_index("T", i, T0 + i, f"U{i}", f"k{i % 5}")
                if i % 250 == 249:
                    service.delete_files_below(i - 100)
            service.flush()
        except BaseException as exc:
            errors.append(exc)
        finally:
            done.set()

    def reader() -> None:
        try:
            while not done.is_set():
                found = service.query("T", "k3", 8, *ALL_TIME)
                assert found == sorted(found, reverse=True)
                assert all(offset % 5 == 3 for offset in found)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=dispatcher)] + [threading.Thread(target=reader) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
    assert service.query("T", "k3", 3, *ALL_TIME) == [1998, 1993, 1988]
    assert service.check() == []


# -- scale -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_it_looks_up_a_key_among_a_million_in_well_under_a_millisecond(tmp_path: Path, clock: Clock) -> None:
    service = IndexService(tmp_path / "index", 500_000, 2_000_001, clock_ms=clock)
    service.load()
    for i in range(1_000_000):
        service.build_index("TopicTest", i * 256, T0 + i, None, f"order-{i}")

    rng = random.Random(1)
    samples = []
    for _ in range(2000):
        i = rng.randrange(1_000_000)
        started = time.perf_counter()
        found = service.query("TopicTest", f"order-{i}", 32, *ALL_TIME)
        samples.append(time.perf_counter() - started)
        assert i * 256 in found
    samples.sort()
    assert samples[int(len(samples) * 0.99)] < 0.001
    assert service.query("TopicTest", "order-missing", 32, *ALL_TIME) == []
