"""Flushing: the commit log (async or group commit) and the derived files + checkpoint.

ASYNC_FLUSH: ``FlushCommitLogService`` fsyncs the commit log every
``flush_interval_commit_log`` ms; a put is acknowledged once it is in the page cache.

SYNC_FLUSH (group commit): a put registers "tell me when offset X is durable" and waits.
The flush thread takes every request that has arrived, runs one ``fdatasync`` covering
all of them, and resolves them together, so N concurrent writers share one fsync instead
of queueing for N.  It waits up to half a millisecond for about as many writers as the
last group had, so groups stay large when writers return one by one.  A waiter whose
fsync has not happened within ``sync_flush_timeout``
stops waiting and reports FLUSH_DISK_TIMEOUT (its record stays in the log).

Waiters on an event loop (the broker's connections) are served, where the compiled
module is built, by ``LoopGroupCommit``: a C worker thread msyncs without the GIL, so the
disk syncs one group while the loop appends the next (the Python thread could start its
fsync only once the loop went idle).  The flush thread stays the twin for every other
waiter, for ``QUIVER_PURE_PYTHON`` and where the worker fails.

``FlushLogicsService`` flushes consume queues and index files every
``flush_interval_consume_queue`` ms and then records in the checkpoint how far they (and
the commit log) are durable; it also runs the store's periodic disk-space check.
"""

from __future__ import annotations

import asyncio
import logging
import select
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from broker_core.speedups import compiled

log = logging.getLogger(__name__)

# The compiled msync worker (``_syncer.c``), or None: not built, pure Python asked, not Linux.
Syncer: Any = getattr(compiled, "Syncer", None)

# What a worker's sync is made of: (file, address, length, position) per file, oldest first,
# and the log offset durable once they are synced (``MappedFileQueue.sync_ranges``).
SyncRanges = tuple[list[tuple[Any, int, int, int]], int]

# Longest a group commit waits for more writers to join (an fsync here takes ~0.3-0.5 ms).
GROUP_COMMIT_WINDOW_SECONDS = 0.0005
GROUP_COMMIT_POLL_SECONDS = 0.00005


class FlushCommitLogService:
    """Flushes the commit log: on a timer (async) or on demand in groups (sync)."""

    def __init__(
        self,
        flush: Callable[[], int],
        *,
        sync: bool,
        interval_ms: int,
        housekeeping: Callable[[], None] = lambda: None,
        sync_ranges: Callable[[], SyncRanges] | None = None,
    ) -> None:
        self._flush = flush
        # SYNC_FLUSH with the compiled worker: asyncio waiters go to a LoopGroupCommit,
        # made at the first one (a store no loop writes to starts no worker thread).
        self._sync_ranges = sync_ranges if sync and Syncer is not None else None
        self._loop_commit: LoopGroupCommit | None = None
        # Cheap upkeep run after each flush (preparing the next segment), off the hot path.
        self._housekeeping = housekeeping
        self.sync = sync
        self._interval = interval_ms / 1000.0
        self._lock = threading.Lock()
        self._requests: list[tuple[int, Future[bool]]] = []
        # asyncio waiters, resolved with one thread-safe callback per loop per flush.
        self._async_requests: list[tuple[int, asyncio.Future[bool], asyncio.AbstractEventLoop]] = []
        self._wakeup = threading.Event()
        self._stopping = False
        self._thread: threading.Thread | None = None
        self.flushed_offset = 0
        self.fsync_count = 0
        self._last_group = 0

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="flush-commitlog", daemon=True)
        self._thread.start()

    def request(self, end_offset: int) -> Future[bool]:
        """A future that resolves to True once the log is durable up to ``end_offset``."""
        future: Future[bool] = Future()
        if end_offset <= self.flushed_offset:
            future.set_result(True)
            return future
        with self._lock:
            self._requests.append((end_offset, future))
        if not self._wakeup.is_set():  # a set() is a syscall; one pending wakeup is enough
            self._wakeup.set()
        return future

    def request_async(self, end_offset: int, loop: asyncio.AbstractEventLoop) -> asyncio.Future[bool]:
        """Like ``request``, for a coroutine on ``loop`` (resolved on that loop)."""
        future: asyncio.Future[bool] = loop.create_future()
        if end_offset <= self.flushed_offset:
            future.set_result(True)
            return future
        if self._sync_ranges is not None and not self._stopping:
            commit = self._loop_commit
            if commit is None:
                commit = self._loop_commit = LoopGroupCommit(self, self._sync_ranges)
            if commit.serves(loop):
                commit.wait(end_offset, future)
                return future
        self.hand_over([(end_offset, future)], loop)
        return future

    def hand_over(
        self, waiters: list[tuple[int, asyncio.Future[bool]]], loop: asyncio.AbstractEventLoop
    ) -> None:
        """Have the flush thread serve these waiters on ``loop`` (resolved there, in bulk)."""
        with self._lock:
            self._async_requests.extend((end, future, loop) for end, future in waiters)
        if not self._wakeup.is_set():  # a set() is a syscall; one pending wakeup is enough
            self._wakeup.set()

    def note_synced(self, offset: int) -> None:
        """A sync made outside the flush thread (``LoopGroupCommit``) reached ``offset``."""
        if offset > self.flushed_offset:
            self.flushed_offset = offset
        self.fsync_count += 1

    def _run(self) -> None:
        while not self._stopping:
            self._wakeup.wait(self._interval)
            self._wakeup.clear()
            if self.sync:
                self._gather()
            self._flush_once()
            try:
                self._housekeeping()
            except Exception:  # preparing the next file is optional; flushing is not
                log.exception("flush-thread housekeeping failed")
        self._flush_once()

    def _gather(self) -> None:
        """Give writers woken by the last fsync a moment to queue their next requests.

        After an fsync, its waiters come back one GIL handoff at a time; flushing as soon
        as the first arrives would split them into many small groups.  So wait (up to
        GROUP_COMMIT_WINDOW_SECONDS) until about as many requests are pending as the last
        group had.  A single writer never waits: its group size is one.
        """
        expected = self._last_group
        if expected <= 1:
            return
        deadline = time.monotonic() + GROUP_COMMIT_WINDOW_SECONDS
        while len(self._requests) + len(self._async_requests) < expected and time.monotonic() < deadline:
            time.sleep(GROUP_COMMIT_POLL_SECONDS)

    def _flush_once(self) -> None:
        with self._lock:
            requests, self._requests = self._requests, []
            async_requests, self._async_requests = self._async_requests, []
        if requests or async_requests:
            self._last_group = len(requests) + len(async_requests)
        try:
            self.flushed_offset = self._flush()
            self.fsync_count += 1
            ok = True
        except OSError as exc:
            log.error("commit-log flush failed: %s", exc)
            ok = False
        flushed = self.flushed_offset if ok else -1
        pending: list[tuple[int, Future[bool]]] = []
        for end, future in requests:
            if end <= flushed or not ok:
                if future.set_running_or_notify_cancel():  # False: the waiter gave up
                    future.set_result(ok)
            else:  # appended after the flush took its position: next round
                pending.append((end, future))
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[int, asyncio.Future[bool]]]] = {}
        pending_async = []
        for end, afuture, loop in async_requests:
            if end <= flushed or not ok:
                by_loop.setdefault(loop, []).append((end, afuture))
            else:
                pending_async.append((end, afuture, loop))
        for loop, waiters in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve_all, waiters, ok)
            except RuntimeError:  # the loop was closed meanwhile: nobody is waiting
                pass
        if pending or pending_async:
            with self._lock:
                self._requests[:0] = pending
                self._async_requests[:0] = pending_async
            self._wakeup.set()

    def stop(self) -> None:
        self._stopping = True
        if self._loop_commit is not None:  # its waiters left go to the thread's last flush
            self._loop_commit.close()
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


class LoopGroupCommit:
    """SYNC_FLUSH group commit for one event loop's waiters, synced by the C worker.

    The first waiter of a group submits everything unflushed to the worker at once; the
    ones that come while it syncs wait for the next job.  When the worker is done (its
    eventfd turns readable on the loop), the next job starts, and then the waiters the
    finished one covered are resolved: the disk syncs one group while the loop appends
    the next, and nothing waits for the GIL to start a sync.

    One loop at a time (the broker has one): waiters on another loop, and every waiter
    when a sync fails, go to the flush thread, which retries and reports as it always
    does.  Everything here runs on the loop's thread but ``close``.
    """

    def __init__(self, service: FlushCommitLogService, sync_ranges: Callable[[], SyncRanges]) -> None:
        self._service = service
        self._sync_ranges = sync_ranges
        self._syncer = Syncer()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiters: list[tuple[int, asyncio.Future[bool]]] = []
        self._job: list[tuple[Any, int, int, int]] = []
        self._job_reaches = 0
        self._closed = False

    def serves(self, loop: asyncio.AbstractEventLoop) -> bool:
        """Whether waiters on ``loop`` are served here (the first loop, or the next once
        the one before is closed)."""
        if loop is self._loop:
            return True
        if self._loop is not None and not self._loop.is_closed():
            return False
        if self._syncer.busy:  # a job for a closed loop: nobody awaits it, but let it end
            select.select([self._syncer.fileno()], [], [], 5.0)
            self._syncer.collect()
        self._waiters, self._job = [], []
        loop.add_reader(self._syncer.fileno(), self._on_synced)
        self._loop = loop
        return True

    def wait(self, end_offset: int, future: asyncio.Future[bool]) -> None:
        """Resolve ``future`` once the log is durable to ``end_offset``."""
        self._waiters.append((end_offset, future))
        if not self._syncer.busy:
            self._submit()

    def _submit(self) -> None:
        """Start a job for what is unflushed now (the worker is idle)."""
        if self._closed:
            self._hand_over()
            return
        ranges, reaches = self._sync_ranges()
        if not ranges:  # the flush thread synced it all, or is syncing it now
            done = self._take_covered(reaches)
            self._hand_over()  # what it is syncing (or a file closed under them): its call
            _resolve_all(done, True)
            return
        self._job, self._job_reaches = ranges, reaches
        self._syncer.submit([(address, length) for _file, address, length, _position in ranges])

    def _on_synced(self) -> None:
        error = self._syncer.collect()
        if error is None:
            return
        job, self._job = self._job, []
        if error:
            log.warning("commit-log sync by the worker failed (errno %d); the flush thread retries", error)
            self._hand_over()
            return
        for mapped_file, _address, _length, position in job:
            mapped_file.mark_flushed(position)
        self._service.note_synced(self._job_reaches)
        done = self._take_covered(self._job_reaches)
        if self._waiters:  # the next group syncs while this one's writers go on
            self._submit()
        _resolve_all(done, True)

    def _take_covered(self, reached: int) -> list[tuple[int, asyncio.Future[bool]]]:
        """Remove and return the waiters durable once the log is synced to ``reached``."""
        done = [(end, future) for end, future in self._waiters if end <= reached]
        if done:
            self._waiters = [(end, future) for end, future in self._waiters if end > reached]
        return done

    def _hand_over(self) -> None:
        waiters, self._waiters = self._waiters, []
        if waiters and self._loop is not None:
            self._service.hand_over(waiters, self._loop)

    def close(self) -> None:
        """Stop the worker (after its job) and give the waiters left to the flush thread.

        Called by the store's close, on any thread, once new waiters go to the flush
        thread (``FlushCommitLogService.stop``)."""
        self._closed = True
        self._syncer.close()
        self._hand_over()
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        try:
            if on_loop:
                loop.remove_reader(self._syncer.fileno())
            else:
                loop.call_soon_threadsafe(loop.remove_reader, self._syncer.fileno())
        except RuntimeError:  # the loop closed meanwhile: nothing to unregister
            pass


def _resolve_all(waiters: list[tuple[int, asyncio.Future[bool]]], ok: bool) -> None:
    for _end, future in waiters:
        if not future.done():
            future.set_result(ok)


class PeriodicService:
    """Runs ``task`` every ``interval_ms`` on its own thread, and once more at stop."""

    def __init__(self, name: str, task: Callable[[], None], interval_ms: int) -> None:
        self._name = name
        self._task = task
        self._interval = interval_ms / 1000.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self._run_task()

    def _run_task(self) -> None:
        try:
            self._task()
        except Exception:
            log.exception("%s failed", self._name)

    def stop(self, *, run_last: bool = True) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if run_last:
            self._run_task()
