"""An ordered run of same-size mapped files forming one logical log (RocketMQ ``MappedFileQueue``).

The commit log and each consume queue are one of these: file N starts where file N-1
ends, and each is named by its start offset, so the file holding logical offset ``o`` is
found by arithmetic.  The list is replaced, never mutated in place (copy-on-write), so
readers iterate a snapshot without a lock while the single writer rolls files and the
expiry job deletes old ones.

With ``preallocate`` the next file is created and warmed on a background thread ahead of
need, so an append that rolls to a new file rarely waits for ``fallocate`` and seldom
pays for first-touch page faults; it never waits for the warm-up itself.  With
``warm_new_files`` (small files: consume queues) a new file is used at once and warmed by
one background thread shared by every queue (``warm_in_background``).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from pathlib import Path

from broker_core.store.mappedfile import MappedFile, offset_to_file_name

log = logging.getLogger(__name__)


class _BackgroundWarmer:
    """One daemon thread warming files handed to it, in order, started at the first.

    A new consume-queue file (6 MB at the default size) took 3-13 ms to warm on the
    dispatcher's thread, so the first message of a new queue reached its consumers that
    much later; its writer now uses it at once, and a page the writer reaches first is
    faulted in by the write.  One thread for all queues: a topic created with hundreds
    of queues warms their files one after another, not all at once.
    """

    def __init__(self) -> None:
        self._files: queue.SimpleQueue[MappedFile] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def warm(self, mapped_file: MappedFile) -> None:
        self._files.put(mapped_file)
        if self._thread is None:
            with self._lock:
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="warm-new-files", daemon=True)
                    self._thread.start()

    def _run(self) -> None:
        while True:
            mapped_file = self._files.get()
            try:
                mapped_file.warm()  # a file closed meanwhile is skipped
            except Exception as exc:  # the file works unwarmed: its pages fault in on first write
                log.warning("warming %s failed: %s", mapped_file.path, exc)


warm_in_background = _BackgroundWarmer().warm
"""Warm a file on the shared background thread (``MappedFile.warm``); returns at once."""


class _Preparation:
    """One file being prepared ahead: usable once ``created`` is set, warm once ``warmed`` is."""

    __slots__ = ("offset", "created", "warmed", "file", "error", "claimed", "discarding", "gone")

    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.created = threading.Event()
        self.warmed = threading.Event()
        self.file: MappedFile | None = None
        self.error: BaseException | None = None
        # Who owns the file, decided under the preallocator's lock: a roll that asked for
        # it (``claimed``) or a discard that destroys it (``discarding``, then ``gone``).
        self.claimed = False
        self.discarding = False
        self.gone = threading.Event()


class _Preallocator:
    """Creates (and warms) the file for one requested offset ahead of need.

    The file is handed over as soon as it exists, even while its warm-up is still going
    on: an append that rolls to it must not wait for a gigabyte of page faults (about a
    second per GiB on a small VM, and the broker's event loop would stand still).  The
    warm-up goes on from the file's start, ahead of the appends; a page the appends reach
    first simply faults in on its first write.
    """

    def __init__(self, directory: Path, file_size: int, warm: bool) -> None:
        self._directory = directory
        self._file_size = file_size
        self._warm = warm
        self._lock = threading.Lock()
        self._current: _Preparation | None = None
        # The last file handed over (its warm-up may still be going on).
        self._handed: _Preparation | None = None
        # Offsets already handed out: a late request for one of them is ignored.
        self._taken: set[int] = set()

    def request(self, offset: int) -> None:
        """Start preparing the file at ``offset``, unless one is under way or it was claimed.

        A request can come late (the flusher read the queue's last file, then the writer
        rolled past it): an offset already claimed by ``take`` is never prepared, so a
        live file is never reopened, kept pending, and destroyed by ``discard``.
        """
        with self._lock:
            if self._current is not None or offset in self._taken:
                return
            self._current = prep = _Preparation(offset)
        try:
            threading.Thread(
                target=self._run, args=(prep,), name=f"preallocate-{self._directory.name}", daemon=True
            ).start()
        except BaseException as exc:  # no thread: nobody may wait for this preparation
            prep.error = exc
            prep.created.set()
            prep.warmed.set()
            raise

    def _run(self, prep: _Preparation) -> None:
        try:
            # Never an existing file: that would be a live one (take() then creates it).
            prep.file = MappedFile(
                self._directory / offset_to_file_name(prep.offset),
                self._file_size,
                create=True,
                exclusive=True,
            )
        except BaseException as exc:  # reported to whoever takes the file
            prep.error = exc
        finally:
            prep.created.set()
        try:
            if prep.file is not None and self._warm:
                prep.file.warm()
        except Exception as exc:  # the file works unwarmed: its pages fault in on first write
            log.warning("warming %s failed: %s", offset_to_file_name(prep.offset), exc)
        finally:
            prep.warmed.set()

    def take(self, offset: int) -> MappedFile | None:
        """The preallocated file for ``offset`` (waiting until it exists, not until warm).

        None when none is being prepared for it: then the offset is claimed all the same,
        in the same locked step, and the caller creates the file itself.  A roll that asks
        first owns the file even if a discard comes while it is still being created; one
        that comes while a discard destroys it waits until the file is gone, so the file
        the caller then creates at the same path is never unlinked under it.
        """
        with self._lock:
            self._taken.add(offset)
            prep = self._current
            if prep is None or prep.offset != offset:
                return None
            if not prep.discarding:
                prep.claimed = True
        if prep.discarding:
            prep.gone.wait()
            return None
        prep.created.wait()
        with self._lock:
            self._current = None
            self._handed = prep
        if prep.error is not None:
            log.warning("preallocating %s failed: %s", offset_to_file_name(offset), prep.error)
            return None
        return prep.file

    def wait(self, timeout: float | None) -> bool:
        """Wait until the files being prepared, and the last one handed over, are warm."""
        with self._lock:
            preps = [p for p in (self._handed, self._current) if p is not None]
        deadline = None if timeout is None else time.monotonic() + timeout
        for prep in preps:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not prep.warmed.wait(left):
                return False
        return True

    def discard(self) -> None:
        """Drop a pending file (on shutdown or truncation): it must not be left behind.

        A file a roll has claimed is live and is left alone.
        """
        with self._lock:
            prep = self._current
            if prep is None or prep.claimed or prep.discarding:
                return
            prep.discarding = True
        try:
            prep.created.wait()
            if prep.file is not None:
                prep.file.destroy()  # waits for a warm-up under way to stop
        finally:
            with self._lock:
                if self._current is prep:
                    self._current = None
            prep.gone.set()


class MappedFileQueue:
    """The files of one log in ``directory``, each ``file_size`` bytes."""

    def __init__(
        self,
        directory: Path,
        file_size: int,
        *,
        preallocate: bool = False,
        warm: bool = False,
        warm_new_files: bool = False,
    ) -> None:
        self.directory = directory
        self.file_size = file_size
        # Small files (consume queues) are warmed once created, in the background.
        self._warm_new_files = warm_new_files
        self.files: list[MappedFile] = []
        self._lock = threading.Lock()
        self._preallocator = _Preallocator(directory, file_size, warm) if preallocate else None

    def load(self) -> list[str]:
        """Open the files already on disk; return problems found (gaps, stray names)."""
        problems: list[str] = []
        if not self.directory.is_dir():
            return problems
        names = sorted(p.name for p in self.directory.iterdir() if p.is_file())
        files: list[MappedFile] = []
        for name in names:
            if len(name) != 20 or not name.isdigit():
                if not name.endswith((".tmp", ".corrupt")):
                    problems.append(f"{self.directory}: ignoring stray file {name}")
                continue
            offset = int(name)
            if offset % self.file_size:
                problems.append(
                    f"{self.directory}/{name}: start offset is not a multiple of {self.file_size}"
                )
                continue
            if files and offset != files[-1].file_from_offset + self.file_size:
                problems.append(
                    f"{self.directory}/{name}: gap after {files[-1].path.name}; later files ignored"
                )
                break
            mf = MappedFile(self.directory / name, self.file_size, create=False)
            if mf.excess:
                problems.append(
                    f"{self.directory}/{name}: {mf.excess} bytes past the file size "
                    f"{self.file_size} are not part of the store (left in place, ignored)"
                )
            # Until recovery says otherwise, a loaded file is taken as full and flushed.
            mf.wrote_position = mf.flushed_position = self.file_size
            files.append(mf)
        self.files = files
        return problems

    @property
    def first(self) -> MappedFile | None:
        files = self.files
        return files[0] if files else None

    @property
    def last(self) -> MappedFile | None:
        files = self.files
        return files[-1] if files else None

    @property
    def min_offset(self) -> int:
        """Offset of the first byte still on disk (0 when there are no files)."""
        first = self.first
        return first.file_from_offset if first is not None else 0

    @property
    def max_offset(self) -> int:
        """Offset just past the last written byte."""
        last = self.last
        return last.file_from_offset + last.wrote_position if last is not None else 0

    @property
    def flushed_offset(self) -> int:
        """Offset below which everything is known durable (files are flushed in order)."""
        files = self.files
        for mf in reversed(files):
            if mf.flushed_position:
                return mf.file_from_offset + mf.flushed_position
        return files[0].file_from_offset if files else 0

    def find(self, offset: int) -> MappedFile | None:
        """The file holding logical ``offset``, or None when it is outside the files."""
        files = self.files
        if not files:
            return None
        index = (offset - files[0].file_from_offset) // self.file_size
        if 0 <= index < len(files):
            return files[index]
        return None

    def last_for_write(self, start_offset: int = 0) -> MappedFile:
        """The file to append to, creating the next one when the last is full (or none exists).

        ``start_offset`` is where the first file starts when the queue is empty.  Raises
        OSError when a file cannot be created (e.g. ENOSPC): the caller decides what
        that means for the store.
        """
        last = self.last
        if last is not None and not last.is_full:
            return last
        if last is not None:
            offset = last.file_from_offset + self.file_size
        else:
            offset = start_offset - start_offset % self.file_size
        mf = self._preallocator.take(offset) if self._preallocator is not None else None
        if mf is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            mf = MappedFile.create(self.directory, offset, self.file_size)
            if self._warm_new_files:
                warm_in_background(mf)
        with self._lock:
            self.files = [*self.files, mf]
        return mf

    def prepare_next_if_due(self) -> None:
        """Start preparing the file after the last once the last is half written.

        Called from a background thread (the flusher), so appends never pay for the check;
        waiting until half-way keeps the warm-up (a second of kernel time per GiB on a
        small VM) away from a file that was only just taken into use.
        """
        last = self.last
        if self._preallocator is not None and last is not None and last.wrote_position * 2 >= last.file_size:
            self._preallocator.request(last.file_from_offset + self.file_size)

    def prepare_ahead(self) -> None:
        """Get the file the next append needs ready in the background (at open).

        With no file yet the first one is preallocated; otherwise the last file's unused
        part is warmed (and the file after it prepared, if the last is half written).
        """
        if self._preallocator is None:
            return
        last = self.last
        if last is None:
            self._preallocator.request(0)
            return
        if not last.is_full:
            threading.Thread(target=last.warm, name=f"warm-{last.path.name}", daemon=True).start()
        self.prepare_next_if_due()

    def wait_prepared(self, timeout: float | None = None) -> bool:
        """Wait until the file being prepared ahead (if any) is ready; True when it is."""
        if self._preallocator is None:
            return True
        return self._preallocator.wait(timeout)

    def flush(self) -> int:
        """Flush every file with unflushed data, oldest first; return the flushed offset."""
        for mf in self._unflushed():
            mf.flush()
        return self.flushed_offset

    def _unflushed(self) -> list[MappedFile]:
        """The files holding data not yet known durable, oldest first (files are flushed in
        order, so they are the last ones)."""
        files = self.files
        start = len(files)
        while start > 0 and files[start - 1].flushed_position < files[start - 1].wrote_position:
            start -= 1
        return files[start:]

    def sync_ranges(self) -> tuple[list[tuple[MappedFile, int, int, int]], int]:
        """What ``flush`` would sync now, for a worker outside Python: each file with
        unflushed data, oldest first, as ``(file, address, length, position)`` (see
        ``MappedFile.sync_range``), and the offset everything is durable to once they are."""
        ranges = []
        reached = self.flushed_offset
        for mf in self._unflushed():
            synced = mf.sync_range()
            if synced is None:  # closed or being flushed: not this worker's to promise
                break
            address, length, position = synced
            ranges.append((mf, address, length, position))
            reached = mf.file_from_offset + position
        return ranges, reached

    def truncate(self, offset: int) -> None:
        """Drop everything at or after logical ``offset`` (files wholly past it are deleted)."""
        if self._preallocator is not None:
            self._preallocator.discard()
        keep: list[MappedFile] = []
        for mf in self.files:
            start = mf.file_from_offset
            if start >= offset and not (start == offset and not keep):
                mf.destroy()
                continue
            if start + self.file_size > offset:
                rel = offset - start
                mf.zero_from(rel)
                mf.wrote_position = mf.flushed_position = rel
            keep.append(mf)
        with self._lock:
            self.files = keep

    def delete_first(self, doomed: list[MappedFile]) -> list[MappedFile]:
        """Remove and destroy ``doomed``, which must be the oldest files, in order.

        Only what is still at the head of the list goes (a concurrent deletion may have
        taken some already), and never the last file: the log must keep its position.
        Returns the files actually deleted (now closed).
        """
        with self._lock:
            files = self.files
            count = 0
            while count < len(doomed) and count < len(files) - 1 and files[count] is doomed[count]:
                count += 1
            gone, self.files = files[:count], files[count:]
        for mf in gone:
            mf.destroy()
        return gone

    def close(self) -> None:
        if self._preallocator is not None:
            self._preallocator.discard()
        for mf in self.files:
            mf.flush()
            mf.close()

    def destroy(self) -> None:
        """Delete every file (and the directory when it is left empty)."""
        if self._preallocator is not None:
            self._preallocator.discard()
        with self._lock:
            doomed, self.files = self.files, []
        for mf in doomed:
            mf.destroy()
        try:
            self.directory.rmdir()
        except OSError:
            pass
