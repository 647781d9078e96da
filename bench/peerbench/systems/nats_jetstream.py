"""NATS JetStream through nats-py (asyncio, on uvloop as our client is): a file-storage stream.

Each scenario runs in one event loop that connects, creates the stream, runs and deletes
it (``creates_own_topic``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import version
from typing import Any

from ..measure import (
    Latencies,
    Meter,
    aloop,
    apace,
    atasks_loop,
    catchup_result,
    catchup_timeout,
    settle_process,
)
from ..workload import ADDRS, BODY, CONSUME_BATCH, SYNC_THREADS, WINDOW, Settings, Unavailable


class Nats:
    """NATS JetStream through nats-py (asyncio, on uvloop as our client is)."""

    creates_own_topic = True  # in the scenario's own event loop

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            import nats
            import nats.js.api
        except ImportError as exc:
            raise Unavailable(f"nats-py not installed: {exc}") from None
        self.nats = nats
        self.api = nats.js.api
        self.name = spec.get("name", "")
        self.nc: Any = None
        self.js: Any = None

    def run(self, coro: Awaitable[dict[str, Any]]) -> dict[str, Any]:
        import uvloop

        async def connected() -> dict[str, Any]:
            host, port = ADDRS["nats"]

            async def quiet(exc: Exception) -> None:
                """nats-py's default error callback logs a traceback per failed attempt."""

            try:
                # max_reconnect_attempts=0 would mean "for ever": one retry, then NoServersError.
                self.nc = await asyncio.wait_for(
                    self.nats.connect(
                        f"nats://{host}:{port}",
                        connect_timeout=3,
                        allow_reconnect=False,
                        max_reconnect_attempts=1,
                        reconnect_time_wait=0.2,
                        error_cb=quiet,
                    ),
                    15,
                )
            except Exception as exc:  # NoServersError after a refused connection
                if asyncio.iscoroutine(coro):
                    coro.close()  # never to run
                raise Unavailable(f"not running: {type(exc).__name__}: {exc}") from None
            self.js = self.nc.jetstream(publish_async_max_pending=WINDOW)
            try:
                return await coro
            finally:
                await self.nc.close()

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(connected())

    def create(self) -> None:
        """The stream, in an event loop of its own (a scenario creates it inside its loop)."""

        async def go() -> dict[str, Any]:
            await self.add_stream()
            return {}

        self.run(go())

    async def add_stream(self) -> None:
        """The scenario's stream: file storage, 1 replica, limits retention."""
        api = self.api
        await self.js.add_stream(
            api.StreamConfig(
                name=self.name,
                subjects=[self.name],
                storage=api.StorageType.FILE,
                num_replicas=1,
                retention=api.RetentionPolicy.LIMITS,
            )
        )

    async def drop(self, name: str) -> None:
        try:
            await self.js.delete_stream(name)
        except self.nats.js.errors.NotFoundError:
            pass

    def describe(self) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            info = await self.js.account_info()
            v = self.nc.connected_server_version
            return {
                "server": f"nats-server {v.major}.{v.minor}.{v.patch}",
                "durability": (
                    "JetStream stream with file storage, 1 replica: the PubAck comes once the message "
                    "is written to the stream's files, without an fsync; the server fsyncs at its "
                    "sync_interval (default 2 min), so an OS crash can lose acknowledged messages"
                ),
                "client": f"nats-py {version('nats-py')}",
                "account_streams": info.streams,
            }

        return self.run(go())

    def delete(self, name: str) -> None:
        async def go() -> dict[str, Any]:
            await self.drop(name)
            return {}

        self.run(go())

    def scenario(self, body: Callable[[], Awaitable[dict[str, Any]]]) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            await self.add_stream()
            try:
                return await body()
            finally:
                await self.drop(self.name)

        return self.run(go())

    def sync(self, s: Settings) -> dict[str, Any]:
        async def publish() -> int:
            await self.js.publish(self.name, BODY)
            return 1

        return self.scenario(lambda: aloop(s, publish))

    def sync8(self, s: Settings) -> dict[str, Any]:
        async def publish() -> int:
            await self.js.publish(self.name, BODY)
            return 1

        # nats-py is asyncio-only: eight publishers awaiting their PubAcks on one loop.
        return self.scenario(lambda: atasks_loop(s, SYNC_THREADS, publish))

    async def publish_window(self, meter: Meter | None, count: int | None) -> float:
        """``publish_async`` with up to ``WINDOW`` PubAcks outstanding, until the meter's
        window ends or ``count`` were sent; returns msgs/s."""
        sent = 0
        started = time.perf_counter()

        def done(future: asyncio.Future[Any]) -> None:
            if meter is None:
                return
            if future.cancelled() or future.exception() is not None:
                meter.error(future.exception() or RuntimeError("cancelled"))
            else:
                meter.acked(1)

        while (meter is None or meter.running()) and (count is None or sent < count):
            future = await self.js.publish_async(self.name, BODY)
            future.add_done_callback(done)
            sent += 1
        await asyncio.wait_for(self.js.publish_async_completed(), 30)
        return sent / (time.perf_counter() - started)

    def batch(self, s: Settings) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            meter = Meter.of(s)
            await self.publish_window(meter, None)
            return meter.result()

        return self.scenario(go)

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            api = self.api
            preload = await self.publish_window(None, s.count)
            await asyncio.to_thread(settle_process, settle_pid)
            count = 0
            started = time.perf_counter()
            config = api.ConsumerConfig(
                durable_name="peers", ack_policy=api.AckPolicy.ALL, deliver_policy=api.DeliverPolicy.ALL
            )
            sub = await self.js.pull_subscribe(self.name, durable="peers", stream=self.name, config=config)
            deadline = started + catchup_timeout(s)
            while count < s.count and time.perf_counter() < deadline:
                try:
                    msgs = await sub.fetch(CONSUME_BATCH, timeout=5)
                except TimeoutError:  # nats.errors.TimeoutError too
                    continue
                count += len(msgs)
                if count >= s.count:
                    await msgs[-1].ack_sync()  # the last ack, confirmed by the server
                else:
                    await msgs[-1].ack()  # AckAll: acknowledges the whole batch
            elapsed = time.perf_counter() - started
            info = await self.js.consumer_info(self.name, "peers")
            await sub.unsubscribe()
            return catchup_result(
                count,
                s.count,
                elapsed,
                preload_msgs_s=round(preload),
                unacked=info.num_ack_pending,
                ack_floor=info.ack_floor.stream_seq if info.ack_floor else None,
                acks="AckAll policy: each fetched batch's last message acked",
            )

        return self.scenario(go)

    def latency(self, s: Settings) -> dict[str, Any]:
        async def go() -> dict[str, Any]:
            api = self.api
            config = api.ConsumerConfig(
                durable_name="peers", ack_policy=api.AckPolicy.ALL, deliver_policy=api.DeliverPolicy.NEW
            )
            sub = await self.js.pull_subscribe(self.name, durable="peers", stream=self.name, config=config)
            stop = asyncio.Event()
            lat = Latencies(s)

            async def consume() -> None:
                while not stop.is_set():
                    try:
                        msgs = await sub.fetch(CONSUME_BATCH, timeout=0.5)
                    except TimeoutError:
                        continue
                    for msg in msgs:
                        lat.got(msg.data)
                    await msgs[-1].ack()

            task = asyncio.create_task(consume())

            async def publish(body: bytes) -> None:
                await self.js.publish(self.name, body)

            sent, errors, first = await apace(lat, publish)
            for _ in range(300):  # up to 3 s for the last ones
                if lat.received >= sent:
                    break
                await asyncio.sleep(0.01)
            stop.set()
            await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 5)
            await sub.unsubscribe()
            return lat.result(sent, errors, first)

        return self.scenario(go)
