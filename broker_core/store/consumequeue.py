"""Consume queues: per topic and queue id, the positions of its messages in the commit log.

One queue is a run of files under ``<root>/consumequeue/<topic>/<queueId>/``, each holding
``mapped_file_size_consume_queue / 20`` (300,000 by default) fixed 20-byte entries and
named by its start offset in bytes::

    off size field
      0    8 commit-log offset of the record
      8    4 record size
     12    8 tag hash code (for SCHEDULE_TOPIC_XXXX: the delivery time, ms)

Queue offset N is entry N, at byte N*20 of the queue.  A "blank" entry (0, 0x7FFFFFFF, 0)
fills the slots before the first real entry of a queue that starts past offset 0 (its
older files were expired or never existed) and is skipped by readers.

Crash policy: entries are not checksummed; the queues are derived data, rebuilt from the
commit log by re-dispatch, so recovery only trims entries that point past the checkpoint
or the commit log's end and lets the dispatcher write them again.

Thread-safety: one writer (the dispatcher) per queue; readers take ``max_offset`` first
and read only below it.
"""

from __future__ import annotations

import bisect
import logging
import shutil
import struct
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from broker_core.store.mappedfile import MappedFile
from broker_core.store.mappedfilequeue import MappedFileQueue

log = logging.getLogger(__name__)

CQ_STORE_UNIT_SIZE = 20
BLANK_ENTRY_SIZE = 0x7FFFFFFF
_ENTRY = struct.Struct(">qiq")
_BLANK_ENTRY = _ENTRY.pack(0, BLANK_ENTRY_SIZE, 0)
_MAX_PACK = 256
MAX_GAP_FILL = 1_000_000  # more missing entries than this is corruption, not a lost offset
_PACKERS: dict[int, struct.Struct] = {}

Entry = tuple[int, int, int]  # (commit-log offset, size, tag hash code)


class ConsumeQueue:
    """The 20-byte position entries of one topic/queue."""

    def __init__(self, topic: str, queue_id: int, directory: Path, file_size: int) -> None:
        self.topic = topic
        self.queue_id = queue_id
        self.file_size = file_size
        self.queue = MappedFileQueue(directory, file_size, warm_new_files=True)
        # End (offset + size) of the newest record entered; -1 when empty.
        self.max_physic_offset = -1
        # First queue offset whose record may still exist.
        self.min_offset = 0
        self._write_lock = threading.Lock()

    # -- sizes -----------------------------------------------------------------------

    @property
    def max_offset(self) -> int:
        """Queue offset the next entry will take (the number of slots used)."""
        return self.queue.max_offset // CQ_STORE_UNIT_SIZE

    @property
    def entries_per_file(self) -> int:
        return self.file_size // CQ_STORE_UNIT_SIZE

    # -- writes ----------------------------------------------------------------------

    def has_room(self, count: int) -> bool:
        """Whether ``count`` more entries fit the current file (none needs creating)."""
        last = self.queue.last
        return last is not None and last.wrote_position + count * CQ_STORE_UNIT_SIZE <= last.file_size

    def put(self, phys: int, size: int, tags_code: int, queue_offset: int) -> bool:
        """Enter the record at ``phys`` as entry ``queue_offset``.

        Idempotent: an entry already present is left alone (re-dispatch after recovery).
        Returns False when the entry could not be written because it would leave a gap
        before it (logged); the queue stays as it was.  Raises OSError when a new file
        cannot be created (a full disk): the dispatcher retries later.
        """
        with self._write_lock:
            if phys + size <= self.max_physic_offset:
                return True
            expected = queue_offset * CQ_STORE_UNIT_SIZE
            current = self.queue.max_offset
            if self.queue.last is None:
                current = expected - expected % self.file_size
            if expected < current:
                return True
            mf = self.queue.last_for_write(expected)
            if expected > current:
                if (
                    current != mf.file_from_offset + mf.wrote_position
                    or mf.wrote_position
                    or self.queue.first is not mf
                ):
                    # A queue offset went missing: fill it with blank entries (readers skip
                    # them) rather than leave every later message unreachable.
                    missing = (expected - current) // CQ_STORE_UNIT_SIZE
                    if missing > MAX_GAP_FILL:
                        log.error(
                            "consume queue %s-%d: entry %d would leave a gap of %d after %d; not written",
                            self.topic,
                            self.queue_id,
                            queue_offset,
                            missing,
                            current // CQ_STORE_UNIT_SIZE,
                        )
                        return False
                    log.warning(
                        "consume queue %s-%d: %d missing entries before %d filled with blanks",
                        self.topic,
                        self.queue_id,
                        missing,
                        queue_offset,
                    )
                    for _ in range(missing):
                        mf = self.queue.last_for_write()
                        mf.mm[mf.wrote_position : mf.wrote_position + CQ_STORE_UNIT_SIZE] = _BLANK_ENTRY
                        mf.wrote_position += CQ_STORE_UNIT_SIZE
                    mf = self.queue.last_for_write()
                else:
                    # First entry of a queue that starts past its first file's start.  (Only
                    # then: after a gap fill this would blank the file's earlier entries.)
                    for pos in range(0, expected - mf.file_from_offset, CQ_STORE_UNIT_SIZE):
                        mf.mm[pos : pos + CQ_STORE_UNIT_SIZE] = _BLANK_ENTRY
                    mf.wrote_position = expected - mf.file_from_offset
                    self.min_offset = queue_offset
            pos = mf.wrote_position
            _ENTRY.pack_into(mf.mm, pos, phys, size, tags_code)
            mf.wrote_position = pos + CQ_STORE_UNIT_SIZE
            self.max_physic_offset = phys + size
            return True

    def put_many(self, entries: list[Entry], first_offset: int) -> None:
        """Enter consecutive records starting at queue offset ``first_offset``.

        The common case (appending right at the end, within the current file) costs one
        ``pack_into`` per 256 entries; anything else goes entry by entry through ``put``.
        """
        done = 0
        count = len(entries)
        while done < count:
            chunk = entries[done : done + _MAX_PACK]
            if not self._pack_at_end(chunk, first_offset + done):
                put = self.put
                for index, (phys, size, tags_code) in enumerate(chunk, start=first_offset + done):
                    if not put(phys, size, tags_code, index):
                        return
            done += len(chunk)

    def put_packed(self, raw: bytes, first_offset: int) -> None:
        """Enter already-packed 20-byte entries starting at queue offset ``first_offset``.

        Appending right at the end of the current file is one slice copy; otherwise the
        entries go through ``put_many`` (new file, gaps, re-dispatch).
        """
        mf = self.queue.last
        size = len(raw)
        if (
            mf is not None
            and mf.file_from_offset + mf.wrote_position == first_offset * CQ_STORE_UNIT_SIZE
            and mf.wrote_position + size <= mf.file_size
            and _ENTRY.unpack_from(raw, 0)[0] >= self.max_physic_offset
        ):
            pos = mf.wrote_position
            mf.mm[pos : pos + size] = raw
            mf.wrote_position = pos + size
            phys, length, _tag = _ENTRY.unpack_from(raw, size - CQ_STORE_UNIT_SIZE)
            self.max_physic_offset = phys + length
            return
        self.put_many(list(_ENTRY.iter_unpack(raw)), first_offset)

    def _pack_at_end(self, chunk: list[Entry], first_offset: int) -> bool:
        mf = self.queue.last
        count = len(chunk)
        if (
            mf is None
            or mf.file_from_offset + mf.wrote_position != first_offset * CQ_STORE_UNIT_SIZE
            or mf.wrote_position + count * CQ_STORE_UNIT_SIZE > mf.file_size
            or chunk[0][0] < self.max_physic_offset
        ):
            return False
        packer = _PACKERS.get(count)
        if packer is None:
            packer = _PACKERS[count] = struct.Struct(">" + "qiq" * count)
        pos = mf.wrote_position
        packer.pack_into(mf.mm, pos, *[field for entry in chunk for field in entry])
        mf.wrote_position = pos + count * CQ_STORE_UNIT_SIZE
        last = chunk[-1]
        self.max_physic_offset = last[0] + last[1]
        return True

    def flush(self) -> None:
        self.queue.flush()

    # -- reads -----------------------------------------------------------------------

    def entries(self, start: int, max_count: int) -> list[Entry]:
        """Up to ``max_count`` entries from queue offset ``start``, within one file.

        Stops at the end of ``start``'s file (the caller continues from there), so one
        call costs one slice copy.  Blank entries are included; callers skip them.
        """
        end = min(self.max_offset, start + max_count)
        if start >= end or start < 0:
            return []
        mf = self.queue.find(start * CQ_STORE_UNIT_SIZE)
        if mf is None:
            return []
        rel = start * CQ_STORE_UNIT_SIZE - mf.file_from_offset
        stop = min(end * CQ_STORE_UNIT_SIZE - mf.file_from_offset, mf.wrote_position)
        try:
            raw = mf.mm[rel:stop]
        except ValueError:  # file deleted by expiry in between
            return []
        return list(_ENTRY.iter_unpack(raw))

    def get(self, queue_offset: int) -> Entry | None:
        """Entry ``queue_offset``, or None when outside the queue or blank."""
        found = self.entries(queue_offset, 1)
        if not found or found[0][1] == BLANK_ENTRY_SIZE:
            return None
        return found[0]

    def offset_by_time(self, timestamp_ms: int, store_time_of: Callable[[int], int]) -> int:
        """Smallest queue offset whose message was stored at or after ``timestamp_ms``.

        Returns ``max_offset`` when every message is older and ``min_offset`` when every
        one is newer.  ``store_time_of(phys)`` reads a record's STORETIMESTAMP (-1 when it
        is gone).  Binary search: store times only grow along a queue.
        """
        lo, hi = self.min_offset, self.max_offset

        def stored_before(offset: int) -> bool:
            entry = self.get(offset)
            if entry is None:
                return True
            ts = store_time_of(entry[0])
            return ts < timestamp_ms

        keys = _OffsetRange(lo, hi, stored_before)
        return lo + bisect.bisect_left(keys, True)

    # -- recovery and expiry ---------------------------------------------------------

    def load(self) -> list[str]:
        return self.queue.load()

    def recover(self) -> None:
        """Find the last valid entry after a (clean or unclean) stop and set positions.

        Entries are valid from the start while their size is positive; the first zero
        entry ends the queue (anything after it is dropped).
        """
        files = self.queue.files
        if not files:
            return
        end = files[0].file_from_offset
        max_phys = -1
        per_file = self.entries_per_file
        for mf in files:
            tail = _ENTRY.unpack_from(mf.mm, self.file_size - CQ_STORE_UNIT_SIZE)
            if tail[1] > 0 and tail[0] >= 0:
                # A full file: entries are written in order, so all of them are there.
                count, last = per_file, tail
            else:
                count, last = 0, None
                for entry in _ENTRY.iter_unpack(mf.mm):
                    if entry[1] <= 0 or entry[0] < 0:
                        break
                    count += 1
                    last = entry
            if last is not None and last[1] != BLANK_ENTRY_SIZE:
                max_phys = last[0] + last[1]
            end = mf.file_from_offset + count * CQ_STORE_UNIT_SIZE
            if count < per_file:
                break
        self.queue.truncate(end)
        for mf in self.queue.files:
            mf.flushed_position = mf.wrote_position
        self.max_physic_offset = max_phys
        self.min_offset = self._first_real_offset()

    def _first_real_offset(self) -> int:
        first = self.queue.first
        if first is None:
            return 0
        start = first.file_from_offset // CQ_STORE_UNIT_SIZE
        for index, entry in enumerate(_ENTRY.iter_unpack(first.mm[: first.wrote_position])):
            if entry[1] != BLANK_ENTRY_SIZE:
                return start + index
        return start + first.wrote_position // CQ_STORE_UNIT_SIZE

    def _real_entry_from(self, offset: int, hi: int) -> Entry | None:
        """The first entry at or after ``offset`` (below ``hi``) that is not a blank."""
        while offset < hi:
            chunk = self.entries(offset, min(256, hi - offset))
            if not chunk:
                return None
            for entry in chunk:
                if entry[1] != BLANK_ENTRY_SIZE:
                    return entry
            offset += len(chunk)
        return None

    def truncate_dirty(self, phys_offset: int) -> None:
        """Drop every entry whose record starts at or after ``phys_offset``."""
        with self._write_lock:
            lo, hi = self.min_offset, self.max_offset

            def before(offset: int) -> bool:
                # Zero entries (pages that never reached the disk) count as dirty too; a blank
                # (a skipped queue offset) goes with the next real entry, which keeps the
                # predicate monotonic for the bisection.
                entry = self._real_entry_from(offset, hi)
                return entry is not None and entry[1] > 0 and entry[0] < phys_offset

            cut = lo + bisect.bisect_left(_OffsetRange(lo, hi, before), True)
            if cut >= hi:
                return
            self.queue.truncate(cut * CQ_STORE_UNIT_SIZE)
            last = self.get(cut - 1) if cut > self.min_offset else None
            self.max_physic_offset = last[0] + last[1] if last is not None else -1
            if cut <= self.min_offset:
                self.min_offset = cut

    def correct_min_offset(self, commit_log_min_offset: int) -> None:
        """Move ``min_offset`` to the first entry whose record is still in the commit log."""
        first = self.queue.first
        lo = self.min_offset
        if first is not None:
            lo = max(lo, first.file_from_offset // CQ_STORE_UNIT_SIZE)
        hi = self.max_offset

        def gone(offset: int) -> bool:
            # A blank goes with the next real entry (blanks fill skipped offsets mid-queue too).
            entry = self._real_entry_from(offset, hi)
            return entry is None or entry[0] < commit_log_min_offset

        self.min_offset = lo + bisect.bisect_left(_OffsetRange(lo, hi, gone), True)

    def delete_expired_files(self, commit_log_min_offset: int) -> int:
        """Delete files whose every record is below the commit log's minimum offset.

        The file being written is kept.  Returns how many were deleted.
        """
        files = self.queue.files
        doomed = []
        for mf in files[:-1]:
            last = _last_entry(mf)
            if last is None or last[0] + last[1] > commit_log_min_offset and last[1] != BLANK_ENTRY_SIZE:
                break
            doomed.append(mf)
        count = len(self.queue.delete_first(doomed)) if doomed else 0
        self.correct_min_offset(commit_log_min_offset)
        return count

    def check(self, commit_log_max_offset: int) -> list[str]:
        """Self-check: entries well formed and increasing, and within the commit log."""
        problems: list[str] = []
        prev_end = -1
        name = f"consume queue {self.topic}-{self.queue_id}"
        for mf in self.queue.files:
            if mf.wrote_position % CQ_STORE_UNIT_SIZE:
                problems.append(f"{name}: {mf.path.name} holds a partial entry")
            for index, (phys, size, _tag) in enumerate(_ENTRY.iter_unpack(mf.mm[: mf.wrote_position])):
                if size == BLANK_ENTRY_SIZE:
                    continue
                offset = mf.file_from_offset // CQ_STORE_UNIT_SIZE + index
                if size <= 0 or phys < 0:
                    problems.append(f"{name}: entry {offset} is empty inside the queue")
                elif phys < prev_end:
                    problems.append(f"{name}: entry {offset} points backwards ({phys} < {prev_end})")
                elif phys + size > commit_log_max_offset:
                    problems.append(f"{name}: entry {offset} points past the commit log end")
                prev_end = max(prev_end, phys + size)
        return problems

    def close(self) -> None:
        self.queue.close()

    def destroy(self) -> None:
        self.queue.destroy()


def _last_entry(mf: MappedFile) -> Entry | None:
    pos = mf.wrote_position - CQ_STORE_UNIT_SIZE
    if pos < 0:
        return None
    return _ENTRY.unpack_from(mf.mm, pos)


class _OffsetRange:
    """A lazy sequence of ``predicate(offset)`` over ``[lo, hi)`` for ``bisect``.

    The predicate must be True then False along the range (monotonic).
    """

    def __init__(self, lo: int, hi: int, predicate: Callable[[int], bool]) -> None:
        self._lo, self._len, self._predicate = lo, max(0, hi - lo), predicate

    def __len__(self) -> int:
        return self._len

    def __getitem__(self, index: int) -> bool:
        # bisect looks for the first False: "not predicate" sorts True values first.
        return not self._predicate(self._lo + index)


class ConsumeQueueStore:
    """Every consume queue of the store, found or created by (topic, queue id)."""

    def __init__(self, root: Path, file_size: int) -> None:
        self.root = root
        self.file_size = file_size
        self.queues: dict[str, dict[int, ConsumeQueue]] = {}
        self._lock = threading.Lock()

    def find(self, topic: str, queue_id: int) -> ConsumeQueue | None:
        by_id = self.queues.get(topic)
        return by_id.get(queue_id) if by_id is not None else None

    def find_or_create(self, topic: str, queue_id: int) -> ConsumeQueue:
        by_id = self.queues.get(topic)
        if by_id is not None:
            cq = by_id.get(queue_id)
            if cq is not None:
                return cq
        with self._lock:
            by_id = self.queues.setdefault(topic, {})
            cq = by_id.get(queue_id)
            if cq is None:
                cq = ConsumeQueue(topic, queue_id, self.root / topic / str(queue_id), self.file_size)
                by_id[queue_id] = cq
            return cq

    def __iter__(self) -> Iterator[ConsumeQueue]:
        for by_id in list(self.queues.values()):
            yield from list(by_id.values())

    def load(self) -> list[str]:
        """Open every queue directory under the root; return problems found."""
        problems: list[str] = []
        if not self.root.is_dir():
            return problems
        for topic_dir in sorted(self.root.iterdir()):
            if not topic_dir.is_dir():
                continue
            for queue_dir in sorted(topic_dir.iterdir()):
                if not queue_dir.is_dir() or not queue_dir.name.isdigit():
                    problems.append(f"ignoring stray consume-queue entry {queue_dir}")
                    continue
                cq = self.find_or_create(topic_dir.name, int(queue_dir.name))
                problems.extend(cq.load())
        return problems

    def recover(self) -> None:
        for cq in self:
            cq.recover()

    def flush(self) -> None:
        for cq in self:
            cq.flush()

    def truncate_dirty(self, phys_offset: int) -> None:
        for cq in self:
            cq.truncate_dirty(phys_offset)

    def delete_topic(self, topic: str) -> None:
        with self._lock:
            by_id = self.queues.pop(topic, {})
        for cq in by_id.values():
            cq.destroy()
        shutil.rmtree(self.root / topic, ignore_errors=True)

    def max_offset_table(self) -> dict[tuple[str, int], int]:
        """Next queue offset of every queue: what the commit log hands out next."""
        return {(cq.topic, cq.queue_id): cq.max_offset for cq in self}

    def close(self) -> None:
        for cq in self:
            cq.close()

    def destroy(self) -> None:
        with self._lock:
            queues, self.queues = self.queues, {}
        for by_id in queues.values():
            for cq in by_id.values():
                cq.destroy()
        shutil.rmtree(self.root, ignore_errors=True)
