"""The consume threads of a push consumer: RocketMQ's consumeThreadMin / consumeThreadMax pool.

A push consumer hands every pulled batch to its listener on one of these threads.  It
could be a ``concurrent.futures.ThreadPoolExecutor``, but that builds a Future (a
Condition and an RLock) for each task, and a consumer catching up hands over tens of
thousands of tasks a second whose results nobody reads: a third of the consumer's time
went there.  Here a task is a tuple on a ``queue.SimpleQueue`` (a C queue), and a
worker that finds more tasks waiting takes them without a thread switch.

``min_threads`` start with the pool; more, up to ``max_threads``, start while more tasks
wait than threads are idle.  A task that raises is logged; the thread goes on.

A thread that is woken for a task then waits for the GIL, which the submitting thread
(the consumer's event loop) keeps until it next blocks: measured here, a woken thread
starts 11 µs after the hand-over when the submitter then sleeps, and 72 µs after it when
the submitter stays busy 60 µs more.  A submitter for whom the task comes first (the
newest message, that a listener is waiting for) calls ``expect_taken`` before submitting
and ``wait_taken`` after: it waits, without the GIL and for at most a moment, until an
idle thread has taken the task.

Thread-safety: ``submit`` from any thread; ``expect_taken`` and ``wait_taken`` from one
thread at a time; ``shutdown`` once.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_STOP = None  # the task that tells one worker to exit

HAND_OVER_WAIT_S = 200e-6
"""The longest ``wait_taken`` a push consumer uses: about five times what an idle consume
thread here takes to wake and start (about 40 µs)."""


class ConsumeWorkers:
    """A fixed-then-growing set of threads running ``fn(*args)`` tasks in submission order."""

    def __init__(self, min_threads: int, max_threads: int, name: str) -> None:
        if min_threads < 1 or max_threads < min_threads:
            raise ValueError(f"need 1 <= min_threads <= max_threads, got {min_threads} and {max_threads}")
        self.min_threads = min_threads
        self.max_threads = max_threads
        self.name = name
        self._tasks: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._idle = 0  # workers blocked waiting for a task (read without the lock in submit)
        self._lock = threading.Lock()
        self._closed = False
        # Released by an idle worker as it takes a task while a submitter expects it.
        self._taken = threading.Semaphore(0)
        self._expecting = False
        for _ in range(min_threads):
            self._spawn()

    @property
    def thread_count(self) -> int:
        return len(self._threads)

    def backlog(self) -> int:
        """Tasks submitted and not yet taken by a worker (approximate)."""
        return self._tasks.qsize()

    def submit(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on a worker.  Raises RuntimeError after ``shutdown``."""
        if self._closed:
            raise RuntimeError(f"consume pool {self.name} is shut down")
        self._tasks.put((fn, args))
        if len(self._threads) < self.max_threads and self._tasks.qsize() > self._idle:
            with self._lock:
                if not self._closed and len(self._threads) < self.max_threads:
                    self._spawn()

    def expect_taken(self) -> bool:
        """Before a submit whose task should start first: whether a worker is idle to take
        it (then call ``wait_taken`` after the submit)."""
        while self._taken.acquire(blocking=False):  # a take nobody waited for (at most one per worker)
            pass
        if not self._idle:
            return False
        self._expecting = True
        return True

    def wait_taken(self, timeout_s: float) -> bool:
        """Wait, without holding the GIL, until an idle worker has taken a task submitted
        since ``expect_taken``; False when none did within ``timeout_s`` seconds."""
        taken = self._taken.acquire(timeout=timeout_s)
        self._expecting = False
        return taken

    def _spawn(self) -> None:
        thread = threading.Thread(
            target=self._work, name=f"{self.name}-{len(self._threads) + 1}", daemon=True
        )
        self._threads.append(thread)
        thread.start()

    def _work(self) -> None:
        tasks = self._tasks
        while True:
            try:
                task = tasks.get_nowait()
            except queue.Empty:
                with self._lock:
                    self._idle += 1
                try:
                    task = tasks.get()
                finally:
                    with self._lock:
                        self._idle -= 1
                if self._expecting:
                    self._expecting = False
                    self._taken.release()
            if task is _STOP:
                return
            fn, args = task
            try:
                fn(*args)
            except Exception:
                log.exception("consume task %s failed", getattr(fn, "__qualname__", fn))

    def shutdown(self, wait: bool = True) -> None:
        """Take no new tasks; the workers finish the submitted ones, then exit."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            threads = list(self._threads)
        for _ in threads:
            self._tasks.put(_STOP)
        if wait:
            for thread in threads:
                if thread is not threading.current_thread():
                    thread.join()
