"""The push consumer's consume threads: every task runs, the pool grows to its maximum
under load and not past it, a failing task does not stop its thread, shutdown drains, and
a submitter can wait until an idle thread has taken its task."""

from __future__ import annotations

import threading
import time

import pytest

from broker_core.client.consumer.workers import ConsumeWorkers


def test_every_task_runs_once() -> None:
    pool = ConsumeWorkers(2, 4, "t")
    seen: list[int] = []
    lock = threading.Lock()

    def task(n: int) -> None:
        with lock:
            seen.append(n)

    for n in range(2000):
        pool.submit(task, n)
    pool.shutdown(wait=True)
    assert sorted(seen) == list(range(2000))


def test_it_starts_min_threads_and_grows_to_max_only_while_all_are_busy() -> None:
    pool = ConsumeWorkers(1, 3, "t")
    assert pool.thread_count == 1
    release = threading.Event()
    running = threading.Semaphore(0)

    def blocker() -> None:
        running.release()
        release.wait(5)

    for _ in range(5):
        pool.submit(blocker)
    for _ in range(3):
        assert running.acquire(timeout=5)  # three run at once: the pool grew to its max
    assert pool.thread_count == 3
    assert not running.acquire(timeout=0.1)  # and not past it: two wait
    assert pool.backlog() == 2
    release.set()
    pool.shutdown(wait=True)
    assert pool.thread_count == 3


def test_a_failing_task_is_logged_and_the_thread_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    pool = ConsumeWorkers(1, 1, "t")
    done = threading.Event()

    def boom() -> None:
        raise RuntimeError("listener bug")

    pool.submit(boom)
    pool.submit(done.set)
    assert done.wait(5)
    pool.shutdown(wait=True)
    assert "listener bug" in caplog.text


def test_shutdown_runs_what_was_submitted_then_refuses_more() -> None:
    pool = ConsumeWorkers(2, 2, "t")
    gate = threading.Event()
    finished: list[int] = []

    def slow(n: int) -> None:
        gate.wait(5)
        finished.append(n)

    for n in range(6):
        pool.submit(slow, n)
    threading.Timer(0.05, gate.set).start()
    pool.shutdown(wait=True)
    assert sorted(finished) == list(range(6))
    with pytest.raises(RuntimeError, match="shut down"):
        pool.submit(slow, 7)


def idle_soon(pool: ConsumeWorkers) -> bool:
    """``expect_taken`` once the pool's threads have started and gone idle (bounded)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if pool.expect_taken():
            return True
        time.sleep(0.001)
    return False


def test_a_submitter_waits_until_an_idle_thread_has_taken_its_task() -> None:
    pool = ConsumeWorkers(1, 1, "t")
    ran_on: list[str] = []
    done = threading.Event()

    def task() -> None:
        ran_on.append(threading.current_thread().name)
        done.set()

    assert idle_soon(pool)
    pool.submit(task)
    assert pool.wait_taken(5.0)  # released by the thread as it took the task
    assert pool.backlog() == 0
    assert done.wait(5)
    assert ran_on == ["t-1"]
    pool.shutdown(wait=True)


def test_no_thread_idle_means_nothing_to_wait_for_and_old_takes_are_forgotten() -> None:
    pool = ConsumeWorkers(1, 1, "t")
    assert idle_soon(pool)
    first = threading.Event()
    pool.submit(first.set)  # taken while expected, but nobody waits for it
    assert first.wait(5)
    release = threading.Event()
    running = threading.Event()

    def blocker() -> None:
        running.set()
        release.wait(5)

    pool.submit(blocker)
    assert running.wait(5)
    assert not pool.expect_taken()  # the only thread is busy
    assert not pool.wait_taken(0.05)  # the first task's take does not count for this wait
    release.set()
    pool.shutdown(wait=True)


def test_bad_sizes_are_refused() -> None:
    with pytest.raises(ValueError):
        ConsumeWorkers(0, 2, "t")
    with pytest.raises(ValueError):
        ConsumeWorkers(3, 2, "t")
