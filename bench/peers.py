"""Peers benchmark: one workload through Quiver, Redis Streams, NATS JetStream and RabbitMQ, in one run.

    python bench/peers.py [--quick] [--count N] [--only quiver,redis,nats,rabbitmq]
                          [--scenarios sync,batch,catchup,latency] [--quiver-flush ASYNC_FLUSH]

Why: the platform's notes compare Quiver with the brokers people would otherwise run.
Figures measured on other machines, other days, with other clients say little, so this
runs the same four scenarios through each system on this machine, one after the other,
each with its usual Python client, and prints the ratios of Quiver's figures to theirs.

Systems (every one on 127.0.0.1; a peer that refuses the connection is *skipped*, with the
reason, never failed):

* **quiver**: our nameserver and broker started here as ``python -m broker_core``
  processes on free ports (bench/servers.py, as bench/broker.py does), a store in a temp
  dir, each scenario's topic with 8 queues; our client (``broker_core.client``);
* **redis**: Redis Streams at :6379 through redis-py (with hiredis when installed);
* **nats**: NATS JetStream at :4222 through nats-py, a file-storage stream;
* **rabbitmq**: RabbitMQ at :5672 (guest/guest) through pika, a durable classic queue,
  persistent messages, publisher confirms.

Each system's durability settings are printed: they differ, and they explain much of the
spread (a server that answers before anything reaches the disk does less per message).

Scenarios (1 KiB bodies), each run for every system before the next scenario starts:

* ``sync``: one thread sends one message at a time and waits for its acknowledgement
  (Quiver ``Producer.send``, ``XADD``, ``js.publish`` awaiting the PubAck, ``basic_publish``
  on a confirming channel); msgs/s over a fixed window after a warm-up;
* ``batch``: the same with many messages per round trip: Quiver ``send_batch`` of 32 and
  ``send_async`` with 256 outstanding (both shown, the better one is the scenario's
  figure), a redis pipeline of 32 ``XADD``, ``js.publish_async`` with 256 PubAcks
  outstanding, pika's asynchronous confirms with 256 unconfirmed messages;
* ``catchup``: ``--count`` messages (200,000; ``--quick`` 10,000) are stored first
  (untimed, and the server is left to settle), then one consumer reads them all with
  acknowledgements, timed from creating the consumer until the last is acknowledged:
  Quiver PushConsumer (a new group from the first offset, listener batches of up to 32,
  the offsets committed at its shutdown, which is timed; also a PullConsumer polling
  500 at a time), ``XREADGROUP COUNT 500`` + one ``XACK`` per batch, a durable pull
  consumer fetching 500 with the AckAll policy (acking a batch's last message acks the
  batch), ``basic_consume`` with prefetch 1,000 and ``multiple=True`` acks every 500;
* ``latency``: a producer sends 2,000 msgs/s for 5 s (``--quick``: 1.5 s) after a
  0.5 s warm-up, one synchronous send at a time paced by a clock, each body starting
  with ``time.perf_counter_ns()``; a consumer in the same process records receive time
  minus send time: p50/p99/max in ms and how many of the sent messages arrived; beside
  them each send's own round trip (to its acknowledgement), and the send rate reached (a
  producer whose synchronous sends take over 0.5 ms falls behind: its messages go out
  later, their stamps taken as they go, so the latencies stay true).  Consumers: Quiver
  PushConsumer, ``XREADGROUP BLOCK`` on its own connection and thread, a pull consumer
  fetching on the same event loop, ``basic_consume`` on its own connection and thread.

Every system gets a fresh, uniquely named topic/stream/queue per scenario, deleted
afterwards (and once more at the end, in case a child died).  Each system runs each
scenario in a child process of this file (``--role peer SPEC``) with a hard timeout, so
clients never share a process.  Before each child the server is left to settle (its CPU
use drops).  The table ends with ratios (``quiver/redis 0.3x``: Quiver's figure over the
peer's; for latencies lower is better), and the last line of output is one JSON object of
every figure (null where a system was skipped or a scenario failed).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import socket
import struct
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from importlib.metadata import version
from pathlib import Path
from typing import Any

from servers import (  # bench/servers.py, beside this file (shared with bench/broker.py)
    Server,
    create_topic,
    percentile,
    process_cpu_seconds,
    run_script,
    settle,
    start_cluster,
)

SYSTEMS = ("quiver", "redis", "nats", "rabbitmq")
PEERS = SYSTEMS[1:]
SCENARIOS = ("sync", "batch", "catchup", "latency")
BODY_BYTES = 1024
BODY = b"q" * BODY_BYTES
STAMP = struct.Struct(">q")  # a latency message's first 8 bytes: time.perf_counter_ns() at send
PAD = b"q" * (BODY_BYTES - STAMP.size)
BATCH = 32  # Quiver send_batch, redis pipeline
WINDOW = 256  # acknowledgements outstanding: Quiver send_async, NATS publish_async, RabbitMQ confirms
CONSUME_BATCH = 500  # redis COUNT, NATS fetch, RabbitMQ multiple-ack, Quiver PullConsumer poll
PREFETCH = 1000  # RabbitMQ basic_qos
QUIVER_QUEUES = 8
QUIVER_PULL_BATCH = 32  # the broker sends at most 32 per pull (maxTransferCountOnMessageInMemory)
ADDRS = {"redis": ("127.0.0.1", 6379), "nats": ("127.0.0.1", 4222), "rabbitmq": ("127.0.0.1", 5672)}
SERVER_PROCESS = {"redis": "redis-server", "nats": "nats-server", "rabbitmq": "beam.smp"}
FLUSH_MODES = ("ASYNC_FLUSH", "SYNC_FLUSH")


@dataclass
class Settings:
    """Durations and sizes of one run."""

    warmup_s: float = 0.5
    measure_s: float = 3.0
    count: int = 200_000
    latency_rate: int = 2_000
    latency_warmup_s: float = 0.5
    latency_s: float = 5.0
    max_errors: int = 100  # a scenario stops after this many failed sends

    @classmethod
    def quick(cls) -> Settings:
        return cls(warmup_s=0.2, measure_s=1.0, count=10_000, latency_warmup_s=0.3, latency_s=1.5)


class Unavailable(Exception):
    """The system cannot be used here (not running, client not installed): it is skipped."""


# -- measuring ------------------------------------------------------------------------------


@dataclass
class Meter:
    """Acknowledged messages counted inside the measured window (after the warm-up).

    Thread-safe: acknowledgements may arrive on a client's own threads.
    """

    start: float
    end: float
    messages: int = 0
    errors: int = 0
    first_error: str = ""
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def of(cls, s: Settings) -> Meter:
        start = time.perf_counter() + s.warmup_s
        return cls(start, start + s.measure_s)

    def running(self) -> bool:
        return time.perf_counter() < self.end

    def acked(self, count: int) -> None:
        if self.start <= time.perf_counter() <= self.end:
            with self.lock:
                self.messages += count

    def error(self, exc: BaseException) -> None:
        with self.lock:
            self.errors += 1
            self.first_error = self.first_error or f"{type(exc).__name__}: {exc}"[:200]

    def result(self) -> dict[str, Any]:
        elapsed = self.end - self.start
        return {
            "msgs_per_s": round(self.messages / elapsed),
            "messages": self.messages,
            "elapsed_s": round(elapsed, 3),
            "errors": self.errors,
            "first_error": self.first_error,
        }


def loop(s: Settings, call: Callable[[], int]) -> dict[str, Any]:
    """Call ``call`` (returns how many messages it got acknowledged) until the window ends."""
    meter = Meter.of(s)
    while meter.running() and meter.errors <= s.max_errors:
        try:
            meter.acked(call())
        except Exception as exc:  # a client's send error: counted, shown
            meter.error(exc)
    return meter.result()


async def aloop(s: Settings, call: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """``loop`` for a coroutine function."""
    meter = Meter.of(s)
    while meter.running() and meter.errors <= s.max_errors:
        try:
            meter.acked(await call())
        except Exception as exc:
            meter.error(exc)
    return meter.result()


def catchup_result(count: int, expected: int, elapsed: float, **extra: Any) -> dict[str, Any]:
    return {
        "msgs_per_s": round(count / elapsed) if elapsed > 0 else 0,
        "messages": count,
        "expected": expected,
        "elapsed_s": round(elapsed, 3),
        "complete": count >= expected,
        **extra,
    }


def stamped() -> bytes:
    """A latency message's body: its send time, then padding to 1 KiB."""
    return STAMP.pack(time.perf_counter_ns()) + PAD


class Latencies:
    """Send-to-receive times of the messages sent inside the measured window (thread-safe)."""

    def __init__(self, s: Settings) -> None:
        self.warmup_ns = int(s.latency_warmup_s * 1e9)
        self.total = int(s.latency_rate * (s.latency_warmup_s + s.latency_s))
        self.rate = s.latency_rate
        self.values: list[float] = []
        self.send_values: list[float] = []  # each paced send's round trip (to its ack), ms
        self.received = 0
        self.foreign = 0
        self.lock = threading.Lock()
        self.begin()

    def begin(self) -> None:
        """The send phase starts now: message ``i`` is due ``i / rate`` seconds later."""
        self.begun_ns = time.perf_counter_ns()
        self.window_ns = self.begun_ns + self.warmup_ns
        self.ended_ns = 0

    def sent(self, started_ns: int) -> None:
        """A paced send started at ``started_ns`` was acknowledged just now."""
        if started_ns >= self.window_ns:
            self.send_values.append((time.perf_counter_ns() - started_ns) / 1e6)

    def end(self) -> None:
        """The send phase is over (the achieved send rate is taken over the phase)."""
        self.ended_ns = time.perf_counter_ns()

    def got(self, body: bytes) -> None:
        """A message arrived (a body not stamped during the send phase is counted apart)."""
        now = time.perf_counter_ns()
        (sent,) = STAMP.unpack_from(body)
        with self.lock:
            if not self.begun_ns <= sent <= now:
                self.foreign += 1  # e.g. a producer's route warm-up message
                return
            self.received += 1
            if sent >= self.window_ns:
                self.values.append((now - sent) / 1e6)

    def due(self, i: int) -> float:
        """When message ``i`` is due, perf_counter seconds."""
        return (self.begun_ns + i * 1e9 / self.rate) / 1e9

    def late(self) -> bool:
        """Past the send phase's bound (3x its planned length): a producer far too slow stops."""
        return time.perf_counter_ns() > self.begun_ns + 3 * self.total * 1e9 / self.rate

    def wait_all(self, sent: int, timeout_s: float = 3.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.received < sent and time.monotonic() < deadline:
            time.sleep(0.01)

    def result(self, sent: int, send_errors: int, first_error: str = "") -> dict[str, Any]:
        elapsed = (self.ended_ns or time.perf_counter_ns()) - self.begun_ns
        with self.lock:
            values = sorted(self.values)
            received = self.received
        sends = sorted(self.send_values)
        return {
            "p50_ms": round(percentile(values, 0.50), 3),
            "p99_ms": round(percentile(values, 0.99), 3),
            "max_ms": round(values[-1], 3) if values else None,
            "send_p50_ms": round(percentile(sends, 0.50), 3),
            "send_p99_ms": round(percentile(sends, 0.99), 3),
            "measured": len(values),
            "received": received,
            "sent": sent,
            "planned": self.total,
            "rate": self.rate,
            "achieved_rate": round(sent / (elapsed / 1e9)) if elapsed else 0,
            "send_errors": send_errors,
            "first_error": first_error,
            "unstamped_received": self.foreign,
        }


def pace(lat: Latencies, send: Callable[[bytes], object]) -> tuple[int, int, str]:
    """Send ``lat.total`` stamped messages, each at its due time (at once when behind)."""
    sent = errors = 0
    first_error = ""
    lat.begin()
    for i in range(lat.total):
        wait = lat.due(i) - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        elif lat.late():
            break
        started = time.perf_counter_ns()
        try:
            send(stamped())
            sent += 1
            lat.sent(started)
        except Exception as exc:
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"[:200]
    lat.end()
    return sent, errors, first_error


async def apace(lat: Latencies, send: Callable[[bytes], Awaitable[object]]) -> tuple[int, int, str]:
    """``pace`` for a coroutine function."""
    sent = errors = 0
    first_error = ""
    lat.begin()
    for i in range(lat.total):
        wait = lat.due(i) - time.perf_counter()
        if wait > 0:
            await asyncio.sleep(wait)
        elif lat.late():
            break
        started = time.perf_counter_ns()
        try:
            await send(stamped())
            sent += 1
            lat.sent(started)
        except Exception as exc:
            errors += 1
            first_error = first_error or f"{type(exc).__name__}: {exc}"[:200]
    lat.end()
    return sent, errors, first_error


# -- Quiver -----------------------------------------------------------------------------------


class Quiver:
    """Our broker through our client; the topic (8 queues) is created over the protocol."""

    def __init__(self, spec: dict[str, Any]) -> None:
        self.namesrv = spec["namesrv"]
        self.broker = spec["broker"]
        self.name = spec.get("name", "")

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
        from broker_core.client.message import Message
        from broker_core.client.producer.producer import Producer

        producer = Producer(f"PeersProducer_{self.name}", self.namesrv).start()
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
        """A PullConsumer (subscribe and poll, 500 at a time) of a new group from the first
        offset until every message was returned, then ``commit`` and shutdown."""
        from broker_core.client.consumer.pull import ConsumeFromWhere, PullConsumer

        group = f"PeersPull_{self.name}"
        consumer = PullConsumer(
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


# -- Redis Streams ------------------------------------------------------------------------------


class Redis:
    """Redis Streams through redis-py: XADD, XREADGROUP + XACK."""

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            import redis
        except ImportError as exc:
            raise Unavailable(f"redis-py not installed: {exc}") from None
        self.redis = redis
        self.name = spec.get("name", "")
        host, port = ADDRS["redis"]
        self.client = redis.Redis(host=host, port=port, socket_connect_timeout=3, socket_timeout=30)
        try:
            self.client.ping()
        except redis.ConnectionError as exc:
            raise Unavailable(f"not running: {exc}") from None

    def describe(self) -> dict[str, Any]:
        info = self.client.info("server")
        try:
            appendonly = self.client.config_get("appendonly").get("appendonly")
            save = self.client.config_get("save").get("save")
            found = f"CONFIG GET found appendonly={appendonly!r}, save={save!r}"
        except self.redis.ResponseError as exc:
            appendonly = save = None
            found = f"CONFIG GET refused ({exc})"
        if appendonly == "no" and save == "":
            what = "no persistence at all: XADD is answered from memory and a restart loses every stream"
        elif appendonly == "yes":
            what = "append-only file on (fsync as appendfsync says): XADD is answered before any fsync"
        else:
            what = "RDB snapshots only (save rules): XADD is answered from memory"
        try:
            import hiredis  # noqa: F401

            parser = "hiredis reply parser"
        except ImportError:
            parser = "pure-Python reply parser (no hiredis)"
        return {
            "server": f"redis {info.get('redis_version')}",
            "durability": f"{found}: {what}",
            "client": f"redis-py {version('redis')}, {parser}",
            "appendonly": appendonly,
            "save": save,
        }

    def create(self) -> None:
        """Nothing: a stream comes into being with its first XADD (or XGROUP CREATE MKSTREAM)."""

    def delete(self, name: str) -> None:
        self.client.delete(name)

    def sync(self, s: Settings) -> dict[str, Any]:
        return loop(s, lambda: self.client.xadd(self.name, {"b": BODY}) and 1)

    def batch(self, s: Settings) -> dict[str, Any]:
        pipe = self.client.pipeline(transaction=False)

        def send() -> int:
            for _ in range(BATCH):
                pipe.xadd(self.name, {"b": BODY})
            return len(pipe.execute())

        return loop(s, send)

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        started = time.perf_counter()
        pipe = self.client.pipeline(transaction=False)
        for start in range(0, s.count, CONSUME_BATCH):
            for _ in range(min(CONSUME_BATCH, s.count - start)):
                pipe.xadd(self.name, {"b": BODY})
            pipe.execute()
        preload = s.count / (time.perf_counter() - started)
        settle_process(settle_pid)
        group = "peers"
        count = 0
        started = time.perf_counter()
        self.client.xgroup_create(self.name, group, id="0")
        deadline = started + catchup_timeout(s)
        while count < s.count and time.perf_counter() < deadline:
            reply = self.client.xreadgroup(group, "c1", {self.name: ">"}, count=CONSUME_BATCH, block=1000)
            if not reply:
                continue
            ids = [entry_id for entry_id, _ in reply[0][1]]
            self.client.xack(self.name, group, *ids)
            count += len(ids)
        elapsed = time.perf_counter() - started
        pending = self.client.xpending(self.name, group)["pending"]
        return catchup_result(
            count,
            s.count,
            elapsed,
            preload_msgs_s=round(preload),
            unacked=pending,
            acks="XACK of each batch's ids",
        )

    def latency(self, s: Settings) -> dict[str, Any]:
        group = "peers"
        self.client.xgroup_create(self.name, group, id="$", mkstream=True)
        host, port = ADDRS["redis"]
        reader = self.redis.Redis(host=host, port=port, socket_timeout=30)
        stop = threading.Event()
        lat = Latencies(s)

        def consume() -> None:
            while not stop.is_set():
                reply = reader.xreadgroup(group, "c1", {self.name: ">"}, count=CONSUME_BATCH, block=100)
                if not reply:
                    continue
                entries = reply[0][1]
                for _, fields in entries:
                    lat.got(fields[b"b"])
                reader.xack(self.name, group, *[entry_id for entry_id, _ in entries])

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        sent, errors, first = pace(lat, lambda body: self.client.xadd(self.name, {"b": body}))
        lat.wait_all(sent)
        stop.set()
        thread.join(5)
        return lat.result(sent, errors, first)


# -- NATS JetStream -----------------------------------------------------------------------------


class Nats:
    """NATS JetStream through nats-py (asyncio, on uvloop as our client is)."""

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

    async def create(self) -> None:
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
            await self.create()
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


# -- RabbitMQ -----------------------------------------------------------------------------------


class Rabbit:
    """RabbitMQ through pika: a durable classic queue, persistent messages, publisher confirms."""

    def __init__(self, spec: dict[str, Any]) -> None:
        try:
            import pika
        except ImportError as exc:
            raise Unavailable(f"pika not installed: {exc}") from None
        self.pika = pika
        self.name = spec.get("name", "")
        host, port = ADDRS["rabbitmq"]
        self.params = pika.ConnectionParameters(
            host,
            port,
            credentials=pika.PlainCredentials("guest", "guest"),
            connection_attempts=1,
            socket_timeout=5,
            blocked_connection_timeout=60,
        )
        self.persistent = pika.BasicProperties(delivery_mode=2)
        try:
            self.conn = pika.BlockingConnection(self.params)
        except pika.exceptions.AMQPConnectionError as exc:
            raise Unavailable(f"not running: {type(exc).__name__}: {exc!r}") from None
        self.channel = self.conn.channel()

    def describe(self) -> dict[str, Any]:
        props = self.conn._impl.server_properties  # the broker's connection.start properties
        return {
            "server": f"{props.get('product', 'RabbitMQ')} {props.get('version', '?')}",
            "durability": (
                "durable classic queue, persistent messages (delivery_mode=2), publisher confirms: "
                "a message is confirmed once written to disk (fsync'd, in groups), or once "
                "consumed if that comes first"
            ),
            "client": f"pika {version('pika')}",
        }

    def create(self) -> None:
        self.channel.queue_declare(self.name, durable=True)

    def delete(self, name: str) -> None:
        self.channel.queue_delete(name)

    def sync(self, s: Settings) -> dict[str, Any]:
        self.channel.confirm_delivery()

        def publish() -> int:
            self.channel.basic_publish("", self.name, BODY, self.persistent)  # raises on a nack
            return 1

        return loop(s, publish)

    def batch(self, s: Settings) -> dict[str, Any]:
        meter = Meter.of(s)
        self.publish_window(meter, None)
        return meter.result()

    def publish_window(self, meter: Meter | None, count: int | None) -> float:
        """Publish with up to ``WINDOW`` messages unconfirmed (a SelectConnection; acks and
        nacks may confirm many tags at once), until the meter's window ends or ``count``
        were published; returns msgs/s.  Raises when the connection fails."""
        pika = self.pika
        pending: dict[int, None] = {}  # unconfirmed delivery tags, ascending
        state: dict[str, Any] = {"published": 0, "closing": False, "error": ""}
        channel: list[Any] = []

        def finished() -> bool:
            if meter is not None:
                return not meter.running() or meter.errors > 100
            return state["published"] >= (count or 0)

        def fill() -> None:
            ch = channel[0]
            while len(pending) < WINDOW and not finished():
                ch.basic_publish("", self.name, BODY, self.persistent)
                state["published"] += 1
                pending[state["published"]] = None
            if finished() and not pending and not state["closing"]:
                state["closing"] = True
                conn.close()

        def on_confirm(frame: Any) -> None:
            method = frame.method
            confirmed = 0
            if method.multiple:
                while pending:
                    tag = next(iter(pending))
                    if tag > method.delivery_tag:
                        break
                    del pending[tag]
                    confirmed += 1
            elif method.delivery_tag in pending:
                del pending[method.delivery_tag]
                confirmed = 1
            if meter is not None:
                if isinstance(method, pika.spec.Basic.Ack):
                    meter.acked(confirmed)
                else:
                    for _ in range(confirmed):
                        meter.error(RuntimeError("nacked by the broker"))
            fill()

        def on_channel(ch: Any) -> None:
            channel.append(ch)
            ch.confirm_delivery(on_confirm, callback=lambda _frame: fill())

        def on_failed(_conn: Any, error: Any) -> None:
            state["error"] = repr(error)
            _conn.ioloop.stop()

        def on_closed(_conn: Any, reason: Any) -> None:
            if not state["closing"]:
                state["error"] = repr(reason)
            _conn.ioloop.stop()

        def on_timeout() -> None:
            state["error"] = "timed out"
            state["closing"] = True
            conn.close()

        conn = pika.SelectConnection(
            self.params,
            on_open_callback=lambda c: c.channel(on_open_callback=on_channel),
            on_open_error_callback=on_failed,
            on_close_callback=on_closed,
        )
        budget = (meter.end - time.perf_counter() + 30) if meter is not None else 30 + (count or 0) / 1000
        conn.ioloop.call_later(budget, on_timeout)
        started = time.perf_counter()
        conn.ioloop.start()
        if state["error"]:
            raise RuntimeError(f"windowed publish failed: {state['error']}")
        return state["published"] / (time.perf_counter() - started)

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        preload = self.publish_window(None, s.count)
        settle_process(settle_pid)
        count = [0]
        started = time.perf_counter()
        ch = self.conn.channel()
        ch.basic_qos(prefetch_count=PREFETCH)

        def on_message(ch: Any, method: Any, _props: Any, _body: bytes) -> None:
            count[0] += 1
            if count[0] % CONSUME_BATCH == 0 or count[0] >= s.count:
                ch.basic_ack(method.delivery_tag, multiple=True)
            if count[0] >= s.count:
                ch.stop_consuming()

        tag = ch.basic_consume(self.name, on_message, auto_ack=False)
        timer = self.conn.call_later(catchup_timeout(s), ch.stop_consuming)
        ch.start_consuming()
        ch.basic_cancel(tag)
        ch.queue_declare(self.name, passive=True)  # a round trip after the last ack
        elapsed = time.perf_counter() - started
        self.conn.remove_timeout(timer)
        ch.close()  # anything unacked goes back to the queue, so the count below shows it
        left = self.channel.queue_declare(self.name, passive=True).method.message_count
        return catchup_result(
            count[0],
            s.count,
            elapsed,
            preload_msgs_s=round(preload),
            unacked=left,
            acks=f"basic_ack multiple=True every {CONSUME_BATCH}, prefetch {PREFETCH}",
        )

    def latency(self, s: Settings) -> dict[str, Any]:
        stop = threading.Event()
        ready = threading.Event()
        lat = Latencies(s)
        problems: list[str] = []

        def consume() -> None:
            try:
                conn = self.pika.BlockingConnection(self.params)  # pika: one connection per thread
                ch = conn.channel()
                ch.basic_qos(prefetch_count=PREFETCH)

                def on_message(ch: Any, method: Any, _props: Any, body: bytes) -> None:
                    lat.got(body)
                    ch.basic_ack(method.delivery_tag)

                ch.basic_consume(self.name, on_message, auto_ack=False)
                ready.set()
                while not stop.is_set():
                    conn.process_data_events(time_limit=0.05)
                conn.close()
            except Exception as exc:
                problems.append(f"consumer: {type(exc).__name__}: {exc}")
                ready.set()

        thread = threading.Thread(target=consume, daemon=True)
        thread.start()
        ready.wait(10)
        self.channel.confirm_delivery()
        sent, errors, first = pace(
            lat, lambda body: self.channel.basic_publish("", self.name, body, self.persistent)
        )
        lat.wait_all(sent)
        stop.set()
        thread.join(5)
        return lat.result(sent, errors, first or (problems[0] if problems else ""))


# -- child processes ------------------------------------------------------------------------------


def catchup_timeout(s: Settings) -> float:
    """How long a catch-up consumer may take before it is cut off (1,000 msgs/s at worst)."""
    return 30 + s.count / 1000


def settle_process(pid: int | None, timeout: float = 30.0) -> None:
    """Let a server finish its own work (CPU under 10 % of a core for 0.5 s, bounded)."""
    if pid is None:
        time.sleep(1.0)
        return
    started = time.monotonic()
    last = process_cpu_seconds(pid)
    while time.monotonic() - started < timeout:
        time.sleep(0.5)
        now = process_cpu_seconds(pid)
        if now - last < 0.05:
            return
        last = now


CLASSES: dict[str, Callable[[dict[str, Any]], Any]] = {
    "quiver": Quiver,
    "redis": Redis,
    "nats": Nats,
    "rabbitmq": Rabbit,
}


def peer_main(spec: dict[str, Any]) -> dict[str, Any]:
    """Child process: one system's describe, cleanup or scenario; its result as a dict
    (``{"skipped": why}`` when the system turns out to be unavailable, even mid-way)."""
    try:
        return run_role(CLASSES[spec["system"]](spec), spec)
    except Unavailable as exc:
        return {"skipped": str(exc)}


def run_role(system: Any, spec: dict[str, Any]) -> dict[str, Any]:
    role = spec["role"]
    if role == "describe":
        return system.describe()
    if role == "cleanup":
        for name in spec["names"]:
            try:
                system.delete(name)
            except Exception:
                pass  # already gone
        return {"cleaned": spec["names"]}
    s = Settings(**spec["settings"])
    scenario = spec["scenario"]
    gc.collect()
    gc.freeze()
    if spec["system"] == "nats":  # NATS creates and deletes its stream inside its event loop
        if scenario == "catchup":
            return system.catchup(s, spec.get("settle_pid"))
        return getattr(system, scenario)(s)
    system.create()
    try:
        if scenario == "catchup":
            return system.catchup(s, spec.get("settle_pid"))
        return getattr(system, scenario)(s)
    finally:
        system.delete(spec["name"])


def child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Run ``peer_main`` in a child process of this file with a hard timeout."""
    return run_script(Path(__file__).resolve(), ["--role", "peer", json.dumps(spec)], timeout)


def child_budget(scenario: str, s: Settings) -> float:
    """A scenario child's hard timeout, seconds."""
    if scenario == "catchup":
        return 2 * catchup_timeout(s) + 3 * s.count / 1000 + 120  # preload, push, pull, settles
    if scenario == "latency":
        return 3 * (s.latency_warmup_s + s.latency_s) + 60
    return 2 * (s.warmup_s + s.measure_s) + 90


# -- the parent: servers, order of runs, report ----------------------------------------------


def reachable(system: str) -> str | None:
    """None when the peer's port accepts a connection, else why not."""
    host, port = ADDRS[system]
    try:
        with socket.create_connection((host, port), timeout=3):
            return None
    except OSError as exc:
        return f"not running: {host}:{port}: {exc.strerror or exc}"


def server_pid(system: str) -> int | None:
    """The pid of a peer's server process (by its command name), to wait for it to go quiet;
    None when there is not exactly one."""
    wanted = SERVER_PROCESS[system]
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == wanted:
                found.append(int(comm.parent.name))
        except OSError:
            continue
    return found[0] if len(found) == 1 else None


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


def quiver_description(flush: str) -> dict[str, Any]:
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
        "client": "broker_core.client",
    }


@dataclass
class Run:
    """What one run found: each system's description or skip reason, each scenario's result."""

    settings: Settings
    systems: list[str]
    scenarios: list[str]
    flush: str
    quick: bool
    info: dict[str, dict[str, Any]] = field(default_factory=dict)
    results: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)


def run(args: argparse.Namespace) -> Run:
    """Start Quiver, look at the peers, then each scenario through each system in turn."""
    s = Settings.quick() if args.quick else Settings()
    if args.count:
        s.count = args.count
    systems = pick(args.only, SYSTEMS, "--only")
    scenarios = pick(args.scenarios, SCENARIOS, "--scenarios")
    result = Run(s, systems, scenarios, args.quiver_flush, args.quick)
    run_id = uuid.uuid4().hex[:8]
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-peers-"))
    servers: list[Server] = []
    used: dict[str, list[str]] = {system: [] for system in systems}
    try:
        quiver: dict[str, Any] = {}
        if "quiver" in systems:
            namesrv, broker = start_cluster(work, [], args.quiver_flush)
            servers += [broker, namesrv]
            quiver = {"namesrv": namesrv.addr, "broker": broker.addr}
            result.info["quiver"] = quiver_description(args.quiver_flush)
            print(f"quiver: broker {broker.addr}, nameserver {namesrv.addr}, work dir {work}")
        for system in systems:
            if system == "quiver":
                continue
            why = reachable(system)
            info = {"skipped": why} if why else child({"role": "describe", "system": system}, 60)
            result.info[system] = info
        print_descriptions(result)
        for scenario in scenarios:
            result.results[scenario] = {}
            for system in systems:
                info = result.info[system]
                if "skipped" in info or "failed" in info:
                    continue
                name = f"quiver_peers_{run_id}_{scenario}"
                used[system].append(name)
                if system == "quiver":
                    settle(servers[0])
                    pid: int | None = servers[0].proc.pid
                else:
                    pid = server_pid(system)
                    settle_process(pid)
                spec = {
                    "role": "peer",
                    "system": system,
                    "scenario": scenario,
                    "name": name,
                    "settings": asdict(s),
                    "settle_pid": pid,
                    **quiver,
                }
                r = child(spec, child_budget(scenario, s))
                result.results[scenario][system] = r
                print(progress(scenario, system, r), flush=True)
    finally:
        for system, names in used.items():
            if names and system != "quiver" and "skipped" not in result.info.get(system, {}):
                child({"role": "cleanup", "system": system, "names": names}, 60)
        for server in servers:
            server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return result


def pick(value: str | None, allowed: tuple[str, ...], option: str) -> list[str]:
    """The comma-separated choice of ``option``, in the canonical order."""
    if not value:
        return list(allowed)
    chosen = {v.strip() for v in value.split(",") if v.strip()}
    unknown = chosen - set(allowed)
    if unknown:
        raise SystemExit(f"{option}: unknown {', '.join(sorted(unknown))} (choose from {','.join(allowed)})")
    return [a for a in allowed if a in chosen]


def print_descriptions(result: Run) -> None:
    print("durability and versions:")
    for system in result.systems:
        info = result.info[system]
        if "skipped" in info:
            print(f"  {system:9} SKIPPED: {info['skipped']}")
        elif "failed" in info:
            print(f"  {system:9} FAILED to describe: {info['failed'][-300:]}")
        else:
            print(f"  {system:9} {info['server']}; {info['client']}")
            print(f"  {'':9} durability: {info['durability']}")


def progress(scenario: str, system: str, r: dict[str, Any]) -> str:
    """One line as each result comes in."""
    head = f"{scenario:8} {system:9}"
    if "failed" in r or "skipped" in r:
        what = "FAILED" if "failed" in r else "SKIPPED"
        return f"{head} {what}: {(r.get('failed') or r.get('skipped') or '')[-400:]}"
    if scenario == "latency":
        line = (
            f"{head} p50 {r['p50_ms']:.2f} ms  p99 {r['p99_ms']:.2f} ms  max {r['max_ms'] or 0:.1f} ms  "
            f"(send acks p50 {r['send_p50_ms']:.2f} p99 {r['send_p99_ms']:.2f} ms)  "
            f"received {r['received']:,} of {r['sent']:,} sent (planned {r['planned']:,}, "
            f"sent at {r['achieved_rate']:,}/s)"
        )
        if r["send_errors"]:
            line += f"  [{r['send_errors']} send errors: {r['first_error']}]"
        return line
    line = f"{head} {r['msgs_per_s']:>9,} msgs/s"
    if scenario == "batch" and "modes" in r:
        modes = r["modes"]
        line += "  (" + ", ".join(f"{m} {v['msgs_per_s']:,}/s" for m, v in modes.items()) + ")"
    if scenario == "catchup":
        line += (
            f"  {r['messages']:,} msgs in {r['elapsed_s']:.2f} s, preload {r.get('preload_msgs_s', 0):,}/s"
        )
        if "shutdown_s" in r:
            line += f", of which shutdown/commit {r['shutdown_s']:.2f} s, committed {r['committed']:,}"
        if "unacked" in r:
            line += f", unacked after {r['unacked']}"
        if not r["complete"]:
            line += "  [INCOMPLETE]"
        pull = r.get("pull")
        if pull:
            line += (
                f"\n{'':18} PullConsumer {pull['msgs_per_s']:>9,} msgs/s  {pull['messages']:,} msgs "
                f"in {pull['elapsed_s']:.2f} s, committed {pull['committed']:,}"
            )
    errors = r.get("errors") or sum(v.get("errors", 0) for v in r.get("modes", {}).values())
    if errors:
        first = r.get("first_error") or next(v["first_error"] for v in r["modes"].values() if v["errors"])
        line += f"  [{errors} errors: {first}]"
    return line


# figure key -> (row label, scenario, how to read it from that scenario's result, lower is better)
FIGURES: list[tuple[str, str, str, Callable[[dict[str, Any]], Any], bool]] = [
    ("sync_msgs_s", "a. sync send, msgs/s", "sync", lambda r: r["msgs_per_s"], False),
    ("batch_msgs_s", "b. pipelined/batched send, msgs/s", "batch", lambda r: r["msgs_per_s"], False),
    (
        "batch_send_batch32_msgs_s",
        "   quiver send_batch(32)",
        "batch",
        lambda r: r["modes"]["send_batch32"]["msgs_per_s"],
        False,
    ),
    (
        "batch_send_async256_msgs_s",
        "   quiver send_async(256 out)",
        "batch",
        lambda r: r["modes"]["send_async256"]["msgs_per_s"],
        False,
    ),
    (
        "batch_send_batch_async32x8_msgs_s",
        "   quiver send_batch_async(32, 8 out)",
        "batch",
        lambda r: r["modes"]["send_batch_async32x8"]["msgs_per_s"],
        False,
    ),
    ("catchup_msgs_s", "c. consumer catch-up, msgs/s", "catchup", lambda r: r["msgs_per_s"], False),
    ("catchup_pull_msgs_s", "   quiver PullConsumer", "catchup", lambda r: r["pull"]["msgs_per_s"], False),
    ("latency_p50_ms", "d. latency p50, ms", "latency", lambda r: r["p50_ms"], True),
    ("latency_p99_ms", "   latency p99, ms", "latency", lambda r: r["p99_ms"], True),
    ("latency_max_ms", "   latency max, ms", "latency", lambda r: r["max_ms"], True),
    ("latency_send_p50_ms", "   its sends' ack, p50 ms", "latency", lambda r: r["send_p50_ms"], True),
    ("latency_send_p99_ms", "   its sends' ack, p99 ms", "latency", lambda r: r["send_p99_ms"], True),
    ("latency_received", "   received", "latency", lambda r: r["received"], False),
    ("latency_sent", "   sent", "latency", lambda r: r["sent"], False),
    ("latency_send_rate", "   achieved send rate, msgs/s", "latency", lambda r: r["achieved_rate"], False),
]
NO_RATIO = {"latency_received", "latency_sent", "latency_send_rate"}


def figures(result: Run) -> dict[str, dict[str, Any]]:
    """figure key -> system -> value (None: skipped, failed or not run)."""
    out: dict[str, dict[str, Any]] = {}
    for key, _label, scenario, read, _lower in FIGURES:
        row: dict[str, Any] = {}
        for system in SYSTEMS:
            r = result.results.get(scenario, {}).get(system)
            try:
                row[system] = None if r is None or "failed" in r or "skipped" in r else read(r)
            except (KeyError, TypeError):
                row[system] = None  # a figure this system does not have (quiver's sub-rows)
        out[key] = row
    return out


def fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value < 100:
        return f"{value:.2f}"
    return f"{value:,.0f}"


def print_table(result: Run, table: dict[str, dict[str, Any]]) -> None:
    systems = result.systems
    peers = [p for p in systems if p != "quiver"]
    ratio_heads = [f"quiver/{p}" for p in peers] if "quiver" in systems else []
    widths = [36] + [10] * len(systems) + [max(12, len(h)) for h in ratio_heads]
    head = ["figure (1 KiB messages)", *systems, *ratio_heads]
    print()
    print("  ".join(h.ljust(widths[0]) if i == 0 else h.rjust(widths[i]) for i, h in enumerate(head)))
    for key, label, scenario, _read, lower in FIGURES:
        if scenario not in result.scenarios:
            continue
        row = table[key]
        if all(row[s] is None for s in systems):
            continue
        cells = [label + (" (lower is better)" if lower and label.startswith("d.") else "")]
        cells += [fmt(row[s]) for s in systems]
        for peer in peers if ratio_heads else []:
            q, p = row["quiver"], row[peer]
            cells.append(f"{q / p:.2f}x" if key not in NO_RATIO and q is not None and p else "")
        print("  ".join(c.ljust(widths[0]) if i == 0 else c.rjust(widths[i]) for i, c in enumerate(cells)))
    skipped = {s: result.info[s]["skipped"] for s in systems if "skipped" in result.info[s]}
    for system, why in skipped.items():
        print(f"{system}: skipped ({why})")


def summary_json(result: Run, table: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Every figure of every system (null where skipped, failed or not run), one object."""
    out: dict[str, Any] = {
        "bench": "peers",
        "body_bytes": BODY_BYTES,
        "catchup_messages": result.settings.count,
        "latency_rate": result.settings.latency_rate,
        "quick": result.quick,
        "quiver_flush": result.flush,
    }
    for system in SYSTEMS:
        info = result.info.get(system, {})
        for key, _label, _scenario, _read, _lower in FIGURES:
            if system != "quiver" and key.startswith("batch_send_"):
                continue
            if system != "quiver" and key == "catchup_pull_msgs_s":
                continue
            out[f"{system}_{key}"] = table[key].get(system)
        out[f"{system}_skipped"] = info.get("skipped") or (None if info else "not selected")
        out[f"{system}_durability"] = info.get("durability")
    for system in SYSTEMS:
        if system == "quiver":
            continue
        for key in ("sync_msgs_s", "batch_msgs_s", "catchup_msgs_s", "latency_p99_ms"):
            q, p = table[key]["quiver"], table[key][system]
            out[f"ratio_quiver_{system}_{key}"] = round(q / p, 3) if q is not None and p else None
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="short windows, 10,000 catch-up messages")
    parser.add_argument("--count", type=int, help="catch-up messages (default 200,000; --quick 10,000)")
    parser.add_argument("--only", help=f"comma-separated systems out of {','.join(SYSTEMS)}")
    parser.add_argument("--scenarios", help=f"comma-separated scenarios out of {','.join(SCENARIOS)}")
    parser.add_argument(
        "--quiver-flush", choices=FLUSH_MODES, default="ASYNC_FLUSH", help="our broker's flush"
    )
    parser.add_argument("--role", choices=("peer",), help=argparse.SUPPRESS)
    parser.add_argument("spec", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "peer":
        out = peer_main(json.loads(args.spec))
        print(json.dumps(out), flush=True)
        os._exit(0)  # client threads (our instance, pika) need not be waited for
    if args.count is not None and args.count <= 0:
        raise SystemExit("--count must be positive")
    print(f"peers benchmark: 1 KiB messages, {os.cpu_count()} cores, Python {sys.version.split()[0]}")
    result = run(args)
    table = figures(result)
    print_table(result, table)
    print(json.dumps(summary_json(result, table)))


if __name__ == "__main__":
    main()
