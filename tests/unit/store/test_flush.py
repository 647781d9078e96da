"""Flushing the commit log (``broker_core.store.flush``): group commit under SYNC_FLUSH, a
timer under ASYNC_FLUSH."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from broker_core.store.results import PutMessageStatus
from broker_core.store.store import MessageStore

from .conftest import ORDERS, Clock, message, read_queue, tiny_config

WRITERS = 32
PUTS_EACH = 25


def test_it_shares_fsyncs_between_concurrent_sync_flush_writers(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore(config, clock_ms=Clock()) as store:
        start = threading.Barrier(WRITERS)
        statuses: list[PutMessageStatus] = []
        lock = threading.Lock()

        def writer(n: int) -> None:
            start.wait()
            for i in range(PUTS_EACH):
                result = store.put_message(message(ORDERS, n % 4, b"w%02d-%02d" % (n, i)))
                with lock:
                    statuses.append(result.status)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
        fsyncs_before = store.flush_service.fsync_count
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        fsyncs = store.flush_service.fsync_count - fsyncs_before
        puts = WRITERS * PUTS_EACH
        assert statuses == [PutMessageStatus.PUT_OK] * puts
        assert fsyncs < puts / 4, f"{fsyncs} fsyncs for {puts} puts: writers are not sharing them"
        assert store.commit_log.flushed_offset == store.commit_log.max_offset
        assert sum(len(read_queue(store, ORDERS, q)) for q in range(4)) == puts
        assert store.check() == []


def test_it_makes_a_sync_flush_put_durable_before_it_returns(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore(config, clock_ms=Clock()) as store:
        for i in range(20):
            result = store.put_message(message(body=b"m%d" % i))
            assert result.status is PutMessageStatus.PUT_OK
            assert store.commit_log.flushed_offset >= result.wrote_offset + result.wrote_bytes


def test_it_flushes_within_a_second_under_async_flush_without_making_puts_wait(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="ASYNC_FLUSH", flush_interval_commit_log=500)
    with MessageStore(config, clock_ms=Clock()) as store:
        slowest = 0.0
        for i in range(50):
            started = time.monotonic()
            result = store.put_message(message(body=b"m%d" % i))
            slowest = max(slowest, time.monotonic() - started)
            assert result.status is PutMessageStatus.PUT_OK and result.flush_future is None
        assert slowest < 0.1, f"an ASYNC_FLUSH put took {slowest * 1000:.0f} ms"
        end = store.commit_log.max_offset
        deadline = time.monotonic() + 1.5
        while store.commit_log.flushed_offset < end and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store.commit_log.flushed_offset >= end
        assert store.flush_service.flushed_offset >= end
        assert store.check() == []


def test_it_shares_fsyncs_between_concurrent_asyncio_writers(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH")
    with MessageStore(config, clock_ms=Clock()) as store:

        async def writer(n: int) -> list[PutMessageStatus]:
            statuses = []
            for i in range(PUTS_EACH):
                result = await store.put_message_async(message(ORDERS, n % 4, b"a%02d-%02d" % (n, i)))
                statuses.append(result.status)
                assert store.commit_log.flushed_offset >= result.wrote_offset + result.wrote_bytes
            return statuses

        async def main() -> list[list[PutMessageStatus]]:
            return await asyncio.gather(*(writer(n) for n in range(WRITERS)))

        fsyncs_before = store.flush_service.fsync_count
        results = asyncio.run(main())
        fsyncs = store.flush_service.fsync_count - fsyncs_before
        puts = WRITERS * PUTS_EACH
        assert [s for r in results for s in r] == [PutMessageStatus.PUT_OK] * puts
        assert fsyncs < puts / 4, f"{fsyncs} fsyncs for {puts} puts: writers are not sharing them"
        assert sum(len(read_queue(store, ORDERS, q)) for q in range(4)) == puts
        assert store.check() == []


def test_it_reports_flush_disk_timeout_to_an_asyncio_writer_and_keeps_the_message(tmp_path: Path) -> None:
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    with MessageStore(config, clock_ms=Clock()) as store:
        store.put_message(message(body=b"first"))  # creates the file whose flush we hold up
        flush_lock = store.commit_log.queue.files[0]._flush_lock

        async def main() -> tuple[PutMessageStatus, str, int]:
            with flush_lock:
                result = await store.put_message_async(message(body=b"late"))
            return result.status, result.remark, result.wrote_offset

        status, remark, offset = asyncio.run(main())
        assert status is PutMessageStatus.FLUSH_DISK_TIMEOUT
        assert "syncFlushTimeout" in remark
        stored = store.look_message_by_offset(offset)
        assert stored is not None and stored.body == b"late"
        # The flusher survived the abandoned waiter and goes on serving.
        assert store.put_message(message(body=b"after")).status is PutMessageStatus.PUT_OK


def test_when_durable_calls_back_with_the_result_or_its_flush_disk_timeout(tmp_path: Path) -> None:
    # The broker's SYNC_FLUSH answer path: callbacks on the loop, no coroutine.
    config = tiny_config(tmp_path, flush_disk_type="SYNC_FLUSH", sync_flush_timeout=200)
    with MessageStore(config, clock_ms=Clock()) as store:
        store.put_message(message(body=b"first"))  # creates the file whose flush we hold up
        flush_lock = store.commit_log.queue.files[0]._flush_lock

        async def answered(body: bytes) -> tuple[PutMessageStatus, str, int]:
            loop = asyncio.get_running_loop()
            done: asyncio.Future[tuple[PutMessageStatus, str, int]] = loop.create_future()
            result = store.append(message(body=body), waiter="async")
            assert result.async_flush is not None
            store.when_durable(result, lambda r: done.set_result((r.status, r.remark, r.wrote_offset)))
            return await done

        async def main() -> list[tuple[PutMessageStatus, str, int]]:
            durable = await answered(b"durable")
            with flush_lock:
                late = await answered(b"late")
            return [durable, late]

        (durable, _, offset), (late, remark, late_offset) = asyncio.run(main())
        assert durable is PutMessageStatus.PUT_OK
        assert store.commit_log.flushed_offset > offset
        assert late is PutMessageStatus.FLUSH_DISK_TIMEOUT and "syncFlushTimeout" in remark
        stored = store.look_message_by_offset(late_offset)
        assert stored is not None and stored.body == b"late"
