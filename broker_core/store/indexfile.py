"""Message index: a hash index from ``topic#key`` to commit-log offsets, in RocketMQ's format.

The dispatcher (reput) puts two kinds of key for every message it indexes: the unique id
(``topic#UNIQ_KEY``) and each space-separated word of the KEYS property (``topic#key``).
A query by key returns the physical (commit-log) offsets of the matching messages, newest
first.  Only the key's hash is stored, so two keys with the same Java ``hashCode`` are
indistinguishable here: callers read the messages and compare their keys.

File layout (one fixed-size file; all integers big-endian; RocketMQ ``IndexFile``/``IndexHeader``)::

    header, INDEX_HEADER_SIZE = 8 + 8 + 8 + 8 + 4 + 4 = 40 bytes
    +--------+-------+--------------------------------------------------------------+
    | offset | type  | field                                                        |
    +--------+-------+--------------------------------------------------------------+
    |      0 | int64 | beginTimestamp  store time (ms) of the first entry           |
    |      8 | int64 | endTimestamp    store time (ms) of the last entry            |
    |     16 | int64 | beginPhyOffset  commit-log offset of the first entry         |
    |     24 | int64 | endPhyOffset    commit-log offset of the last entry          |
    |     32 | int32 | hashSlotCount   slots in use (informational)                 |
    |     36 | int32 | indexCount      next entry number; starts at 1               |
    +--------+-------+--------------------------------------------------------------+

    slot table, hash_slot_num x HASH_SLOT_SIZE (4) bytes, at 40
      slot s = number of the newest entry whose keyHash % hash_slot_num == s (0 = empty)

    entries, index_num x INDEX_SIZE (4 + 8 + 4 + 4 = 20) bytes, entry i at
    40 + hash_slot_num * 4 + i * 20; entry 0 is never written (0 means "no entry")
    +--------+-------+--------------------------------------------------------------+
    |      0 | int32 | keyHash    abs(Java String.hashCode) of the key              |
    |      4 | int64 | phyOffset  commit-log offset of the message                  |
    |     12 | int32 | timeDiff   whole seconds since beginTimestamp, in [0, 2^31)  |
    |     16 | int32 | prevIndex  older entry of the same slot (0 = end of chain)   |
    +--------+-------+--------------------------------------------------------------+

    file size = 40 + hash_slot_num * 4 + index_num * 20
    (defaults 5,000,000 slots and 20,000,000 entries: 420,000,040 bytes)

A file holds ``index_num - 1`` entries.  Entries are appended in commit-log order, so
``phyOffset`` never decreases along the entry array; ``truncate`` relies on that.

File naming: the creation time as ``yyyyMMddHHmmssSSS`` (17 digits) from the service's
injected clock, in UTC (RocketMQ uses the host's zone; UTC keeps name order equal to
creation order across DST changes), bumped by a millisecond when needed so names strictly
increase.  Files are preallocated with ``posix_fallocate`` under a ``.tmp`` name and renamed
into place, so a full disk fails the creation with ``OSError`` (never a SIGBUS on a later
write through the mapping) and a crash mid-creation leaves only a ``.tmp`` that ``load``
removes.

A full disk is a state, not an error: when no file can be created for lack of space,
``IndexService`` keeps the keys in memory, where queries find them, tells the store (which
goes read-only), and writes them once a file can be created; meanwhile ``waiting_from``
holds the checkpoint back, so a restart indexes them again from the commit log.

Crash policy: not checksummed; the index is derived data, rebuilt from the commit log.
Writes go through a shared mmap, so a process crash loses nothing the kernel accepted; only
a power loss can tear a file.  ``IndexService.load`` sets aside (renames to
``<name>.corrupt``) a file whose size or header is impossible, and moves every newer file
aside too (``<name>.superseded``), so the files left cover a prefix of the commit log;
``IndexService.rebuild_from`` then tells the store from which commit-log offset to
re-dispatch.  Finer damage (a slot or chain pointing at unwritten entries) is survived by
readers, which range-check every pointer and only follow chains to strictly older entries,
and is cleared by the store's recovery, which truncates the index to the recovered
commit-log offset and re-dispatches; ``check()`` reports it.

Thread-safety: ``IndexFile`` is not thread-safe.  ``IndexService`` serializes writes, file
list changes and queries with one lock; ``flush`` syncs outside it.
"""

from __future__ import annotations

import calendar
import errno
import logging
import mmap
import os
import re
import sys
import threading
import time
from array import array
from collections.abc import Callable
from pathlib import Path
from struct import Struct
from typing import Final

from broker_core.clock import wall_clock_ms
from broker_core.errors import ConfigError, CorruptFileError, StoreClosedError
from broker_core.model.hashcode import index_key_hash
from broker_core.speedups import compiled
from broker_core.store.mappedfile import populate

_POPULATE_ENTRIES = 200_000  # entries (4 MB) faulted in ahead of the writer at a time

# (topic, key, commit-log offset, store timestamp ms): one key of one record.
IndexItem = tuple[str, str, int, int]

# C inner loop for put_items, None on machines without a compiler; put_key is the reference
# it must agree with.  (buffer, slots, index_num, count, slot_count, begin_ts, items, start)
# -> (count, slot_count, items done).
_c_put_many: Callable[[mmap.mmap, int, int, int, int, int, list[IndexItem], int], tuple[int, int, int]] | None
_c_put_many = None if compiled is None else compiled.index_put_many  # broker_core.speedups

__all__ = [
    "HASH_SLOT_SIZE",
    "INDEX_HEADER_SIZE",
    "INDEX_SIZE",
    "INVALID_INDEX",
    "IndexFile",
    "IndexService",
    "index_file_size",
]

log = logging.getLogger(__name__)

INDEX_HEADER_SIZE: Final = 40
HASH_SLOT_SIZE: Final = 4
INDEX_SIZE: Final = 20
INVALID_INDEX: Final = 0
# RocketMQ's MessageConst.KEY_SEPARATOR: the KEYS property holds space-separated keys.
KEY_SEPARATOR: Final = " "

_INT32_MAX: Final = 0x7FFFFFFF
_HEADER = Struct(">qqqqii")
_ENTRY = Struct(">iqii")
_SLOT = Struct(">i")
_PHY = Struct(">q")
# Bound once: put_key runs per message and a module-global lookup is cheaper than two
# attribute lookups.
_pack_header = _HEADER.pack_into
_pack_entry = _ENTRY.pack_into
_pack_slot = _SLOT.pack_into
_unpack_entry = _ENTRY.unpack_from
_unpack_slot = _SLOT.unpack_from
_unpack_phy = _PHY.unpack_from

_NAME_RE: Final = re.compile(r"\d{17}")
_ZERO_CHUNK: Final = bytes(1 << 20)
_SCAN_CHUNK: Final = 256
_MAX_PROBLEMS: Final = 50
# A new file that failed with one of these waits for space; other errors are raised.
_NO_SPACE_ERRNOS: Final = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
# While keys wait for space, appends try to create a file at most this often (seconds).
_RETRY_INTERVAL: Final = 1.0


def index_file_size(hash_slot_num: int, index_num: int) -> int:
    """Return the size in bytes of an index file with these dimensions."""
    return INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE + index_num * INDEX_SIZE


def _name_for(ms: int) -> str:
    """Return the file name (UTC ``yyyyMMddHHmmssSSS``) for a creation time in ms."""
    return time.strftime("%Y%m%d%H%M%S", time.gmtime(ms // 1000)) + f"{ms % 1000:03d}"


def _ms_of(name: str) -> int:
    """Return the creation time in ms encoded in a file name (inverse of ``_name_for``)."""
    seconds = calendar.timegm(time.strptime(name[:14], "%Y%m%d%H%M%S"))
    return seconds * 1000 + int(name[14:17])


def record_items(topic: str, phy: int, ts: int, uniq_key: str | None, keys: str | None) -> list[IndexItem]:
    """The index items of one record: its UNIQ_KEY, then each distinct non-empty KEYS word.

    (``_speedups.write_batch`` builds the same items for encoded batches.)
    """
    items = [(topic, uniq_key, phy, ts)] if uniq_key else []
    if keys:
        if KEY_SEPARATOR in keys:
            items.extend((topic, key, phy, ts) for key in dict.fromkeys(keys.split(KEY_SEPARATOR)) if key)
        else:
            items.append((topic, keys, phy, ts))
    return items


class _Problems:
    """Collects check() findings, keeping the list short on a badly damaged file."""

    def __init__(self, prefix: str = "") -> None:
        self.items: list[str] = []
        self.dropped = 0
        self._prefix = prefix

    def add(self, text: str) -> None:
        if len(self.items) < _MAX_PROBLEMS:
            self.items.append(self._prefix + text)
        else:
            self.dropped += 1

    def result(self) -> list[str]:
        if self.dropped:
            return [*self.items, f"{self._prefix}... and {self.dropped} more problems"]
        return list(self.items)


class IndexFile:
    """One index file: open or create it, put keys, look keys up, truncate, check.

    Args:
        path: the file; its name is the creation time (see the module docstring).
        hash_slot_num: slots in the slot table (``maxHashSlotNum``).
        index_num: entries in the file including the unused entry 0 (``maxIndexNum``).
        create: create a new file (it must not exist) rather than open an existing one.

    Raises:
        CorruptFileError: opening a file whose size or header is impossible.
        OSError: the file cannot be created (a full disk fails here) or opened.
    """

    def __init__(self, path: Path | str, hash_slot_num: int, index_num: int, *, create: bool) -> None:
        if hash_slot_num < 1 or index_num < 2:
            raise ConfigError(
                f"index file needs hash_slot_num >= 1 and index_num >= 2, got {hash_slot_num} and {index_num}"
            )
        self._path = Path(path)
        self._slots = hash_slot_num
        self._index_num = index_num
        self._size = index_file_size(hash_slot_num, index_num)
        self._entries_pos = INDEX_HEADER_SIZE + hash_slot_num * HASH_SLOT_SIZE
        fd = self._create() if create else self._open()
        try:
            self._mm = mmap.mmap(fd, self._size)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        self._closed = False
        try:
            self._load_header()
        except BaseException:
            self.close()
            raise
        self._flushed_count = self._count
        self._modified = False
        # Pages are faulted in ahead of the writer (slot table at once, entries in
        # windows) so the dispatcher never takes first-touch faults while holding the GIL.
        populate(self._mm, 0, self._entries_pos)
        self._populated_to = self._entries_pos
        self._populate_entries(self._count)

    def _create(self) -> int:
        if self._path.exists():
            raise FileExistsError(f"index file {self._path} already exists")
        tmp = self._path.with_name(self._path.name + ".tmp")
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.posix_fallocate(fd, 0, self._size)
            os.pwrite(fd, _HEADER.pack(0, 0, 0, 0, 0, 1), 0)
            os.rename(tmp, self._path)
        except BaseException:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise
        return fd

    def _open(self) -> int:
        fd = os.open(self._path, os.O_RDWR)
        actual = os.fstat(fd).st_size
        if actual != self._size:
            os.close(fd)
            raise CorruptFileError(
                f"index file {self._path} is {actual} bytes, expected {self._size} "
                f"({self._slots} slots, {self._index_num} entries)"
            )
        return fd

    def _load_header(self) -> None:
        begin_ts, end_ts, begin_phy, end_phy, slot_count, count = _HEADER.unpack_from(self._mm, 0)
        if count == 0:
            count = 1  # a zeroed header: a file created but never written, as RocketMQ reads it
        problem = self._header_problem(begin_phy, end_phy, slot_count, count)
        if problem:
            raise CorruptFileError(f"index file {self._path}: {problem}")
        self._begin_ts: int = begin_ts
        self._end_ts: int = end_ts
        self._begin_phy: int = begin_phy
        self._end_phy: int = end_phy
        self._slot_count: int = slot_count
        self._count: int = count

    def _header_problem(self, begin_phy: int, end_phy: int, slot_count: int, count: int) -> str:
        if not 1 <= count <= self._index_num:
            return f"indexCount {count} outside [1, {self._index_num}]"
        if slot_count < 0:
            return f"hashSlotCount {slot_count} is negative"
        if count > 1 and not 0 <= begin_phy <= end_phy:
            return f"beginPhyOffset {begin_phy} / endPhyOffset {end_phy} out of order"
        return ""

    # -- header ---------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def name(self) -> str:
        return self._path.name

    @property
    def hash_slot_num(self) -> int:
        return self._slots

    @property
    def index_num(self) -> int:
        return self._index_num

    @property
    def begin_timestamp(self) -> int:
        """Store time (ms) of the first entry; 0 while the file is empty."""
        return self._begin_ts

    @property
    def end_timestamp(self) -> int:
        """Store time (ms) of the last entry; 0 while the file is empty."""
        return self._end_ts

    @property
    def begin_phy_offset(self) -> int:
        """Commit-log offset of the first entry; 0 while the file is empty."""
        return self._begin_phy

    @property
    def end_phy_offset(self) -> int:
        """Commit-log offset of the last entry; 0 while the file is empty."""
        return self._end_phy

    @property
    def hash_slot_count(self) -> int:
        return self._slot_count

    @property
    def index_count(self) -> int:
        """Number of the next entry to write: 1 + the entries held."""
        return self._count

    @property
    def is_full(self) -> bool:
        return self._count >= self._index_num

    @property
    def closed(self) -> bool:
        return self._closed

    # -- write ----------------------------------------------------------------------------

    def put_key(self, key: str, phy_offset: int, store_timestamp_ms: int) -> bool:
        """Append an entry for ``key``; return False (and write nothing) when the file is full.

        ``phy_offset`` must not be below the last entry's (callers put in commit-log
        order).  The first entry sets the begin timestamp and offset; every entry moves the
        end ones.  The stored time is whole seconds since the begin timestamp, clamped to
        ``[0, 2^31 - 1]``.
        """
        count = self._count
        if count >= self._index_num:
            return False
        key_hash = index_key_hash(key)
        slot_pos = INDEX_HEADER_SIZE + (key_hash % self._slots) * HASH_SLOT_SIZE
        mm = self._mm
        prev = _unpack_slot(mm, slot_pos)[0]
        if prev <= 0 or prev >= count:
            # Empty, or a pointer a torn write left behind: start a new chain.
            if prev == 0:
                self._slot_count += 1
            prev = 0
        if count == 1:
            self._begin_ts = store_timestamp_ms
            self._begin_phy = phy_offset
            diff = 0
        else:
            diff = (store_timestamp_ms - self._begin_ts) // 1000
            if diff < 0:
                diff = 0
            elif diff > _INT32_MAX:
                diff = _INT32_MAX
        # Entry before slot before header: a reader that sees the new count also sees both.
        _pack_entry(mm, self._entries_pos + count * INDEX_SIZE, key_hash, phy_offset, diff, prev)
        _pack_slot(mm, slot_pos, count)
        count += 1
        self._count = count
        self._end_ts = store_timestamp_ms
        self._end_phy = phy_offset
        _pack_header(
            mm,
            0,
            self._begin_ts,
            store_timestamp_ms,
            self._begin_phy,
            phy_offset,
            self._slot_count,
            count,
        )
        return True

    def has_room(self, items: int) -> bool:
        """Whether ``items`` more keys fit this file with no pages to fault in first."""
        count = self._count + items
        if count > self._index_num:
            return False
        end = self._entries_pos + (count + _POPULATE_ENTRIES) * INDEX_SIZE
        return end <= self._populated_to or self._populated_to >= self._size

    def _populate_entries(self, count: int) -> None:
        end = self._entries_pos + (count + _POPULATE_ENTRIES) * INDEX_SIZE
        if end > self._populated_to:
            end = min(max(end, self._populated_to + _POPULATE_ENTRIES * INDEX_SIZE), self._size)
            populate(self._mm, self._populated_to, end - self._populated_to)
            self._populated_to = end

    def put_items(self, items: list[IndexItem], start: int = 0) -> int:
        """Put ``items[start:]`` (``topic#key`` each) until the file is full.

        Returns the position of the first item not put (``len(items)`` when all fit).
        Same result as ``put_key`` per item; the header is written once at the end.
        """
        if start >= len(items) or self._count >= self._index_num:
            return start
        if self._count == 1:
            self._begin_ts = items[start][3]
            self._begin_phy = items[start][2]
        self._populate_entries(self._count + len(items) - start)
        if _c_put_many is None:
            done = start
            for topic, key, phy, ts in items[start:]:
                if not self.put_key(f"{topic}#{key}", phy, ts):
                    break
                done += 1
            return done
        count, slot_count, done = _c_put_many(
            self._mm,
            self._slots,
            self._index_num,
            self._count,
            self._slot_count,
            self._begin_ts,
            items,
            start,
        )
        if done > start:
            last = items[done - 1]
            self._count = count
            self._slot_count = slot_count
            self._end_ts = last[3]
            self._end_phy = last[2]
            _pack_header(
                self._mm, 0, self._begin_ts, self._end_ts, self._begin_phy, self._end_phy, slot_count, count
            )
        return done

    def truncate(self, phy_offset: int) -> None:
        """Drop every entry whose phyOffset is ``>= phy_offset``.

        Afterwards a healthy file is byte-for-byte what it would be had those entries never
        been put: the dropped entries are zeroed, every slot pointing at or past the first
        dropped entry (including pointers a torn write left beyond ``indexCount``) is walked
        back to its newest surviving entry, and the header is rewritten (the end timestamp
        becomes the last surviving entry's, at whole-second precision).
        """
        count = self._count
        keep = self._first_entry_at_or_above(phy_offset)
        if keep >= count:
            return
        self._repair_slots(keep)
        start = self._entries_pos + keep * INDEX_SIZE
        stop = self._entries_pos + count * INDEX_SIZE
        for pos in range(start, stop, len(_ZERO_CHUNK)):
            n = min(len(_ZERO_CHUNK), stop - pos)
            self._mm[pos : pos + n] = _ZERO_CHUNK[:n]
        self._count = keep
        if keep == 1:
            self._begin_ts = self._end_ts = self._begin_phy = self._end_phy = 0
        else:
            _, phy, diff, _ = _unpack_entry(self._mm, self._entries_pos + (keep - 1) * INDEX_SIZE)
            self._end_phy = phy
            self._end_ts = self._begin_ts + diff * 1000
        self._slot_count = self._slots - self._read_slots().count(0)
        _pack_header(
            self._mm,
            0,
            self._begin_ts,
            self._end_ts,
            self._begin_phy,
            self._end_phy,
            self._slot_count,
            keep,
        )
        self._modified = True

    def _first_entry_at_or_above(self, phy_offset: int) -> int:
        """Binary-search the entry array for the first entry with phyOffset >= ``phy_offset``."""
        lo, hi = 1, self._count
        mm, base = self._mm, self._entries_pos + 4
        while lo < hi:
            mid = (lo + hi) // 2
            if _unpack_phy(mm, base + mid * INDEX_SIZE)[0] < phy_offset:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _repair_slots(self, keep: int) -> None:
        """Point every slot that holds an entry number ``>= keep`` at its newest older entry."""
        slots = self._read_slots()
        mm, entries, limit = self._mm, self._entries_pos, self._index_num
        for chunk_start in range(0, len(slots), _SCAN_CHUNK):
            chunk = slots[chunk_start : chunk_start + _SCAN_CHUNK]
            # max() runs in C; only the chunks holding a dropped entry are walked in Python.
            if max(chunk) < keep:
                continue
            for offset, value in enumerate(chunk):
                if value < keep:
                    continue
                while value >= keep:
                    if value >= limit:  # garbage beyond the file: nothing to walk back to
                        value = 0
                        break
                    prev = _unpack_entry(mm, entries + value * INDEX_SIZE)[3]
                    value = prev if 0 <= prev < value else 0
                _pack_slot(mm, INDEX_HEADER_SIZE + (chunk_start + offset) * HASH_SLOT_SIZE, value)

    def _read_slots(self) -> array[int]:
        """Return the slot table as native ints (one copy, byte-swapped in C)."""
        slots = array("i")
        slots.frombytes(self._mm[INDEX_HEADER_SIZE : self._entries_pos])
        if sys.byteorder == "little":
            slots.byteswap()
        return slots

    # -- read -----------------------------------------------------------------------------

    def select_phy_offsets(self, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Return up to ``max_num`` offsets of entries for ``key`` stored in [begin_ms, end_ms].

        Newest first.  Entries keep whole seconds, so an entry matches when its second
        overlaps the range: a message stored up to 999 ms before ``begin_ms`` may be
        returned, none inside the range is missed.  Keys with the same hash all match.
        """
        found: list[int] = []
        self._select(index_key_hash(key), max_num, begin_ms, end_ms, found)
        return found

    def _select(self, key_hash: int, max_num: int, begin_ms: int, end_ms: int, found: list[int]) -> None:
        """Append matches to ``found`` until it holds ``max_num`` offsets."""
        count = self._count
        if count <= 1 or len(found) >= max_num:
            return
        mm = self._mm
        index = _unpack_slot(mm, INDEX_HEADER_SIZE + (key_hash % self._slots) * HASH_SLOT_SIZE)[0]
        if index <= 0 or index >= count:
            return
        entries, begin_ts = self._entries_pos, self._begin_ts
        # Each step goes to a strictly smaller entry number, so even a corrupt chain ends.
        while True:
            hash_read, phy, diff, prev = _unpack_entry(mm, entries + index * INDEX_SIZE)
            if diff < 0:
                return
            second = begin_ts + diff * 1000
            if hash_read == key_hash and second <= end_ms and second + 999 >= begin_ms:
                found.append(phy)
                if len(found) >= max_num:
                    return
            # Store times do not decrease along the entries, so older links are older still.
            if prev <= 0 or prev >= index or second + 999 < begin_ms:
                return
            index = prev

    def overlaps(self, begin_ms: int, end_ms: int) -> bool:
        """Whether the file may hold entries stored in [begin_ms, end_ms]."""
        if self._count <= 1:
            return False
        # +999: after a truncate the end timestamp is only known to the second.
        return begin_ms <= self._end_ts + 999 and end_ms >= self._begin_ts

    def hashes_at(self, phy_offset: int) -> tuple[set[int], bool]:
        """Return the key hashes of the trailing entries at ``phy_offset``, and whether they
        reach back to entry 1 (the same record may continue in the previous file)."""
        hashes: set[int] = set()
        mm, entries = self._mm, self._entries_pos
        index = self._count - 1
        while index >= 1:
            key_hash, phy, _, _ = _unpack_entry(mm, entries + index * INDEX_SIZE)
            if phy != phy_offset:
                return hashes, False
            hashes.add(key_hash)
            index -= 1
        return hashes, True

    # -- lifecycle ------------------------------------------------------------------------

    def flush(self) -> None:
        """Write the file's dirty pages to disk (``fdatasync``); a no-op when nothing changed."""
        count = self._count
        if self._closed or (count == self._flushed_count and not self._modified):
            return
        self._modified = False
        try:
            os.fdatasync(self._fd)
        except OSError:
            if self._closed:  # destroyed by another thread while we synced
                return
            self._modified = True
            raise
        self._flushed_count = count

    def close(self) -> None:
        """Unmap and close the file without syncing it; idempotent."""
        if self._closed:
            return
        self._closed = True
        self._mm.close()
        os.close(self._fd)
        self._fd = -1

    def destroy(self) -> None:
        """Close the file and delete it."""
        self.close()
        self._path.unlink(missing_ok=True)

    def check(self) -> list[str]:
        """Verify the file's invariants; return the problems found (empty when healthy).

        Checks the header, that every slot and prevIndex points at a written, older entry
        of the same slot, that keyHash and timeDiff are non-negative and that phyOffset
        never decreases.  Reads the whole file: meant for tests and post-mortems.
        """
        if self._closed:
            raise StoreClosedError(f"index file {self._path} is closed")
        problems = _Problems(f"{self.name}: ")
        begin_ts, end_ts, begin_phy, end_phy, slot_count, count = _HEADER.unpack_from(self._mm, 0)
        count = count or 1
        header_problem = self._header_problem(begin_phy, end_phy, slot_count, count)
        if header_problem:
            problems.add(f"header: {header_problem}")
            return problems.result()
        self._check_slots(count, problems)
        self._check_entries(count, begin_phy, end_phy, problems)
        return problems.result()

    def _check_slots(self, count: int, problems: _Problems) -> None:
        slots = self._read_slots()
        if not slots:
            return
        if min(slots) < 0 or max(slots) >= count:
            for slot, value in enumerate(slots):
                if value < 0 or value >= count:
                    problems.add(f"slot {slot} points at entry {value}, outside [0, {count})")
        mm, entries, n = self._mm, self._entries_pos, self._slots
        for slot, value in enumerate(slots):
            if 0 < value < count:
                key_hash = _unpack_entry(mm, entries + value * INDEX_SIZE)[0]
                if key_hash % n != slot:
                    problems.add(f"slot {slot} points at entry {value} of slot {key_hash % n}")

    def _check_entries(self, count: int, begin_phy: int, end_phy: int, problems: _Problems) -> None:
        raw = self._mm[self._entries_pos + INDEX_SIZE : self._entries_pos + count * INDEX_SIZE]
        n = self._slots
        slot_of = [0]
        last_phy = begin_phy
        for index, (key_hash, phy, diff, prev) in enumerate(_ENTRY.iter_unpack(raw), start=1):
            slot_of.append(key_hash % n)
            if key_hash < 0:
                problems.add(f"entry {index}: negative keyHash {key_hash}")
            if diff < 0:
                problems.add(f"entry {index}: negative timeDiff {diff}")
            if phy < last_phy:
                problems.add(f"entry {index}: phyOffset {phy} below the previous {last_phy}")
            last_phy = max(last_phy, phy)
            if not 0 <= prev < index:
                problems.add(f"entry {index}: prevIndex {prev} is not an older entry")
            elif prev and slot_of[prev] != slot_of[index]:
                problems.add(f"entry {index}: prevIndex {prev} belongs to another slot")
        if count > 1 and last_phy != end_phy:
            problems.add(f"header: endPhyOffset {end_phy} but the last entry is at {last_phy}")


class IndexService:
    """The index directory: a list of ``IndexFile`` in creation order, the newest written.

    Args:
        index_dir: the store's ``index`` directory (created by ``load`` if missing).
        hash_slot_num, index_num: dimensions of every file (``maxHashSlotNum``,
            ``maxIndexNum``); files of another size are set aside on ``load``.
        clock_ms: wall clock in ms, used to name new files.
        on_no_space: called with the error each time a file could not be created for lack
            of space (the keys then wait in memory: see the module docstring).

    Every file in the list holds at least one entry, and their phy-offset ranges follow
    one another, then the waiting keys.  One dispatcher thread calls
    ``build_index``/``truncate``; queries, expiry, flushes and ``retry_waiting`` may come
    from any thread.
    """

    def __init__(
        self,
        index_dir: Path,
        hash_slot_num: int,
        index_num: int,
        *,
        clock_ms: Callable[[], int] = wall_clock_ms,
        on_no_space: Callable[[OSError], None] | None = None,
    ) -> None:
        if hash_slot_num < 1 or index_num < 2:
            raise ConfigError(
                f"index needs hash_slot_num >= 1 and index_num >= 2, got {hash_slot_num} and {index_num}"
            )
        self._dir = Path(index_dir)
        self._slots = hash_slot_num
        self._index_num = index_num
        self._clock_ms = clock_ms
        self._files: list[IndexFile] = []
        self._lock = threading.Lock()
        self._load_problems: list[str] = []
        self._rebuild_from: int | None = None
        self._on_no_space = on_no_space
        # Keys of the newest records, in commit-log order, that found no file (disk full).
        self._waiting: list[IndexItem] = []
        self._retry_at = 0.0  # monotonic time before which appends do not try a new file
        self._waiting_logged = False

    def has_room(self, items: int) -> bool:
        """Whether ``items`` more keys fit the newest file as it is (no file to create, no
        pages to fault in, none waiting for space)."""
        files = self._files
        return bool(files) and not self._waiting and files[-1].has_room(items)

    @property
    def files(self) -> list[IndexFile]:
        """A snapshot of the open files, oldest first."""
        return list(self._files)

    @property
    def max_phy_offset(self) -> int:
        """Commit-log offset of the newest indexed record (0 when there is none)."""
        with self._lock:
            files = self._files
            return files[-1].end_phy_offset if files else 0

    @property
    def waiting_from(self) -> int | None:
        """Commit-log offset of the oldest record with keys waiting for space, else None.

        The index is durable only below it: the store's checkpoint stops there.
        """
        with self._lock:
            return self._waiting[0][2] if self._waiting else None

    @property
    def waiting_count(self) -> int:
        """How many keys wait in memory for an index file."""
        return len(self._waiting)

    @property
    def rebuild_from(self) -> int | None:
        """Commit-log offset to re-dispatch from after ``load`` set files aside, else None.

        Re-dispatching earlier records is harmless: ``build_index`` skips what it has.
        """
        return self._rebuild_from

    def load(self) -> None:
        """Open the existing files in name order.

        Removes ``.tmp`` leftovers of interrupted creations and empty files.  The first file
        with an impossible size or header is renamed to ``<name>.corrupt`` and every newer
        file to ``<name>.superseded`` (the index must stay a prefix of the commit log, and
        only the newest file is written); the problem is logged, reported by ``check`` and
        ``rebuild_from`` is set to where the kept files end.
        """
        with self._lock:
            if self._files:
                raise RuntimeError("index service already loaded")
            self._dir.mkdir(parents=True, exist_ok=True)
            for leftover in self._dir.glob("*.tmp"):
                leftover.unlink(missing_ok=True)
            paths = sorted(p for p in self._dir.iterdir() if _NAME_RE.fullmatch(p.name) and p.is_file())
            for position, path in enumerate(paths):
                try:
                    index_file = IndexFile(path, self._slots, self._index_num, create=False)
                except (CorruptFileError, OSError) as exc:
                    self._set_aside(paths[position:], str(exc))
                    return
                if index_file.index_count <= 1:
                    index_file.destroy()
                    continue
                if self._files and index_file.begin_phy_offset < self._files[-1].end_phy_offset:
                    index_file.close()
                    self._set_aside(
                        paths[position:],
                        f"index file {path} begins at {index_file.begin_phy_offset}, before the "
                        f"previous file ends ({self._files[-1].end_phy_offset})",
                    )
                    return
                self._files.append(index_file)

    def _set_aside(self, paths: list[Path], reason: str) -> None:
        self._load_problems.append(reason)
        log.error("%s; setting aside %d index file(s) for rebuild", reason, len(paths))
        for position, path in enumerate(paths):
            suffix = ".corrupt" if position == 0 else ".superseded"
            target = path.with_name(path.name + suffix)
            attempt = 1
            while target.exists():
                target = path.with_name(f"{path.name}{suffix}.{attempt}")
                attempt += 1
            path.rename(target)
        self._rebuild_from = self._files[-1].end_phy_offset if self._files else 0

    def build_index(
        self,
        topic: str,
        phy_offset: int,
        store_timestamp_ms: int,
        uniq_key: str | None,
        keys: str | None,
    ) -> None:
        """Index one commit-log record under ``topic#uniq_key`` and ``topic#<each key>``.

        Records must come in commit-log order.  A record below the newest indexed one is
        skipped, and one at the same offset only gets the keys it is missing, so
        re-dispatching after a recovery never duplicates entries.

        Raises:
            OSError: a new file was needed and could not be created, for another reason
                than a lack of space (then the keys wait: see ``waiting_from``).
        """
        self.add_items(record_items(topic, phy_offset, store_timestamp_ms, uniq_key, keys))

    def build_index_many(self, records: list[tuple[str, int, int, str | None, str | None]]) -> None:
        """``build_index`` for many records at once: (topic, phy, ts, uniq_key, keys) each."""
        items: list[IndexItem] = []
        for topic, phy, ts, uniq_key, keys in records:
            items.extend(record_items(topic, phy, ts, uniq_key, keys))
        self.add_items(items)

    def add_items(self, items: list[IndexItem]) -> None:
        """Put index items (see ``record_items``) in commit-log order, rolling files as needed.

        Items of records at or below the newest indexed offset go through ``build_index``'s
        rules (skipped, or completed at the same offset), so re-dispatch stays idempotent.
        """
        with self._lock:
            waiting, files = self._waiting, self._files
            end = waiting[-1][2] if waiting else files[-1]._end_phy if files else -1
            if items and items[0][2] <= end:
                # Already indexed (a retried or re-dispatched batch): skip, or complete at
                # `end`.  An entry answers for every key with its hash, so hashes suffice.
                known = self._hashes_at(end)
                fresh: list[IndexItem] = []
                for item in items:
                    if item[2] == end:
                        key_hash = index_key_hash(f"{item[0]}#{item[1]}")
                        if key_hash in known:
                            continue
                        known.add(key_hash)
                    if item[2] >= end:
                        fresh.append(item)
                items = fresh
            self._put_locked(items)

    def _put_locked(self, items: list[IndexItem]) -> None:
        """Write ``items`` (all after the newest indexed record); keep them waiting when no
        file can be created for lack of space."""
        if self._waiting:
            self._waiting.extend(items)
            if time.monotonic() >= self._retry_at:
                self._write_waiting_locked()
            return
        done = 0
        current = self._files[-1] if self._files else None
        while done < len(items):
            if current is not None:
                done = current.put_items(items, done)
            if done < len(items):
                try:
                    current = self._roll()
                except OSError as exc:
                    if exc.errno not in _NO_SPACE_ERRNOS:
                        raise
                    self._waiting = items[done:]
                    self._retry_at = time.monotonic() + _RETRY_INTERVAL
                    if not self._waiting_logged:
                        self._waiting_logged = True
                        log.warning(
                            "no space for a new index file (%s): the keys of new messages wait "
                            "in memory, where queries find them, until space returns",
                            exc.strerror or exc,
                        )
                    if self._on_no_space is not None:
                        self._on_no_space(exc)
                    return

    def _write_waiting_locked(self) -> bool:
        waiting, self._waiting = self._waiting, []
        self._put_locked(waiting)
        if self._waiting:
            return False
        self._waiting_logged = False
        log.info("space is back: wrote the %d index key(s) that waited for it", len(waiting))
        return True

    def retry_waiting(self) -> bool:
        """Try now to write the keys waiting for space; True when none wait any more."""
        with self._lock:
            return not self._waiting or self._write_waiting_locked()

    def _hashes_at(self, phy_offset: int) -> set[int]:
        """Key hashes already indexed for the record at ``phy_offset`` (the newest one)."""
        hashes: set[int] = set()
        waiting = self._waiting
        position = len(waiting) - 1
        while position >= 0 and waiting[position][2] == phy_offset:
            topic, key, _phy, _ts = waiting[position]
            hashes.add(index_key_hash(f"{topic}#{key}"))
            position -= 1
        if position >= 0:  # the record begins among the waiting keys
            return hashes
        for index_file in reversed(self._files):
            found, reaches_start = index_file.hashes_at(phy_offset)
            hashes |= found
            if not reaches_start:
                break
        return hashes

    def _roll(self) -> IndexFile:
        """Create the next file, named after the clock but always after the newest name."""
        ms = self._clock_ms()
        if self._files:
            ms = max(ms, _ms_of(self._files[-1].name) + 1)
        while (self._dir / _name_for(ms)).exists() or (self._dir / (_name_for(ms) + ".tmp")).exists():
            ms += 1
        index_file = IndexFile(self._dir / _name_for(ms), self._slots, self._index_num, create=True)
        self._files.append(index_file)
        return index_file

    def query(self, topic: str, key: str, max_num: int, begin_ms: int, end_ms: int) -> list[int]:
        """Return up to ``max_num`` commit-log offsets of messages with ``key``, newest first.

        Only messages stored in [begin_ms, end_ms] (to the second: see
        ``IndexFile.select_phy_offsets``) are returned.  Keys with the same hash as ``key``
        match too; the caller compares the messages' keys.  Keys waiting for space are
        searched first (they are the newest).
        """
        found: list[int] = []
        if max_num <= 0:
            return found
        key_hash = index_key_hash(f"{topic}#{key}")
        with self._lock:
            for item_topic, item_key, phy, ts in reversed(self._waiting):
                if item_key == key and item_topic == topic and begin_ms <= ts <= end_ms:
                    found.append(phy)
                    if len(found) >= max_num:
                        return found
            for index_file in reversed(self._files):
                if index_file.overlaps(begin_ms, end_ms):
                    index_file._select(key_hash, max_num, begin_ms, end_ms, found)
                    if len(found) >= max_num:
                        break
        return found

    def truncate(self, phy_offset: int) -> None:
        """Forget every record at or above ``phy_offset`` (commit-log recovery cut the log there).

        Files that begin at or above it are destroyed; the one straddling it is truncated.
        """
        with self._lock:
            self._waiting = [item for item in self._waiting if item[2] < phy_offset]
            files = self._files
            while files:
                newest = files[-1]
                if newest.begin_phy_offset >= phy_offset:
                    newest.destroy()
                    files.pop()
                    continue
                if newest.end_phy_offset >= phy_offset:
                    newest.truncate(phy_offset)
                    if newest.index_count <= 1:
                        continue
                break

    def delete_files_below(self, phy_offset: int) -> int:
        """Destroy the files wholly below ``phy_offset`` (expired commit log), never the newest.

        Returns the number of files destroyed.
        """
        with self._lock:
            files = self._files
            doomed = [f for f in files[:-1] if f.end_phy_offset < phy_offset]
            for index_file in doomed:
                index_file.destroy()
            self._files = [f for f in files if not f.closed]
            return len(doomed)

    def flush(self) -> None:
        """Sync every file that changed since its last flush.

        Syncs outside the lock so a slow disk does not stall the dispatcher.
        """
        with self._lock:
            files = list(self._files)
        for index_file in files:
            index_file.flush()

    def close(self) -> None:
        """Flush and close every file; the service can be loaded again afterwards.

        Keys still waiting for space are dropped: the checkpoint stopped before them, so
        the next start indexes them again from the commit log.
        """
        with self._lock:
            if self._waiting:
                log.info(
                    "%d index key(s) still wait for space; the next start indexes them again",
                    len(self._waiting),
                )
                self._waiting = []
            for index_file in self._files:
                index_file.flush()
                index_file.close()
            self._files = []

    def check(self) -> list[str]:
        """Return every problem found: from ``load``, in each file, and between files."""
        with self._lock:
            problems = list(self._load_problems)
            previous: IndexFile | None = None
            for index_file in self._files:
                problems.extend(index_file.check())
                if previous is not None:
                    if index_file.name <= previous.name:
                        problems.append(f"{index_file.name}: named before {previous.name}")
                    if index_file.begin_phy_offset < previous.end_phy_offset:
                        problems.append(
                            f"{index_file.name}: begins at {index_file.begin_phy_offset}, before "
                            f"{previous.name} ends ({previous.end_phy_offset})"
                        )
                if index_file.index_count <= 1:
                    problems.append(f"{index_file.name}: empty file in the list")
                previous = index_file
            return problems
