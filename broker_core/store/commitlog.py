"""The commit log: every message of every topic, appended to one log (RocketMQ ``CommitLog``).

Files live in ``<root>/commitlog/``, each ``mapped_file_size_commit_log`` bytes, named by
their 20-digit start offset.  A record never spans two files: when one does not fit in
what is left of a file (keeping 8 bytes for the marker), the tail is closed with the
blank marker (TOTALSIZE = bytes left, MAGICCODE = 0xCBD43194) and the record starts the
next file.  Record layout: ``broker_core.model.message``.

Queue offsets are handed out here, under the put lock, so a record's QUEUEOFFSET and its
consume-queue slot always agree.  Each append also queues a ready-made dispatch entry
(``appended``), so the dispatcher follows the log without re-reading it; after a crash,
``recover`` re-reads the log instead.

Crash policy: recovery scans forward from a known-good offset, validating magic, sizes,
the record's own PHYSICALOFFSET and body CRC.  A bad record followed by valid ones is
damage: it is skipped and its range recorded (``broker_core.store.damage``), and the scan
goes on at the next valid record.  Bad bytes with nothing valid after them are a torn
tail: they end the log and are zeroed or deleted so they can never be served or resurface.

Thread-safety: appends are serialised by ``put_lock``; reads copy bytes out and may run on
any thread; ``recover`` and ``truncate`` run before the store serves traffic.
"""

from __future__ import annotations

import errno
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from itertools import accumulate, repeat
from mmap import mmap
from pathlib import Path

from broker_core.errors import MessageIllegalError
from broker_core.model.message import (
    BATCH_ITEM_FRAMING,
    BLANK,
    HEADER_V4_SIZE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_PREPARED_TYPE,
    TRANSACTION_ROLLBACK_TYPE,
    TRANSACTION_TYPE_MASK,
    DispatchRequest,
    DispatchRun,
    MessageBatchInner,
    MessageExt,
    MessageInner,
    blank_marker,
    check_record,
    crc32,
    finish_record,
    store_timestamp_pos,
    topic_length_and_bytes,
)
from broker_core.speedups import compiled
from broker_core.store.damage import DamagedRange, find_next_record
from broker_core.store.mappedfile import MappedFile
from broker_core.store.mappedfilequeue import MappedFileQueue
from broker_core.store.results import PutMessageResult, PutMessageStatus

# C loops for batches (``_speedups``), None on machines without a compiler; the Python
# paths below are the reference.  Each one's arguments are in ``_speedups.pyi``.
# Where records are built: a file's mapping, or a buffer written to the file after (pwrite).
_Buffer = mmap | bytearray
_c_write_records: Callable[[_Buffer, int, int, int, bytes, list[MessageInner], list[int]], int] | None
_c_batch_items: Callable[[bytes, int], tuple[list[tuple[int, int, int, int]], int]] | None
_c_write_batch: (
    Callable[
        [
            _Buffer,
            int,
            int,
            int,
            bytes,
            bytes,
            int,
            int,
            int,
            int,
            str,
            bytes,
            bytes,
            list[tuple[int, int, int, int]],
            Callable[[memoryview], int],
        ],
        tuple[int, bytes, tuple[int, ...], list[tuple[str, str, int, int]]],
    ]
    | None
)
if compiled is None:  # no compiler here, or QUIVER_PURE_PYTHON (broker_core.speedups)
    _c_write_records = _c_batch_items = _c_write_batch = None
else:
    _c_write_records = compiled.write_records
    _c_batch_items = compiled.batch_items
    _c_write_batch = compiled.write_batch

log = logging.getLogger(__name__)

END_FILE_MIN_BLANK_LENGTH = 8
# How far past a bad record recovery looks for the next valid one, in its segment and at the
# head of each later segment.  Reading never-written pages of a preallocated segment costs
# page faults (about 1 s per GiB here): searching the whole empty tail of a 1 GiB segment at
# every start would cost that much, while damage wider than this is not a flipped byte but
# a lost region, and the log ends there as it did before.
RESYNC_WINDOW = 64 * 1024 * 1024
# Half and rollback messages take no consume-queue slot.
NO_QUEUE_SLOT = (TRANSACTION_PREPARED_TYPE, TRANSACTION_ROLLBACK_TYPE)
_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)

# (physical offset, size, queue offset, store timestamp, message): what the dispatcher
# needs from an append, without re-reading the record.  An encoded batch written in C is
# one entry whose DispatchRun holds all its records; a slave's records come decoded from
# its master's bytes (``store.replica``).
Appended = tuple[int, int, int, int, MessageInner | DispatchRun | MessageExt]


class DiskFullError(OSError):
    """A new file could not be created for lack of space."""


class CommitLog:
    """Append-only log of all messages, in fixed-size mapped segments."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        store_host: bytes,
        max_message_size: int,
        clock_ms: Callable[[], int],
        preallocate: bool = True,
        write_through: bool = False,
    ) -> None:
        self.directory = directory
        # Records go into the file with pwrite, not through the mapping (SYNC_FLUSH: see
        # MappedFile.write_at); they are built in a buffer of their own first.
        self.write_through = write_through
        self.file_size = file_size
        self.store_host = store_host
        self.max_message_size = max_message_size
        self.queue = MappedFileQueue(directory, file_size, preallocate=preallocate, warm=preallocate)
        self.put_lock = threading.Lock()
        # Next queue offset of each (topic, queue id).
        self.topic_queue_table: dict[tuple[str, int], int] = {}
        # Appended records awaiting dispatch, oldest first; the dispatcher drains it.
        self.appended: deque[Appended] = deque()
        self._clock_ms = clock_ms
        # End of the last record (the write position may be past it, after a blank marker).
        self.records_end = 0
        # Set when a file could not be created for lack of space; cleared by a later success.
        self.disk_full_since: float | None = None
        # Ranges the last ``recover`` skipped as damaged (the store records them).
        self.damaged_found: list[DamagedRange] = []
        # Where the last ``recover`` cut bytes that were not a complete record (None: none).
        self.torn_tail_at: int | None = None

    # -- appends ---------------------------------------------------------------------

    def _writable_file(self, size: int) -> MappedFile:
        """The file that can take a ``size``-byte record, closing the current one if needed.

        Called under ``put_lock``.  Raises DiskFullError when a new file cannot be made.
        """
        mf = self.queue.last
        if mf is not None and mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH <= mf.file_size:
            return mf
        if mf is not None and not mf.is_full:
            pos = mf.wrote_position
            remaining = mf.file_size - pos
            mf.mm[pos : pos + 8] = blank_marker(remaining)
            mf.wrote_position = mf.file_size
        try:
            mf = self.queue.last_for_write()
        except OSError as exc:
            if exc.errno in _NO_SPACE_ERRNOS:
                self.disk_full_since = self.disk_full_since or time.monotonic()
                raise DiskFullError(exc.errno, f"cannot create a commit-log file: {exc.strerror}") from exc
            raise
        self.disk_full_since = None
        return mf

    def _sink(self, mf: MappedFile, start: int, total: int) -> tuple[_Buffer, int, int]:
        """Where ``total`` bytes of records for file position ``start`` are built:
        ``(buffer, position in it, physical offset of the buffer's byte 0)``.  The file's
        mapping itself, or with ``write_through`` a buffer that ``_commit`` then writes."""
        if self.write_through:
            return bytearray(total), 0, mf.file_from_offset + start
        return mf.mm, start, mf.file_from_offset

    def _commit(self, mf: MappedFile, start: int, buffer: _Buffer) -> None:
        """Put what ``_sink`` had built into the file (nothing to do for the mapping)."""
        if isinstance(buffer, bytearray):
            mf.write_at(start, buffer)

    def _check_size(self, size: int) -> None:
        if size > self.max_message_size:
            raise MessageIllegalError(
                f"message is {size} bytes stored; maxMessageSize is {self.max_message_size}"
            )
        if size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageIllegalError(
                f"message is {size} bytes stored; a commit-log file holds at most "
                f"{self.file_size - END_FILE_MIN_BLANK_LENGTH}"
            )

    def append(self, msg: MessageInner) -> PutMessageResult:
        """Append one record; return where it went.

        Raises MessageIllegalError for a message that does not fit the format or the size
        limits, DiskFullError when no space is left for a new file.
        """
        store_host = self.store_host
        size, crc, sys_flag, tail = msg.prepare(store_host)
        if size > self.max_message_size or size + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            self._check_size(size)
        # The C writer handles IPv4 hosts only.
        write = _c_write_records if len(msg.born_host) == 8 and len(store_host) == 8 else None
        key = (msg.topic, msg.queue_id)
        table = self.topic_queue_table
        with self.put_lock:
            mf = self.queue.last
            if mf is None or mf.wrote_position + size + END_FILE_MIN_BLANK_LENGTH > mf.file_size:
                mf = self._writable_file(size)
            pos = mf.wrote_position
            phys = mf.file_from_offset + pos
            # Half and rollback messages never enter a consume queue, so they take no slot.
            queue_offset = (
                table.get(key, 0) if msg.sys_flag & TRANSACTION_TYPE_MASK not in NO_QUEUE_SLOT else 0
            )
            store_ts = self._clock_ms()
            write_through = self.write_through
            # (_sink's mapping case inline: one call less on every put)
            buffer, at, buffer_phys = (
                self._sink(mf, pos, size) if write_through else (mf.mm, pos, mf.file_from_offset)
            )
            if write is not None:
                write(buffer, at, buffer_phys, store_ts, store_host, [msg], [queue_offset])
            else:
                record = msg.encode(store_host)
                finish_record(record, queue_offset, phys, store_ts)
                buffer[at : at + size] = record
            if write_through:
                self._commit(mf, pos, buffer)
            mf.wrote_position = pos + size
            self.records_end = pos + size + mf.file_from_offset
            if msg.sys_flag & TRANSACTION_TYPE_MASK not in NO_QUEUE_SLOT:
                table[key] = queue_offset + 1
            self.appended.append((phys, size, queue_offset, store_ts, msg))
        return PutMessageResult(
            PutMessageStatus.PUT_OK, "", phys, size, queue_offset, store_ts, 1, (phys,), store_host
        )

    def append_batch(self, msgs: Sequence[MessageInner]) -> PutMessageResult:
        """Append several records contiguously, in one file, under one lock.

        The records take consecutive queue offsets in their queues (a batch normally
        targets one queue).  All or nothing: a message that fails validation refuses the
        whole batch.
        """
        if not msgs:
            raise MessageIllegalError("a batch must hold at least one message")
        msgs = list(msgs)
        store_host = self.store_host
        sizes = [m.prepare(store_host)[0] for m in msgs]
        total = sum(sizes)
        if max(sizes) > self.max_message_size or total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            for size in sizes:
                self._check_size(size)
            self._check_size_batch(total)
        write = (
            _c_write_records if len(store_host) == 8 and all(len(m.born_host) == 8 for m in msgs) else None
        )
        table = self.topic_queue_table
        with self.put_lock:
            mf = self._writable_file(total)
            start = mf.wrote_position
            base = mf.file_from_offset
            store_ts = self._clock_ms()
            queue_offsets = []
            taken: dict[tuple[str, int], int] = {}  # committed to the table once written
            for msg in msgs:
                if msg.sys_flag & TRANSACTION_TYPE_MASK in NO_QUEUE_SLOT:
                    queue_offsets.append(0)
                    continue
                key = (msg.topic, msg.queue_id)
                queue_offset = taken.get(key)
                if queue_offset is None:
                    queue_offset = table.get(key, 0)
                taken[key] = queue_offset + 1
                queue_offsets.append(queue_offset)
            buffer, at, buffer_phys = self._sink(mf, start, total)
            if write is not None:
                at_end = write(buffer, at, buffer_phys, store_ts, store_host, msgs, queue_offsets)
            else:
                at_end = at
                for msg, size, queue_offset in zip(msgs, sizes, queue_offsets, strict=True):
                    record = msg.encode(store_host)
                    finish_record(record, queue_offset, buffer_phys + at_end, store_ts)
                    buffer[at_end : at_end + size] = record
                    at_end += size
            self._commit(mf, start, buffer)
            end = start + at_end - at
            mf.wrote_position = end
            self.records_end = base + end
            table.update(taken)
            offsets = list(accumulate(sizes[:-1], initial=base + start))
            self.appended.extend(zip(offsets, sizes, queue_offsets, repeat(store_ts), msgs))
        return PutMessageResult(
            PutMessageStatus.PUT_OK,
            "",
            base + start,
            total,
            queue_offsets[0],
            store_ts,
            len(msgs),
            tuple(offsets),
            store_host,
        )

    def append_encoded_batch(self, batch: MessageBatchInner) -> PutMessageResult:
        """Append each item of a producer's encoded batch as its own record, in one go.

        All items go to ``batch.topic``/``batch.queue_id`` with consecutive queue offsets,
        contiguously in one file.  Without the C speedups (or for IPv6 hosts) the items
        are decoded into messages and take the ``append_batch`` path.  Raises
        MessageIllegalError for a malformed or oversized batch: nothing is written then.
        """
        store_host = self.store_host
        split, write = _c_batch_items, _c_write_batch
        if split is None or write is None or len(store_host) != 8 or len(batch.born_host) != 8:
            return self.append_batch(batch.messages(self.max_message_size))
        try:
            items, largest_payload = split(batch.encoded, self.max_message_size)
        except ValueError as exc:
            raise MessageIllegalError(str(exc)) from None
        if not items:
            raise MessageIllegalError("the batch holds no messages")
        topic_field = topic_length_and_bytes(batch.topic)
        # Record: header (88) + body + topic field + properties length (2) + properties;
        # item: 22-byte item framing + body + properties.
        overhead = HEADER_V4_SIZE + len(topic_field) + 2 - BATCH_ITEM_FRAMING
        largest = largest_payload + BATCH_ITEM_FRAMING + overhead
        total = len(batch.encoded) + len(items) * overhead
        self._check_size(largest)
        self._check_size_batch(total)
        key = (batch.topic, batch.queue_id)
        table = self.topic_queue_table
        with self.put_lock:
            mf = self._writable_file(total)
            start = mf.wrote_position
            base = mf.file_from_offset
            store_ts = self._clock_ms()
            first_queue_offset = table.get(key, 0)
            buffer, at, buffer_phys = self._sink(mf, start, total)
            at_end, cq_entries, offsets, index_items = write(
                buffer,
                at,
                buffer_phys,
                store_ts,
                store_host,
                batch.born_host,
                batch.born_timestamp,
                batch.sys_flag,
                batch.queue_id,
                first_queue_offset,
                batch.topic,
                topic_field,
                batch.encoded,
                items,
                crc32,
            )
            if at_end != at + total:  # the size arithmetic above and the C writer disagree
                raise RuntimeError(f"batch wrote {at_end - at} bytes where {total} were reserved")
            self._commit(mf, start, buffer)
            end = start + total
            table[key] = first_queue_offset + len(items)
            mf.wrote_position = end
            self.records_end = base + end
            run = DispatchRun(batch.topic, batch.queue_id, len(items), cq_entries, index_items)
            self.appended.append((base + start, total, first_queue_offset, store_ts, run))
        return PutMessageResult(
            PutMessageStatus.PUT_OK,
            "",
            base + start,
            total,
            first_queue_offset,
            store_ts,
            len(items),
            offsets,
            store_host,
        )

    def _check_size_batch(self, total: int) -> None:
        if total + END_FILE_MIN_BLANK_LENGTH > self.file_size:
            raise MessageIllegalError(
                f"batch is {total} bytes stored; a commit-log file holds at most "
                f"{self.file_size - END_FILE_MIN_BLANK_LENGTH}: send it in smaller batches"
            )

    # -- reads -----------------------------------------------------------------------

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_offset

    def read(self, phys: int, size: int) -> bytes | None:
        """The ``size`` bytes at ``phys``, or None when they are not (or no longer) there."""
        mf = self.queue.find(phys)
        if mf is None:
            return None
        rel = phys - mf.file_from_offset
        if rel + size > mf.wrote_position:
            return None
        try:
            return mf.mm[rel : rel + size]
        except ValueError:  # the file was closed by expiry in between
            return None

    def read_record(self, phys: int) -> bytes | None:
        """The whole record starting at ``phys``, or None when no record starts there."""
        head = self.read(phys, 8)
        if head is None or len(head) < 8:
            return None
        size = int.from_bytes(head[:4], "big", signed=True)
        if int.from_bytes(head[4:8], "big") != MESSAGE_MAGIC_CODE or size <= 0:
            return None
        return self.read(phys, size)

    def store_timestamp_at(self, phys: int) -> int:
        """STORETIMESTAMP of the record at ``phys`` (-1 when no record starts there)."""
        head = self.read(phys, 72)
        if head is None or len(head) < 72 or int.from_bytes(head[4:8], "big") != MESSAGE_MAGIC_CODE:
            return -1
        sys_flag = int.from_bytes(head[36:40], "big", signed=True)
        pos = store_timestamp_pos(sys_flag)
        return int.from_bytes(head[pos : pos + 8], "big", signed=True)

    def flush(self) -> int:
        return self.queue.flush()

    # -- recovery --------------------------------------------------------------------

    def load(self) -> list[str]:
        return self.queue.load()

    def recover(self, start_offset: int, on_record: Callable[[DispatchRequest], None]) -> int:
        """Find the end of the valid log, scanning from ``start_offset``; truncate after it.

        ``start_offset`` must be a record boundary known to be good (from the
        checkpoint).  If no valid record starts there, the scan restarts from the start
        of that file, where a record always begins.  Every valid record from the scan
        start is passed to ``on_record`` (for re-dispatch).  A bad record with valid
        records after it is skipped, and its range added to ``damaged_found``; only bad
        bytes with no valid record after them (a torn tail) end the log.  Returns the end
        offset.
        """
        files = self.queue.files
        self.damaged_found = []
        if not files:
            return 0
        start_offset = min(max(start_offset, self.queue.min_offset), self.queue.max_offset)
        index = first_index = min(
            (start_offset - files[0].file_from_offset) // self.file_size, len(files) - 1
        )
        # Validate from the start of that file (a record always begins there), not from the
        # offset itself: bytes before it may have been lost or damaged since it was written.
        # Re-dispatching the records in between is idempotent.
        pos = 0
        end = files[index].file_from_offset + pos
        while index < len(files):
            mf = files[index]
            mm = mf.mm
            size, request = check_record(mm, pos, self.file_size)
            if size > 0 and request is not None and request.commit_log_offset == mf.file_from_offset + pos:
                on_record(request)
                pos += size
                end = mf.file_from_offset + pos
                if pos == self.file_size:
                    index, pos = index + 1, 0
                continue
            if size == BLANK:
                end = mf.file_from_offset + self.file_size
                index, pos = index + 1, 0
                continue
            resumed = self._resume_after(index, pos)
            if resumed is None:
                break  # nothing valid after it: a torn tail, the end of the log
            next_index, next_pos = resumed
            bad_start = mf.file_from_offset + pos
            bad_end = files[next_index].file_from_offset + next_pos
            self.damaged_found.append(
                DamagedRange(bad_start, bad_end, _damage_reason(mm, pos, self.file_size), self._clock_ms())
            )
            index, pos = next_index, next_pos
            end = bad_end
        self.torn_tail_at = end if self._holds_bytes(end) else None
        if self.torn_tail_at is not None:
            log.warning("commit log: a torn tail after offset %d is cut at recovery", end)
        self.truncate(end)
        self.records_end = end
        # What survived a process crash may still be only in the page cache: sync it (and
        # the zeroed tail) now, before anything new is acknowledged on top of it.
        for mf in self.queue.files[first_index:]:
            os.fsync(mf.fileno())
        return end

    def _resume_after(self, index: int, pos: int) -> tuple[int, int] | None:
        """(file index, position) of the first valid record after the bad one at ``pos``."""
        files = self.queue.files
        mf = files[index]
        found = find_next_record(mf.mm, mf.file_from_offset, pos + 1, self.file_size, pos + 1 + RESYNC_WINDOW)
        if found >= 0:
            return index, found
        for later in range(index + 1, len(files)):
            mf = files[later]
            found = find_next_record(mf.mm, mf.file_from_offset, 0, self.file_size, RESYNC_WINDOW)
            if found >= 0:
                return later, found
        return None

    def _holds_bytes(self, offset: int) -> bool:
        """Whether the bytes at ``offset`` hold anything (a torn record), not just zeros."""
        mf = self.queue.find(offset)
        if mf is None:
            return False
        rel = offset - mf.file_from_offset
        return any(mf.mm[rel : min(rel + 64, self.file_size)])

    def truncate(self, offset: int) -> None:
        """Drop every byte at or after ``offset`` (and forget queue offsets past it).

        Callers rebuild ``topic_queue_table`` from the consume queues afterwards.
        """
        self.queue.truncate(offset)
        last = self.queue.last
        if last is not None:
            last.flushed_position = last.wrote_position

    # -- expiry ----------------------------------------------------------------------

    def first_store_timestamps(self) -> list[tuple[MappedFile, int]]:
        """Each file with the store time of its first record (-1 when it has none)."""
        result = []
        for mf in self.queue.files:
            result.append((mf, self.store_timestamp_at(mf.file_from_offset)))
        return result

    def delete_expired_files(self, expired_before_ms: int, *, force: bool, max_count: int) -> int:
        """Delete the oldest files whose newest record is older than ``expired_before_ms``.

        A file's newest record is no newer than the next file's first one, which is what
        is compared.  The file being written is never deleted.  ``force`` deletes the
        oldest files whatever their age (the disk is nearly full).  Returns how many went.
        """
        files = self.queue.files
        doomed: list[MappedFile] = []
        for index in range(len(files) - 1):
            if len(doomed) >= max_count:
                break
            newest = self.store_timestamp_at(files[index + 1].file_from_offset)
            if not force and (newest < 0 or newest >= expired_before_ms):
                break
            doomed.append(files[index])
        gone = self.queue.delete_first(doomed) if doomed else []
        if gone:
            log.info("deleted %d commit-log file(s): %s", len(gone), ", ".join(mf.path.name for mf in gone))
        return len(gone)

    def close(self) -> None:
        self.queue.close()


def _damage_reason(buf: mmap, pos: int, limit: int) -> str:
    """Why the bytes at ``pos`` are not a record, in words."""
    head = buf[pos : pos + 8]
    total = int.from_bytes(head[:4], "big", signed=True)
    magic = int.from_bytes(head[4:8], "big")
    if magic != MESSAGE_MAGIC_CODE:
        return f"no record magic (found {magic:#010x})"
    if total <= 0 or pos + total > limit:
        return f"impossible record size {total}"
    return "record fails its layout or body CRC check"
