"""One fixed-size, memory-mapped store file (RocketMQ ``MappedFile``).

Commit-log segments, consume-queue files share this: a file named by the 20-digit,
zero-padded offset of its first byte within its queue, preallocated to its full size with
``posix_fallocate`` so that a full disk surfaces as an ``OSError`` when a file is created,
never as SIGBUS on a write into the mapping.

``wrote_position`` is how much of the file holds data; ``flushed_position`` how much of
that is known durable (``fdatasync`` on the descriptor, which persists writes made through
the mapping and is cheaper than ``msync``).  One thread appends; others may read the bytes
below ``wrote_position`` (reads copy out, so no buffer pins the mapping) and flush.
"""

from __future__ import annotations

import ctypes
import errno
import mmap
import os
import threading
from collections.abc import Callable
from pathlib import Path

MADV_POPULATE_WRITE = 23  # Linux >= 5.14: fault pages in writable, without the GIL (ctypes)

MS_SYNC = 4
# How much of a warmed file one msync writes out (RocketMQ's warm-up flushes every 4,096
# pages too): short enough that a close waits a few milliseconds, not for the whole file.
WARM_WRITE_OUT_CHUNK = 16 * 1024 * 1024

# libc's madvise and msync, (address, length, advice or flags) -> 0 or -1 with errno set;
# None where they cannot be loaded (non-Linux).
_madvise: Callable[[int, int, int], int] | None
_msync: Callable[[int, int, int], int] | None
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _madvise_fn = _libc.madvise
    _madvise_fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _madvise_fn.restype = ctypes.c_int
    _msync_fn = _libc.msync
    _msync_fn.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _msync_fn.restype = ctypes.c_int
except (OSError, AttributeError):  # pragma: no cover - non-Linux
    _madvise = _msync = None
else:
    _madvise, _msync = _madvise_fn, _msync_fn


def populate(mm: mmap.mmap, start: int, length: int) -> bool:
    """Fault ``mm[start:start+length]`` in writable without holding the GIL.

    First touch of a fresh file's page costs ~25x a warm write on this kind of VM, and a
    fault taken inside a slice assignment stalls every Python thread.  Returns False
    where MADV_POPULATE_WRITE is unavailable (the pages then fault in on first write).
    """
    if _madvise is None or length <= 0:
        return False
    page = mmap.PAGESIZE
    start -= start % page
    length = min(length + page, len(mm) - start)
    anchor = ctypes.c_char.from_buffer(mm)
    try:
        return _madvise(ctypes.addressof(anchor) + start, length, MADV_POPULATE_WRITE) == 0
    finally:
        del anchor


def offset_to_file_name(offset: int) -> str:
    """RocketMQ file naming: the start offset as 20 zero-padded digits."""
    return f"{offset:020d}"


class MappedFile:
    """A fixed-size file mapped into memory, written from its start."""

    __slots__ = (
        "path",
        "file_from_offset",
        "file_size",
        "mm",
        "_fd",
        "wrote_position",
        "flushed_position",
        "_flush_lock",
        "_warm_lock",
        "_fd_lock",
        "_closed",
        "excess",
        "_address",
    )

    def __init__(self, path: Path, file_size: int, *, create: bool, exclusive: bool = False) -> None:
        """Open (``create``: or create) the file at ``path``; ``exclusive`` refuses one that
        exists already (FileExistsError), for files that must be new."""
        self.path = path
        self.file_size = file_size
        self.file_from_offset = int(path.name)
        flags = os.O_RDWR | (os.O_CREAT if create else 0) | (os.O_EXCL if exclusive else 0)
        fd = os.open(path, flags, 0o644)
        try:
            actual = os.fstat(fd).st_size
            if actual < file_size:
                # A new file, or one cut short by a crash during creation: the missing
                # tail reads as zeros, which recovery treats as the end of the data.
                os.posix_fallocate(fd, 0, file_size)
            # A file larger than its geometry gives is mapped to that size and never cut:
            # what lies past it is not a record of ours, but cutting is not a reader's call.
            self.excess = max(0, actual - file_size)
            self.mm = mmap.mmap(fd, file_size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(fd)
            if create:
                path.unlink(missing_ok=True)
            raise
        self._fd = fd
        # Where the mapping starts, for msync (flush, and a worker's sync_range); the anchor
        # is dropped at once so that close() is never refused.
        anchor = ctypes.c_char.from_buffer(self.mm)
        self._address = ctypes.addressof(anchor)
        del anchor
        self.wrote_position = 0
        self.flushed_position = 0
        self._flush_lock = threading.Lock()
        self._warm_lock = threading.Lock()
        self._fd_lock = threading.Lock()  # a pwrite (write_at) against close's os.close
        self._closed = False

    @classmethod
    def create(cls, directory: Path, offset: int, file_size: int) -> MappedFile:
        return cls(directory / offset_to_file_name(offset), file_size, create=True)

    @property
    def is_full(self) -> bool:
        return self.wrote_position >= self.file_size

    @property
    def free_space(self) -> int:
        return self.file_size - self.wrote_position

    @property
    def closed(self) -> bool:
        return self._closed

    def append(self, data: bytes | bytearray | memoryview) -> int:
        """Copy ``data`` at the write position; return where it went (file-relative), or -1."""
        pos = self.wrote_position
        end = pos + len(data)
        if end > self.file_size:
            return -1
        self.mm[pos:end] = data
        self.wrote_position = end
        return pos

    def write_at(self, pos: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` to file-relative ``pos`` through the descriptor (``pwrite``), not the
        mapping; readers of the mapping see it at once (one page cache).  Leaves
        ``wrote_position`` to the caller.

        Why a SYNC_FLUSH commit log writes this way (measured here): with records written
        through the mapping, a group's msync in a broker with eight senders took 353 µs
        against 185 µs after ``pwrite``, and a disk past its burst allowance did about
        3,700 such syncs a second against 10,000 (the fault a write into a page that a sync
        just cleaned takes, ``page_mkwrite``, is the likely reason).  Raises OSError
        (ValueError once the file is closed).
        """
        view = memoryview(data).cast("B")
        with self._fd_lock:
            if self._closed:
                raise ValueError(f"{self.path.name} is closed")
            while view:
                written = os.pwrite(self._fd, view, pos)
                if written <= 0:  # a regular file takes every byte or raises; never spin
                    raise OSError(errno.EIO, f"pwrite into {self.path.name} wrote nothing")
                view = view[written:]
                pos += written

    def read(self, pos: int, size: int) -> bytes:
        """Copy ``size`` bytes from file-relative ``pos`` (clipped to the written data)."""
        end = min(pos + size, self.wrote_position)
        if pos < 0 or pos >= end:
            return b""
        return self.mm[pos:end]

    def fileno(self) -> int:
        return self._fd

    def flush(self) -> int:
        """Make everything written so far durable; return the flushed position.

        Only the pages written since the last flush are synced (``msync`` on that range,
        through ctypes so the GIL is released): a warmed file's zero pages ahead of the
        writer are dirty too, and ``fdatasync`` would write all of them out first.  The
        flush lock keeps ``close`` from unmapping the file meanwhile.
        """
        with self._flush_lock:
            target = self.wrote_position
            flushed = self.flushed_position
            if target > flushed and not self._closed:
                start = flushed - flushed % mmap.PAGESIZE
                if _msync is not None:
                    if _msync(self._address + start, target - start, MS_SYNC) != 0:
                        err = ctypes.get_errno()
                        raise OSError(err, f"msync {self.path.name}: {os.strerror(err)}")
                else:  # pragma: no cover - non-Linux
                    os.fsync(self._fd)
                self.flushed_position = target
            return self.flushed_position

    def sync_range(self) -> tuple[int, int, int] | None:
        """What ``flush`` would sync now, for a worker that msyncs outside Python.

        ``(address, length, position)``: the mapped bytes from the page holding the first
        unflushed byte to the last written one, and the position they make durable (for
        ``mark_flushed`` once synced).  None when everything written is durable, when the
        file is closed, or while a ``flush`` holds it (that flush's thread is the one to
        wait for then).  The caller must keep the file open until the sync is done; one
        closed meanwhile fails it with ENOMEM (msync reads no memory).
        """
        target = self.wrote_position
        flushed = self.flushed_position
        if target <= flushed or self._closed or self._flush_lock.locked():
            return None
        start = flushed - flushed % mmap.PAGESIZE
        return self._address + start, target - start, target

    def mark_flushed(self, position: int) -> None:
        """Record a sync made outside ``flush`` (see ``sync_range``): durable to ``position``.

        Not under the flush lock, which a flush holds for its whole msync: a concurrent
        ``flush`` may set a lower position after this one, which only makes it sync again.
        """
        if position > self.flushed_position:
            self.flushed_position = position

    def warm(self) -> None:
        """Fault every page in, writable, and write them out, so that neither an append nor
        a sync pays for a page's first use.

        Uses MADV_POPULATE_WRITE through ctypes, which drops the GIL while the kernel
        works; falls back to touching one byte per page where that is unavailable.  The
        populated pages are dirty zeros that the kernel would write back within half a
        minute anyway; writing them out now (``_write_out``) also turns the file's
        preallocated extents into written ones, so a sync of fresh records later is a
        data write, not a data write plus a filesystem journal commit.
        """
        page = mmap.PAGESIZE
        start = self.wrote_position - self.wrote_position % page
        if _madvise is not None:
            with self._warm_lock:
                if self._closed:
                    return
                populated = _madvise(self._address + start, self.file_size - start, MADV_POPULATE_WRITE) == 0
            if populated:
                self._write_out(start)
                return
        # Reading only: another thread may be appending to this file right now.
        with self._warm_lock:
            if self._closed:
                return
            for pos in range(start, self.file_size, page):
                self.mm[pos]

    def _write_out(self, start: int) -> None:
        """msync the file from ``start`` to its end, ``WARM_WRITE_OUT_CHUNK`` at a time.

        ``posix_fallocate`` leaves a file's extents *unwritten* on ext4 and XFS: the first
        writeback of each range converts it, in the journal.  Here that doubled an msync of
        three fresh 1.2 KB records (about 185 against 85 µs) until the range had been
        written once.  Chunk by chunk, under the warm lock (``close`` waits for one
        chunk, not the file), with the GIL released by ctypes.  A failure only stops the
        write-out: the pages stay dirty and the kernel writes them back as before.
        """
        if _msync is None:  # pragma: no cover - non-Linux
            return
        for offset in range(start, self.file_size, WARM_WRITE_OUT_CHUNK):
            with self._warm_lock:
                if self._closed:
                    return
                length = min(WARM_WRITE_OUT_CHUNK, self.file_size - offset)
                if _msync(self._address + offset, length, MS_SYNC) != 0:
                    return

    def zero_from(self, pos: int) -> None:
        """Zero the bytes from ``pos`` to the end (a truncated tail must not resurface)."""
        chunk = 1 << 20
        zeros = bytes(chunk)
        end = self.file_size
        while pos < end:
            n = min(chunk, end - pos)
            if self.mm[pos : pos + n] != zeros[:n]:
                self.mm[pos : pos + n] = zeros[:n]
            pos += n

    def close(self) -> None:
        with self._warm_lock, self._flush_lock, self._fd_lock:
            if self._closed:
                return
            self._closed = True
            self.mm.close()
            os.close(self._fd)

    def destroy(self) -> None:
        """Close and delete the file."""
        self.close()
        self.path.unlink(missing_ok=True)

    def last_modified(self) -> float:
        try:
            return self.path.stat().st_mtime
        except FileNotFoundError:
            return 0.0

    def __repr__(self) -> str:
        return f"MappedFile({self.path.name}, wrote={self.wrote_position}, flushed={self.flushed_position})"
