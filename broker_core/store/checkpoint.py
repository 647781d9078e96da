"""The store checkpoint: how far each derived structure is known durable (RocketMQ ``StoreCheckpoint``).

``<root>/checkpoint`` is one 4 KiB page, written in place and flushed::

    off size field
      0    8 physicMsgTimestamp   store time of the last flushed commit-log record (RocketMQ)
      8    8 logicsMsgTimestamp   store time of the last record in flushed consume queues (RocketMQ)
     16    8 indexMsgTimestamp    store time of the last record in the flushed index (RocketMQ)
     24    8 physicOffset         commit-log offset flushed (RocketMQ 5: masterFlushedOffset)
     32    8 confirmOffset        unused, 0 (RocketMQ 5 field, kept for layout)
     40    8 logicsOffset         commit-log offset below which consume queues are durable
     48    8 indexOffset          commit-log offset below which the index is durable
     56    4 crc32 of bytes 0..55

The first three fields keep RocketMQ's positions; Quiver recovers from the offsets, which
are exact (a timestamp only names a file).  A checkpoint whose CRC does not match is
ignored and recovery falls back to scanning the whole commit log.  Written by the flush
thread only, after the data it describes has been flushed.

The page is allocated when the file is created and written with ``pwrite``, never through
a mapping: on a full disk a write into a page the file system has not allocated fails
with ``OSError`` rather than killing the process with SIGBUS.
"""

from __future__ import annotations

import errno
import os
import struct
import zlib
from dataclasses import dataclass
from pathlib import Path

_FIELDS = struct.Struct(">qqqqqqq")
_CRC = struct.Struct(">I")
CHECKPOINT_FILE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Checkpoint:
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    physic_offset: int = 0
    logics_offset: int = 0
    index_offset: int = 0


class StoreCheckpoint:
    """Reads and writes the checkpoint page."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            if os.fstat(fd).st_size != CHECKPOINT_FILE_SIZE:
                os.ftruncate(fd, CHECKPOINT_FILE_SIZE)
            try:
                os.posix_fallocate(fd, 0, CHECKPOINT_FILE_SIZE)
            except OSError as exc:
                # A full disk: the page is most likely allocated already (written before);
                # if not, a write fails cleanly and the store keeps the checkpoint it has.
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EOPNOTSUPP):
                    raise
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def read(self) -> Checkpoint | None:
        """The stored checkpoint, or None when absent (all zero) or corrupt."""
        page = os.pread(self._fd, _FIELDS.size + _CRC.size, 0)
        if len(page) < _FIELDS.size + _CRC.size:
            return None
        raw = page[: _FIELDS.size]
        (crc,) = _CRC.unpack_from(page, _FIELDS.size)
        if raw == bytes(_FIELDS.size) and crc == 0:
            return None
        if zlib.crc32(raw) != crc:
            return None
        phys_ts, logics_ts, index_ts, phys_off, _confirm, logics_off, index_off = _FIELDS.unpack(raw)
        if min(phys_off, logics_off, index_off) < 0:
            return None
        return Checkpoint(phys_ts, logics_ts, index_ts, phys_off, logics_off, index_off)

    def write(self, cp: Checkpoint) -> None:
        """Store ``cp`` and make it durable."""
        raw = _FIELDS.pack(
            cp.physic_msg_timestamp,
            cp.logics_msg_timestamp,
            cp.index_msg_timestamp,
            cp.physic_offset,
            0,
            cp.logics_offset,
            cp.index_offset,
        )
        os.pwrite(self._fd, raw + _CRC.pack(zlib.crc32(raw)), 0)
        os.fdatasync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            fd, self._fd = self._fd, -1
            os.close(fd)
