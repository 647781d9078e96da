"""Quiver: our broker through our client (``broker_core.client``).

The parent starts our nameserver and broker (bench/servers.py) and passes their addresses
in the spec; the topic (8 queues) is created over the protocol.  Sends go through one
``Producer``; catch-up through a PushConsumer (offsets committed at its shutdown, which
is timed) and then a PullConsumer; latency through a PushConsumer.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from pathlib import Path
from typing import Any

from servers import create_topic, runtime_table  # bench/servers.py

from broker_core.remoting.busypoll import DEFAULT_BUSY_POLL_MICROS

from ..measure import (
    Latencies,
    Meter,
    catchup_result,
    catchup_timeout,
    loop,
    pace,
    settle_process,
    threads_loop,
)
from ..workload import (
    BATCH,
    BODY,
    CONSUME_BATCH,
    QUIVER_PULL_BATCH,
    QUIVER_QUEUES,
    SYNC_THREADS,
    WINDOW,
    Settings,
)


class Quiver:
    """Our broker through our client; the topic (8 queues) is created over the protocol."""

    creates_own_topic = False

    def __init__(self, spec: dict[str, Any]) -> None:
        self.namesrv = spec["namesrv"]
        self.broker = spec["broker"]
        self.name = spec.get("name", "")
        self.flush = spec.get("flush", "ASYNC_FLUSH")
        self.busy_poll = int(spec.get("busy_poll", DEFAULT_BUSY_POLL_MICROS))

    def describe(self) -> dict[str, Any]:
        """What the parent prints for Quiver (it starts our servers, so it knows the flush)."""
        return quiver_description(self.flush, self.busy_poll)

    def create(self) -> None:
        create_topic(self.broker, self.name, QUIVER_QUEUES)

    def delete(self, name: str) -> None:
        from broker_core.client.admin import AdminClient

        async def go() -> None:
            async with AdminClient(self.namesrv) as admin:
                await admin.delete_topic(name)

        asyncio.run(go())

    def producer(self) -> Any:
        """A started Producer whose route to the topic is known (first send retried)."""
        from broker_core.client.config import ClientConfig
        from broker_core.client.message import Message
        from broker_core.client.producer.producer import Producer

        config = ClientConfig(namesrv_addr=self.namesrv, busy_poll_micros=self.busy_poll)
        producer = Producer(f"PeersProducer_{self.name}", self.namesrv, config=config).start()
        for attempt in range(50):
            try:
                producer.send(Message(self.name, BODY))
                break
            except Exception:
                if attempt == 49:
                    raise
                time.sleep(0.1)
        return producer

    def sync(self, s: Settings) -> dict[str, Any]:
        from broker_core.client.message import Message

        producer = self.producer()
        try:
            return loop(s, lambda: producer.send(Message(self.name, BODY)) and 1)
        finally:
            producer.shutdown()

    def sync8(self, s: Settings) -> dict[str, Any]:
        from broker_core.client.message import Message

        producer = self.producer()  # one producer, sent to from every thread (Java's way)
        sent = itertools.count()  # every acknowledged send, warm-up included (next() is atomic)
        try:

            def send() -> int:
                producer.send(Message(self.name, BODY))
                next(sent)
                return 1

            syncs_before = int(runtime_table(self.broker)["fsyncCount"])
            started = time.perf_counter()
            result = threads_loop(s, SYNC_THREADS, lambda: send)
            elapsed = time.perf_counter() - started
            syncs = int(runtime_table(self.broker)["fsyncCount"]) - syncs_before
        finally:
            producer.shutdown()
        if self.flush == "SYNC_FLUSH" and syncs:
            # Group commit, over the whole run: how often the disk was synced, and how
            # many sends each sync answered (the disk's sustained sync rate bounds the first).
            sends = next(sent)
            per_sync = round(sends / syncs, 2)
            result["group_commit"] = {"syncs_per_s": round(syncs / elapsed), "sends_per_sync": per_sync}
        return result

    def batch(self, s: Settings) -> dict[str, Any]:
        from broker_core.client.message import Message

        producer = self.producer()
        try:
            batch = loop(
                s, lambda: producer.send_batch([Message(self.name, BODY) for _ in range(BATCH)]) and BATCH
            )
            windowed = self.send_async(producer, s)
            batches_windowed = self.send_async(producer, s, batch=BATCH)
        finally:
            producer.shutdown()
        modes = {"send_batch32": batch, "send_async256": windowed, "send_batch_async32x8": batches_windowed}
        best = max(modes, key=lambda mode: modes[mode]["msgs_per_s"])
        return {**modes[best], "best": best, "modes": modes}

    def send_async(self, producer: Any, s: Settings, batch: int = 1) -> dict[str, Any]:
        """``send_async`` keeping ``WINDOW`` sends outstanding from one thread; with ``batch``,
        ``send_batch_async`` keeping ``WINDOW // batch`` batches (the same messages) outstanding."""
        from broker_core.client.message import Message

        meter = Meter.of(s)
        window = max(1, WINDOW // batch)
        slots = threading.Semaphore(window)

        def done(future: Any) -> None:
            exc = future.exception()
            if exc is None:
                meter.acked(batch)
            else:
                meter.error(exc)
            slots.release()

        while meter.running() and meter.errors <= s.max_errors:
            if not slots.acquire(timeout=10):
                break
            try:
                if batch == 1:
                    future = producer.send_async(Message(self.name, BODY))
                else:
                    future = producer.send_batch_async([Message(self.name, BODY) for _ in range(batch)])
                future.add_done_callback(done)
            except Exception as exc:  # not even submitted
                meter.error(exc)
                slots.release()
        for _ in range(window):  # the last ones answered (bounded)
            if not slots.acquire(timeout=10):
                break
        return meter.result()

    def preload(self, count: int) -> float:
        """Store ``count`` messages with send_batch of 32 from 4 threads; msgs/s."""
        from broker_core.client.message import Message

        producer = self.producer()
        batches = [min(BATCH, count - start) for start in range(0, count, BATCH)]
        batches[0] -= 1  # the route warm-up sent one already
        lock = threading.Lock()
        errors: list[str] = []
        started = time.perf_counter()

        def worker() -> None:
            while not errors:
                with lock:
                    if not batches:
                        return
                    size = batches.pop()
                if size <= 0:
                    continue
                try:
                    producer.send_batch([Message(self.name, BODY) for _ in range(size)])
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=600)
        elapsed = time.perf_counter() - started
        producer.shutdown()
        if errors:
            raise RuntimeError(f"preload failed: {errors[0]}")
        return count / elapsed

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        preload = self.preload(s.count)
        settle_process(settle_pid)
        push = self.push_catchup(s)
        settle_process(settle_pid)
        pull = self.pull_catchup(s)
        return {**push, "preload_msgs_s": round(preload), "pull": pull}

    def push_catchup(self, s: Settings) -> dict[str, Any]:
        """A PushConsumer of a new group from the first offset until every message has
        reached the listener and its shutdown has committed the offsets."""
        from broker_core.client.consumer.push import ConsumeStatus, PushConsumer

        group = f"PeersPush_{self.name}"
        count = [0]
        lock = threading.Lock()
        all_in = threading.Event()

        def listener(msgs: list[Any]) -> ConsumeStatus:
            with lock:
                count[0] += len(msgs)
                if count[0] >= s.count:
                    all_in.set()
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            group,
            self.namesrv,
            consume_from_where="CONSUME_FROM_FIRST_OFFSET",
            consume_message_batch_max_size=QUIVER_PULL_BATCH,
        )
        consumer.subscribe(self.name, "*").register_listener(listener)
        started = time.perf_counter()
        consumer.start()
        all_in.wait(catchup_timeout(s))
        arrived = time.perf_counter() - started
        shutdown = threading.Thread(target=consumer.shutdown, daemon=True)
        shutdown.start()
        shutdown.join(30)
        elapsed = time.perf_counter() - started
        committed = self.committed(group)
        return catchup_result(
            count[0],
            s.count,
            elapsed,
            arrived_s=round(arrived, 3),
            shutdown_s=round(elapsed - arrived, 3),
            shutdown_hung=shutdown.is_alive(),
            committed=committed,
            acks="offsets committed (every 5 s and at shutdown)",
        )

    def pull_catchup(self, s: Settings) -> dict[str, Any]:
        """A LitePullConsumer (subscribe and poll, 500 at a time) of a new group from the first
        offset until every message was returned, then ``commit`` and shutdown."""
        from broker_core.client.consumer.common import ConsumeFromWhere
        from broker_core.client.consumer.litepull import LitePullConsumer

        group = f"PeersPull_{self.name}"
        consumer = LitePullConsumer(
            group,
            self.namesrv,
            consume_from_where=ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
            poll_batch_size=CONSUME_BATCH,
        )
        consumer.subscribe(self.name, "*")
        started = time.perf_counter()
        consumer.start()
        count = 0
        deadline = started + catchup_timeout(s)
        while count < s.count and time.perf_counter() < deadline:
            count += len(consumer.poll(1_000))
        consumer.commit()
        consumer.shutdown()
        elapsed = time.perf_counter() - started
        return catchup_result(count, s.count, elapsed, committed=self.committed(group))

    def committed(self, group: str) -> int:
        """The group's committed offsets of the topic, summed (every queue started at 0)."""
        from broker_core.client.admin import AdminClient

        async def go() -> int:
            async with AdminClient(self.namesrv) as admin:
                offsets = await admin.consumer_offsets(self.broker)
            return sum(offsets.get((self.name, group), {}).values())

        return asyncio.run(go())

    def latency(self, s: Settings) -> dict[str, Any]:
        from broker_core.client.consumer.push import ConsumeStatus, PushConsumer
        from broker_core.client.message import Message

        def listener(msgs: list[Any]) -> ConsumeStatus:
            for msg in msgs:
                lat.got(msg.body)
            return ConsumeStatus.CONSUME_SUCCESS

        consumer = PushConsumer(
            f"PeersLatency_{self.name}",
            self.namesrv,
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            consume_message_batch_max_size=QUIVER_PULL_BATCH,
        )
        lat = Latencies(s)
        consumer.subscribe(self.name, "*").register_listener(listener)
        producer = self.producer()  # its route warm-up message is stored before the consumer starts
        consumer.start()
        try:
            sent, errors, first = pace(lat, lambda body: producer.send(Message(self.name, body)))
            lat.wait_all(sent)
            return lat.result(sent, errors, first)
        finally:
            producer.shutdown()
            threading.Thread(target=consumer.shutdown, daemon=True).start()
            time.sleep(0.2)


def quiver_source() -> str:
    """Where this process's ``broker_core`` comes from and, in a git checkout, its commit and
    whether ``broker_core/`` has uncommitted changes (the figures are that code's)."""
    import subprocess

    import broker_core

    root = Path(broker_core.__file__).resolve().parent.parent

    def git(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10)

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "broker_core")
    except (OSError, subprocess.SubprocessError):
        return f"{root} (git not available)"
    if head.returncode != 0:
        return f"{root} (not a git checkout)"
    state = "with uncommitted changes in broker_core/" if dirty.stdout.strip() else "clean broker_core/"
    return f"{root} at commit {head.stdout.strip()}, {state}"


def quiver_description(flush: str, busy_poll: int = DEFAULT_BUSY_POLL_MICROS) -> dict[str, Any]:
    if flush == "SYNC_FLUSH":
        what = "a send is answered after its record is fsync'd (group commit across concurrent writers)"
    else:
        what = (
            "a send is answered once its record is in the commit log's mmap (page cache); the log "
            "is msync'd every 500 ms (flushIntervalCommitLog), so an OS crash can lose the last ~0.5 s"
        )
    return {
        "server": f"quiver broker + nameserver (python -m broker_core), fresh store; code: {quiver_source()}",
        "durability": f"{flush}: {what}; consumer offsets committed to the broker every 5 s and at shutdown",
        "client": f"broker_core.client; {busy_poll_description(busy_poll)}",
    }


def busy_poll_description(busy_poll: int) -> str:
    """What ``--quiver-busy-poll`` chose, in words."""
    if busy_poll == 0:
        return "no polling before sleeping (broker serverBusyPollMicros and producer busy_poll_micros 0)"
    shipped = ", as shipped" if busy_poll == DEFAULT_BUSY_POLL_MICROS else ""
    return (
        f"a wait polls up to {busy_poll} µs before sleeping (broker serverBusyPollMicros and producer "
        f"busy_poll_micros{shipped})"
    )
