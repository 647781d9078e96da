"""ClientInstance.submit: coroutines handed over from other threads run on the instance's
loop, results and errors reach their futures, a cancelled future cancels its coroutine,
and nothing is accepted after shutdown."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Iterator

import pytest

from broker_core.client.config import ClientConfig
from broker_core.client.instance import ClientInstance
from broker_core.errors import ClientError


@pytest.fixture
def instance() -> Iterator[ClientInstance]:
    config = ClientConfig(namesrv_addr="127.0.0.1:9", instance_name=f"submit-{threading.get_ident()}")
    inst = ClientInstance.acquire(config)
    yield inst
    inst.release()


def test_many_submits_from_many_threads_all_complete(instance: ClientInstance) -> None:
    loop_threads: set[int] = set()

    async def square(n: int) -> int:
        loop_threads.add(threading.get_ident())
        await asyncio.sleep(0)
        return n * n

    def submitter(base: int) -> list[int]:
        futures = [instance.submit(square(base + i)) for i in range(500)]
        return [f.result(5) for f in futures]

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(submitter, (0, 1000, 2000, 3000)))
    assert results == [[(b + i) ** 2 for i in range(500)] for b in (0, 1000, 2000, 3000)]
    assert len(loop_threads) == 1 and threading.get_ident() not in loop_threads


def test_errors_reach_the_future(instance: ClientInstance) -> None:
    async def boom() -> None:
        raise ClientError("no such thing")

    with pytest.raises(ClientError, match="no such thing"):
        instance.submit(boom()).result(5)


def test_cancelling_the_future_cancels_the_coroutine(instance: ClientInstance) -> None:
    started, cancelled = threading.Event(), threading.Event()

    async def forever() -> None:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    future = instance.submit(forever())
    assert started.wait(5)
    assert future.cancel()
    assert cancelled.wait(5)


def test_nothing_is_accepted_after_shutdown() -> None:
    inst = ClientInstance.acquire(ClientConfig(namesrv_addr="127.0.0.1:9", instance_name="submit-closed"))
    inst.release()

    async def never() -> None:
        raise AssertionError("ran after shutdown")

    with pytest.raises(ClientError, match="shut down"):
        inst.submit(never())
