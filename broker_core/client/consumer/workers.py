"""The consume threads of a push consumer: RocketMQ's consumeThreadMin / consumeThreadMax pool.

A push consumer hands every pulled batch to its listener on one of these threads.  It
could be a ``concurrent.futures.ThreadPoolExecutor``, but that builds a Future (a
Condition and an RLock) for each task, and a consumer catching up hands over tens of
thousands of tasks a second whose results nobody reads: a third of the consumer's time
went there.  Here a task is a tuple on a ``queue.SimpleQueue`` (a C queue), and a
worker that finds more tasks waiting takes them without a thread switch.

``min_threads`` start with the pool; more, up to ``max_threads``, start while more tasks
wait than threads are idle.  A task that raises is logged; the thread goes on.

Thread-safety: ``submit`` from any thread; ``shutdown`` once.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

_STOP = None  # the task that tells one worker to exit


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
