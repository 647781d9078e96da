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

``FlushLogicsService`` flushes consume queues and index files every
``flush_interval_consume_queue`` ms and then records in the checkpoint how far they (and
the commit log) are durable; it also runs the store's periodic disk-space check.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

log = logging.getLogger(__name__)

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
    ) -> None:
        self._flush = flush
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
        with self._lock:
            self._async_requests.append((end_offset, future, loop))
        if not self._wakeup.is_set():  # a set() is a syscall; one pending wakeup is enough
            self._wakeup.set()
        return future

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
        self._wakeup.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None


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
