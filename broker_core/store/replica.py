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

A record that is complete but does not check (magic, sizes, body CRC, its own offset) is
never dispatched: the writer stops there and reports it (``ReplicaMismatch``), and
replication stops until an operator looks, rather than build queues on bytes that are not
the master's.
"""

from __future__ import annotations

import logging
import threading

from broker_core.model.message import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    TRANSACTION_TYPE_MASK,
    MessageExt,
    RecordFormatError,
    py_decode_record,
)
from broker_core.store.mappedfile import MappedFile

try:
    from broker_core._speedups import decode_records as _c_decode_records
except ImportError:  # pragma: no cover - machines without a compiler
    _c_decode_records = None  # type: ignore[assignment]
from broker_core.store.commitlog import NO_QUEUE_SLOT, CommitLog

log = logging.getLogger(__name__)

_HEAD = 8  # TOTALSIZE + MAGICCODE, enough to know how long a record is


class ReplicaMismatch(Exception):
    """Bytes from the master that do not continue this log (wrong offset, or not records)."""


class ReplicaWriter:
    """Appends the master's commit-log chunks and dispatches the records they complete."""

    def __init__(self, commit_log: CommitLog) -> None:
        self.commit_log = commit_log
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
        log_ = self.commit_log
        table = log_.topic_queue_table
        appended = log_.appended
        base = mf.file_from_offset
        with memoryview(mf.mm) as whole, whole[:written] as view:
            if _c_decode_records is not None:
                records, _stopped = _c_decode_records(view, MessageExt, True, pos)
            else:
                records = _py_records(view, pos)
        done = 0
        for msg in records:
            size = msg.store_size
            if msg.commit_log_offset != base + pos or not msg.body_crc_ok:
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
