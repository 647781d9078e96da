"""The raw-frame load generator (child role ``loadgen``): pipelined sends and pulls.

It talks the remoting protocol with hand-built frames (``frames``), so the figures are
the broker's and not a client's: ``ingest`` keeps a fixed window of SEND_MESSAGE
requests outstanding on each connection, ``catchup`` keeps one PULL_MESSAGE in flight
per queue until every queue reaches its end, and ``e2e`` paces single sends while a
long-polling consumer measures send-to-receive latency.  Each prints one JSON line.
"""

from __future__ import annotations

import asyncio
import gc
import json
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from servers import percentile  # bench/servers.py

from broker_core.model.message import decode_record
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import FrameDecoder

from .frames import (
    BODY_BYTES,
    OPAQUE_BASE,
    QUEUES,
    STAMP_SLOT,
    batch_bodies,
    count_records,
    pull_frame,
    send_template,
)
from .measure import Window


class SendSource:
    """Builds the next SEND_MESSAGE frame: queues round-robin, fresh UNIQ_KEY and stamps."""

    def __init__(self, topic: str, batch: int) -> None:
        self.batch = batch
        self.counter = 0
        if batch > 1:
            self.bodies = batch_bodies(64, batch)
            self.templates = [send_template(topic, q, batch=True, body=self.bodies[0]) for q in range(QUEUES)]
        else:
            body = STAMP_SLOT + b"q" * (BODY_BYTES - len(STAMP_SLOT))
            self.templates = [send_template(topic, q, batch=False, body=body) for q in range(QUEUES)]

    def frame(self, opaque: int) -> bytes:
        n = self.counter
        self.counter = n + 1
        template = self.templates[n % QUEUES]
        born = b"%013d" % (time.time_ns() // 1_000_000)
        if self.batch > 1:
            # The template's body is bodies[0]; every body has the same length.
            frame = template.fill([b"%010d" % opaque, born])
            return frame[: len(frame) - len(self.bodies[0])] + self.bodies[n % len(self.bodies)]
        stamp = struct.pack(">q", time.perf_counter_ns())
        return template.fill([b"%010d" % opaque, born, b"%016X" % n, stamp])


class SendConnection(asyncio.Protocol):
    """One producer connection: writes frames, matches answers by opaque, keeps its window full."""

    def __init__(self, source: SendSource, window: Window, refill: bool) -> None:
        self.source = source
        self.window = window
        self.refill = refill  # window mode: each answer sends the next request
        self.stopped = False
        self.inflight: dict[int, float] = {}
        self._opaque = OPAQUE_BASE
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self.lost = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.lost.done():
            self.lost.set_result(None)

    def send(self, count: int) -> None:
        """Write ``count`` new requests in one write."""
        if self._transport is None or count <= 0 or self.stopped:
            return
        frames = []
        now = time.perf_counter()
        for _ in range(count):
            self._opaque += 1
            frames.append(self.source.frame(self._opaque))
            self.inflight[self._opaque] = now
        self._transport.write(b"".join(frames))

    def data_received(self, data: bytes) -> None:
        now = time.perf_counter()
        answered = 0
        for cmd in self._decoder.feed(data):
            sent = self.inflight.pop(cmd.opaque, None)
            if sent is not None:
                self.window.record(sent, now, self.source.batch, cmd)
                answered += 1
        if self.refill and now < self.window.end:
            self.send(answered)

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


async def open_connections(addr: str, count: int, factory: Callable[[], asyncio.Protocol]) -> list[Any]:
    host, port = addr.rsplit(":", 1)
    loop = asyncio.get_running_loop()
    conns = []
    for _ in range(count):
        _, conn = await loop.create_connection(factory, host, int(port))
        conns.append(conn)
    return conns


async def drain(conns: list[SendConnection], timeout: float) -> None:
    """Wait (bounded) for every outstanding request to be answered."""
    deadline = time.perf_counter() + timeout
    while any(c.inflight for c in conns) and time.perf_counter() < deadline:
        await asyncio.sleep(0.01)


async def run_ingest(spec: dict[str, Any]) -> dict[str, Any]:
    """Window mode: ``connections`` x ``window`` requests outstanding until the window ends."""
    start = time.perf_counter() + spec["warmup_s"]
    window = Window(start, start + spec["measure_s"])
    source = SendSource(spec["topic"], spec["batch"])
    conns: list[SendConnection] = await open_connections(
        spec["addr"], spec["connections"], lambda: SendConnection(source, window, refill=True)
    )
    for conn in conns:
        conn.send(spec["window"])
    await asyncio.sleep(max(0.0, window.end - time.perf_counter()))
    await drain(conns, 10.0)
    for conn in conns:
        conn.close()
    return {**window.summary(), "sent_total": source.counter * spec["batch"]}


async def pace(conns: list[SendConnection], rate: float, until: float) -> int:
    """Send single messages at ``rate`` per second, spread over ``conns``, until ``until``."""
    begun = time.perf_counter()
    sent = 0
    turn = 0
    # Ticks of 1 ms (uvloop's timer resolution: shorter sleeps return at once), so about
    # rate / 1000 messages go out together each tick.
    max_iterations = int((until - begun) * 1000) + 100
    for _ in range(max_iterations):
        now = time.perf_counter()
        if now >= until:
            break
        due = int((now - begun) * rate) - sent
        if due > 0:
            conns[turn % len(conns)].send(due)
            turn += 1
            sent += due
        await asyncio.sleep(0.001)
    return sent


@dataclass
class PullState:
    """One queue being pulled: where it is and where it stops (None: follow new messages)."""

    queue_id: int
    offset: int
    end: int | None
    done: bool = False


class PullConnection(asyncio.Protocol):
    """Pulls a set of queues over one connection, one pull in flight per queue.

    ``on_body(queue_state, body)`` gets every FOUND body; a queue is done once its offset
    reaches its ``end`` or ``stop()`` is called.
    """

    def __init__(
        self, topic: str, states: list[PullState], on_body: Callable[[bytes], None], suspend_ms: int
    ) -> None:
        self.topic = topic
        self.states = states
        self.on_body = on_body
        self.suspend_ms = suspend_ms
        self.stopping = False
        self.pulls = 0
        self.errors = 0
        self.first_error = ""
        self._by_opaque: dict[int, PullState] = {}
        self._opaque = 0
        self._decoder = FrameDecoder()
        self._transport: asyncio.Transport | None = None
        self.finished = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.finished.done():
            self.finished.set_result(None)

    def start(self) -> None:
        for state in self.states:
            self._pull(state)

    def _pull(self, state: PullState) -> None:
        if state.end is not None and state.offset >= state.end or self.stopping:
            state.done = True
            if all(s.done for s in self.states) and not self.finished.done():
                self.finished.set_result(None)
            return
        assert self._transport is not None
        self._opaque += 1
        self._by_opaque[self._opaque] = state
        self.pulls += 1
        self._transport.write(
            pull_frame(self.topic, state.queue_id, state.offset, self._opaque, suspend_ms=self.suspend_ms)
        )

    def data_received(self, data: bytes) -> None:
        for cmd in self._decoder.feed(data):
            state = self._by_opaque.pop(cmd.opaque, None)
            if state is None:
                continue
            if cmd.code == ResponseCode.SUCCESS:
                self.on_body(cmd.body)
            elif cmd.code not in (ResponseCode.PULL_NOT_FOUND, ResponseCode.PULL_RETRY_IMMEDIATELY):
                self.errors += 1
                self.first_error = self.first_error or f"code {cmd.code}: {cmd.remark}"
                state.done = True
                continue
            state.offset = int(cmd.ext_fields.get("nextBeginOffset", state.offset))
            self._pull(state)

    def stop(self) -> None:
        """Pull no more (pulls in flight are left to the broker's suspend timeout)."""
        self.stopping = True
        if self._transport is not None:
            self._transport.close()


async def run_catchup(spec: dict[str, Any]) -> dict[str, Any]:
    """Pull every queue from ``starts`` to ``ends`` as fast as one pull per queue allows."""
    received = [0]

    def on_body(body: bytes) -> None:
        received[0] += count_records(body)

    states = [PullState(q, spec["starts"][q], spec["ends"][q]) for q in range(QUEUES)]
    expected = sum(s.end - s.offset for s in states if s.end is not None)
    groups = [states[i :: spec["connections"]] for i in range(spec["connections"])]
    conns = []
    for group in groups:
        conns += await open_connections(
            spec["addr"], 1, lambda g=group: PullConnection(spec["topic"], g, on_body, 0)
        )
    started = time.perf_counter()
    for conn in conns:
        conn.start()
    done, _ = await asyncio.wait([c.finished for c in conns], timeout=spec["timeout_s"])
    elapsed = time.perf_counter() - started
    for conn in conns:
        conn.stop()
    return {
        "messages": received[0],
        "expected": expected,
        "pulls": sum(c.pulls for c in conns),
        "elapsed_s": round(elapsed, 3),
        "msgs_per_s": round(received[0] / elapsed) if elapsed > 0 else 0,
        "complete": len(done) == len(conns) and received[0] >= expected,
        "errors": sum(c.errors for c in conns),
        "first_error": next((c.first_error for c in conns if c.first_error), ""),
    }


async def run_e2e(spec: dict[str, Any]) -> dict[str, Any]:
    """Paced single sends with a long-polling consumer: send and end-to-end latency."""
    start = time.perf_counter() + spec["warmup_s"]
    window = Window(start, start + spec["measure_s"])
    e2e: list[float] = []
    store_to_receive: list[float] = []
    received = [0]

    def on_body(body: bytes) -> None:
        now_ns = time.perf_counter_ns()
        wall_ms = time.time_ns() / 1e6
        pos = 0
        while pos < len(body):
            msg = decode_record(body, pos)
            pos += msg.store_size
            received[0] += 1
            (sent_ns,) = struct.unpack_from(">q", msg.body)
            if window.start <= sent_ns / 1e9 <= window.end:
                e2e.append((now_ns - sent_ns) / 1e6)
                store_to_receive.append(wall_ms - msg.store_timestamp)

    states = [PullState(q, spec["starts"][q], None) for q in range(QUEUES)]
    (consumer,) = await open_connections(
        spec["addr"], 1, lambda: PullConnection(spec["topic"], states, on_body, spec["suspend_ms"])
    )
    consumer.start()
    source = SendSource(spec["topic"], 1)
    conns: list[SendConnection] = await open_connections(
        spec["addr"], spec["connections"], lambda: SendConnection(source, window, refill=False)
    )
    sent = await pace(conns, spec["rate"], window.end)
    await drain(conns, 10.0)
    for _ in range(200):  # up to 2 s for the last messages to reach the consumer
        if received[0] >= sent:
            break
        await asyncio.sleep(0.01)
    consumer.stop()
    for conn in conns:
        conn.close()
    e2e.sort()
    store_to_receive.sort()
    return {
        "send": window.summary(),
        "sent": sent,
        "received": received[0],
        "rate": spec["rate"],
        "e2e_p50_ms": round(percentile(e2e, 0.50), 3),
        "e2e_p99_ms": round(percentile(e2e, 0.99), 3),
        "e2e_max_ms": round(e2e[-1], 3) if e2e else 0.0,
        "store_to_receive_p50_ms": round(percentile(store_to_receive, 0.50), 1),
        "store_to_receive_p99_ms": round(percentile(store_to_receive, 0.99), 1),
        "consumer_errors": consumer.errors,
    }


def loadgen_main(spec: dict[str, Any]) -> None:
    """Child process: run one load and print its result as one JSON line."""
    import uvloop

    runs = {"ingest": run_ingest, "catchup": run_catchup, "e2e": run_e2e}
    gc.collect()
    gc.freeze()
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        result = runner.run(runs[spec["kind"]](spec))
    print(json.dumps(result), flush=True)
