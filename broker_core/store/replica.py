"""A slave's side of the commit log: the master's bytes, appended at the master's offsets.

Replication (``broker_core.ha``) copies the commit log byte for byte: a slave's log is
identical to its master's up to what it has received, so a message has the same physical
offset, and the same offset msgId, on both.  The master sends the log in chunks that may
end in the middle of a record, and never span two segment files (a segment ends in a whole
record or a blank marker, so a chunk that reaches a segment's end completes it).

``ReplicaWriter.append`` writes a chunk where the log ends (or, into an empty log, where the
master's chunk starts: a new slave takes the master's log from its oldest file), then hands
each record the chunk completed to the dispatcher, which builds the slave's own consume
queues and index from them exactly as recovery would.  A trailing part of a record waits
for the chunk that completes it.

A record that is complete but does not check (magic, sizes, its own offset) is never
dispatched: the writer stops there and reports it (``ReplicaMismatch``), and replication
stops until an operator looks, rather than build queues on bytes that are not the master's.
Body CRCs are not checked here, as RocketMQ's slave does not: the master checked nothing
less when it stored them, and recovery checks them after a crash as on any broker.

The records are read in one C pass per chunk (``_speedups.scan_records``) that hands the
dispatcher runs of one queue's consecutive records, as it takes a producer's batch; without
the C module each record is decoded and dispatched on its own.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from broker_core.model.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_TYPE_MASK,
    DispatchRun,
    MessageExt,
    RecordFormatError,
    py_decode_record,
)
from broker_core.speedups import compiled
from broker_core.store.commitlog import NO_QUEUE_SLOT, CommitLog
from broker_core.store.mappedfile import MappedFile
from broker_core.topics import SCHEDULE_TOPIC

_c_scan_records: (
    Callable[
        [memoryview, int, int, int, bytes, tuple[int, ...]],
        tuple[int, list[tuple[str, int, int, int, bytes, int, int, int]], list[tuple[str, str, int, int]]],
    ]
    | None
)
_c_scan_records = None if compiled is None else compiled.scan_records  # broker_core.speedups

log = logging.getLogger(__name__)

_HEAD = 8  # TOTALSIZE + MAGICCODE, enough to know how long a record is


class ReplicaMismatch(Exception):
    """Bytes from the master that do not continue this log (wrong offset, or not records)."""


class ReplicaWriter:
    """Appends the master's commit-log chunks and dispatches the records they complete."""

    def __init__(self, commit_log: CommitLog, delay_levels_ms: tuple[int, ...]) -> None:
        self.commit_log = commit_log
        # A delayed message's consume-queue entry carries its due time (dispatcher.queue_tags_code).
        self._delay_topic = SCHEDULE_TOPIC.encode()
        self._delay_levels = delay_levels_ms
        # Where the next record to dispatch starts (records before it are dispatched).
        self.parsed_end = commit_log.max_offset
        self._lock = threading.Lock()

    def append(self, offset: int, data: bytes | bytearray | memoryview) -> int:
        """Write ``data`` at commit-log ``offset``; return how many records it completed.

        ``offset`` must be where this log ends, or a segment boundary when the log is empty.

        Raises:
            ReplicaMismatch: ``offset`` is not where this log ends, the chunk would cross a
                segment's end, or a completed record does not check.
            OSError: a new segment could not be created (disk full).
        """
        log_ = self.commit_log
        queue = log_.queue
        with self._lock, log_.put_lock:
            end = queue.max_offset
            if queue.last is None:
                if offset % log_.file_size:
                    raise ReplicaMismatch(
                        f"the master sent offset {offset}, which is not a segment start, to an empty log"
                    )
                end = self.parsed_end = offset
            if offset != end:
                raise ReplicaMismatch(f"the master sent offset {offset}; this log ends at {end}")
            mf = queue.last
            if mf is None or mf.is_full:
                mf = queue.last_for_write(offset)
            pos = offset - mf.file_from_offset
            if pos + len(data) > mf.file_size:
                raise ReplicaMismatch(
                    f"a chunk of {len(data)} bytes at {offset} crosses the end of segment "
                    f"{mf.file_from_offset}"
                )
            mf.mm[pos : pos + len(data)] = data
            mf.wrote_position = pos + len(data)
            return self._dispatch_completed()

    def _dispatch_completed(self) -> int:
        """Queue every whole record between ``parsed_end`` and the log's end for dispatch."""
        queue = self.commit_log.queue
        count = 0
        while True:
            mf = queue.find(self.parsed_end)
            if mf is None:
                return count
            pos = self.parsed_end - mf.file_from_offset
            written = mf.wrote_position
            if written - pos < _HEAD:
                return count
            # The whole records from ``pos`` in one pass (in C when it is built), then what
            # stopped it: the end of what has arrived, a blank tail, or bytes that are wrong.
            pos, done = self._take_records(mf, pos, written)
            count += done
            self.parsed_end = mf.file_from_offset + pos
            if written - pos < _HEAD:
                return count
            total = int.from_bytes(mf.mm[pos : pos + 4], "big", signed=True)
            magic = int.from_bytes(mf.mm[pos + 4 : pos + 8], "big")
            if magic == BLANK_MAGIC_CODE and total == mf.file_size - pos:
                if written < mf.file_size:
                    return count  # the segment's blank tail is still coming
                self.parsed_end = mf.file_from_offset + mf.file_size
                continue
            if magic == MESSAGE_MAGIC_CODE and 0 < total <= mf.file_size - pos and written - pos < total:
                return count  # the rest of this record comes with the next chunk
            raise ReplicaMismatch(
                f"the bytes at commit-log offset {self.parsed_end} are not a valid record "
                "(the master's log and this one differ there)"
            )

    def _take_records(self, mf: MappedFile, pos: int, written: int) -> tuple[int, int]:
        """Queue the valid whole records of ``mf`` from ``pos`` for dispatch; return where
        they end and how many there were."""
        with memoryview(mf.mm) as whole, whole[:written] as view:
            if _c_scan_records is not None:
                return self._take_runs(view, mf.file_from_offset, pos, written)
            records = _py_records(view, pos)
        return self._take_messages(records, mf.file_from_offset, pos)

    def _take_runs(self, view: memoryview, base: int, pos: int, written: int) -> tuple[int, int]:
        """The C path: runs of one queue's consecutive records, as the dispatcher takes an
        encoded batch (``DispatchRun``), so no record costs a Python object."""
        assert _c_scan_records is not None
        log_ = self.commit_log
        end, runs, index_items = _c_scan_records(
            view, pos, written, base, self._delay_topic, self._delay_levels
        )
        table = log_.topic_queue_table
        appended = log_.appended
        done = 0
        for i, (topic, queue_id, first_qoff, count, entries, first_phys, end_phys, ts) in enumerate(runs):
            if count:
                key = (topic, queue_id)
                if table.get(key, 0) < first_qoff + count:
                    table[key] = first_qoff + count
            items = index_items if i == len(runs) - 1 else []
            run = DispatchRun(topic, queue_id, count, entries, items)
            appended.append((first_phys, end_phys - first_phys, first_qoff, ts, run))
            done += max(count, 1)
        if runs:
            log_.records_end = base + end
        return end, done

    def _take_messages(self, records: list[MessageExt], base: int, pos: int) -> tuple[int, int]:
        """The Python path: each record decoded, dispatched as a message."""
        log_ = self.commit_log
        table = log_.topic_queue_table
        appended = log_.appended
        done = 0
        for msg in records:
            size = msg.store_size
            if msg.commit_log_offset != base + pos:
                break  # reported by the caller, which looks at the bytes here
            if msg.sys_flag & TRANSACTION_TYPE_MASK not in NO_QUEUE_SLOT:
                key = (msg.topic, msg.queue_id)
                if table.get(key, 0) <= msg.queue_offset:
                    table[key] = msg.queue_offset + 1
            appended.append((base + pos, size, msg.queue_offset, msg.store_timestamp, msg))
            pos += size
            done += 1
        if done:
            log_.records_end = base + pos
        return pos, done


def _py_records(view: memoryview, pos: int) -> list[MessageExt]:
    """The whole records from ``pos`` (machines without the C speedups)."""
    out = []
    while len(view) - pos >= _HEAD:
        total = int.from_bytes(view[pos : pos + 4], "big", signed=True)
        if (
            int.from_bytes(view[pos + 4 : pos + 8], "big") != MESSAGE_MAGIC_CODE
            or not 0 < total <= len(view) - pos
        ):
            break
        try:
            out.append(py_decode_record(view, pos))
        except (RecordFormatError, UnicodeDecodeError, ValueError):
            break
        pos += total
    return out
