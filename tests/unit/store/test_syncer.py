"""SYNC_FLUSH group commit through the compiled msync worker (``_speedups.Syncer``, used by
``flush.LoopGroupCommit``): the worker itself on real mappings, and a store's asyncio
writers served by it (the flush thread, its twin, is what ``QUIVER_PURE_PYTHON`` runs)."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import mmap
import select
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker_core.speedups import pure_python_requested
from broker_core.store import flush
from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore

from .conftest import ORDERS, Clock, message, read_queue, tiny_config

speedups = pytest.importorskip("broker_core._speedups")
Syncer = speedups.Syncer


def test_the_store_uses_the_worker_unless_switched_off() -> None:
    # A silent fallback would leave the store tests below exercising the thread only.
    assert flush.Syncer is (None if pure_python_requested() else Syncer)


@pytest.fixture
def mapping(tmp_path: Path) -> Iterator[tuple[mmap.mmap, int]]:
    """A shared 1 MiB file mapping and its address."""
    with open(tmp_path / "file", "w+b") as f:
        f.truncate(1 << 20)
        mm = mmap.mmap(f.fileno(), 1 << 20)
    anchor = ctypes.c_char.from_buffer(mm)
    address = ctypes.addressof(anchor)
    del anchor
    yield mm, address
    mm.close()


def finished(syncer: object, timeout: float = 10.0) -> int | None:
    """Wait for the worker's eventfd, as the loop does, and collect the job."""
    readable, _, _ = select.select([syncer.fileno()], [], [], timeout)  # type: ignore[attr-defined]
    assert readable, "the worker did not finish its job"
    return syncer.collect()  # type: ignore[attr-defined,no-any-return]


def test_it_syncs_ranges_and_signals_the_eventfd(mapping: tuple[mmap.mmap, int]) -> None:
    mm, address = mapping
    syncer = Syncer()
    try:
        assert not syncer.busy and syncer.collect() is None  # nothing done yet: no result
        mm[:5000] = b"x" * 5000
        syncer.submit([(address, 4096), (address + 4096, 904)])
        assert syncer.busy
        assert finished(syncer) == 0
        assert not syncer.busy and syncer.collect() is None  # one job, one result
        mm[5000:6000] = b"y" * 1000
        syncer.submit([(address + 4096, 6000 - 4096)])  # free again: a second job
        assert finished(syncer) == 0
    finally:
        syncer.close()


def test_it_reports_the_errno_of_a_range_that_cannot_be_synced(mapping: tuple[mmap.mmap, int]) -> None:
    _mm, address = mapping
    syncer = Syncer()
    try:
        syncer.submit([(address + 1, 4096)])  # msync needs a page-aligned start
        assert finished(syncer) == errno.EINVAL
        syncer.submit([(address, 4096), (8 * mmap.PAGESIZE, 4096)])  # nothing mapped at page 8
        assert finished(syncer) == errno.ENOMEM
    finally:
        syncer.close()


def test_it_refuses_a_second_job_bad_arguments_and_work_after_close(mapping: tuple[mmap.mmap, int]) -> None:
    _mm, address = mapping
    syncer = Syncer()
    syncer.submit([(address, 4096)])
    with pytest.raises(RuntimeError, match="busy"):
        syncer.submit([(address, 4096)])
    assert finished(syncer) == 0
    with pytest.raises(ValueError, match="at most 16"):
        syncer.submit([(address, 4096)] * 17)
    for bad in ([(address,)], [address], ((address, 4096),), [(address, -1)], [("a", 1)]):
        with pytest.raises((TypeError, OverflowError)):
            syncer.submit(bad)
    assert not syncer.busy  # a refused job leaves it free
    with pytest.raises(TypeError):
        Syncer(1)
    syncer.close()
    syncer.close()  # twice is fine
    with pytest.raises(RuntimeError, match="closed"):
        syncer.submit([(address, 4096)])
    assert syncer.fileno() >= 0  # the eventfd outlives the thread, for a loop to unregister


def test_close_lets_the_job_in_hand_finish(mapping: tuple[mmap.mmap, int]) -> None:
    mm, address = mapping
    mm[: 1 << 20] = b"z" * (1 << 20)
    syncer = Syncer()
    syncer.submit([(address, 1 << 20)])
    syncer.close()  # joins the thread after its msync
    assert finished(syncer, timeout=0) == 0


def test_asyncio_writers_are_served_by_the_worker_and_durable_when_answered(tmp_path: Path) -> None:
    if flush.Syncer is None:
        pytest.skip("the compiled worker is switched off (QUIVER_PURE_PYTHON)")
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH")  # 64 KiB segments: they roll
    with MessageStore(config, clock_ms=Clock()) as store:

        async def writer(n: int) -> None:
            for i in range(40):
                result = await store.put_message_async(message(ORDERS, n % 4, b"w%02d-%03d" % (n, i) * 40))
                assert result.status is PutMessageStatus.PUT_OK
                assert store.commit_log.flushed_offset >= result.wrote_offset + result.wrote_bytes

        async def main() -> None:
            await asyncio.gather(*(writer(n) for n in range(16)))

        thread_fsyncs = store.flush_service.fsync_count
        asyncio.run(main())
        commit = store.flush_service._loop_commit
        assert commit is not None and commit._loop is not None
        assert len(store.commit_log.queue.files) > 1  # jobs spanned segment rolls
        assert store.flush_service.fsync_count > thread_fsyncs
        assert store.flush_service.flushed_offset >= store.commit_log.max_offset
        assert sum(len(read_queue(store, ORDERS, q)) for q in range(4)) == 16 * 40

        # A second event loop, once the first is closed, is served the same way.
        async def one() -> PutMessageStatus:
            return (await store.put_message_async(message(ORDERS, 0, b"second loop"))).status

        assert asyncio.run(one()) is PutMessageStatus.PUT_OK
        assert store.commit_log.flushed_offset == store.commit_log.max_offset
        assert store.check() == []


def test_waiters_on_a_second_live_loop_go_to_the_flush_thread(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore(config, clock_ms=Clock()) as store:
        first = asyncio.new_event_loop()
        try:

            async def put(body: bytes) -> PutMessageStatus:
                return (await store.put_message_async(message(ORDERS, 0, body))).status

            assert first.run_until_complete(put(b"on the first loop")) is PutMessageStatus.PUT_OK
            assert asyncio.run(put(b"on another loop")) is PutMessageStatus.PUT_OK
            assert store.commit_log.flushed_offset == store.commit_log.max_offset
            assert first.run_until_complete(put(b"first loop again")) is PutMessageStatus.PUT_OK
        finally:
            first.close()
        assert [m.body for m in read_queue(store, ORDERS, 0)] == [
            b"on the first loop",
            b"on another loop",
            b"first loop again",
        ]
