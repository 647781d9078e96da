"""Broker benchmark: one broker process measured side by side with its ceilings, in one run.

    python bench/broker.py [--quick] [--only PHASE[,PHASE]] [--broker-prefix CMD] [--keep]

A nameserver and a broker (ASYNC_FLUSH, default 1 GiB segments) run as their own
processes, started with ``python -m broker_core``; so do the echo server and every load
generator.  Figures (1 KiB bodies, a tag and a UNIQ_KEY on every message, as the official
client sends):

* the store alone, first (median of 3): bench/store.py's append loop in this process,
  one at a time and in batches of 32: what the broker could do without the network;
* ingest, raw frames: a load-generator process pipelines SEND_MESSAGE frames (code 10,
  JSON headers with the C++ client's field names, all values strings) over 4
  connections with a fixed window of requests outstanding on each: msgs/s and send
  latency (request written to response read) p50/p99, one message per request and
  batches of 32 (code 10 with batch=1, the body made by ``encode_batch``); also one
  request at a time on one connection.  Beside each: the same load against an echo
  server on the same remoting layer (answers at once with a response of the broker's
  shape, stores nothing);
* ingest, official client: ``rocketmq==0.4.4``, 16 threads calling ``send_sync`` (and
  ``send_batch`` of 32) in a child process, against the broker and against the echo
  server (which also answers route queries, so the client can use it as a broker);
* ingest, our client (``broker_core.client``), in a child process of its own like the
  official client's: one ``Producer``, 1 KiB messages with a tag, 0.5 s warm-up and 2 s
  measured per mode — ``send`` from one thread and from 16 threads, ``send_async`` with
  256 futures outstanding, ``send_batch`` of 32 from 16 threads — against the echo
  server (its own nameserver) and against the broker; beside the official client's
  figures (with one thread too, measured alongside ours);
* consume catch-up: pull (PULL_MESSAGE, 32 per pull, one pull in flight per queue) 400,000
  stored messages (what the ingest phases stored, topped up with batches if they did not
  run); the echo answers the same pulls;
* consume catch-up, clients: our PushConsumer (a new group from the first offset,
  default settings, counting what reaches the listener), our PullConsumer (one thread
  per queue calling ``pull``) and the official PushConsumer, each over the first 8,000
  messages of every queue of the topic the ingest phases filled, from ``start()`` until
  all are in;
* end-to-end at a fixed rate: single sends paced at 5,000 msgs/s while a consumer
  long-polls every queue: send latency p50/p99 (the 5 ms target) and send-to-receive
  latency (from a send timestamp in the body); store-to-receive comes from the records'
  STORETIMESTAMP (ms resolution).

Before each phase the broker is left to settle (its CPU use drops: next segment warmed,
dispatch done).  Load is measured after a warm-up, over a fixed window; every loop is
bounded in count and time, and all traffic stays on 127.0.0.1.  The last line of output
is one JSON object of the figures.

The same file is the child processes: ``--role loadgen SPEC`` (raw frames), ``--role
echo`` (the echo server), ``--role official SPEC`` (the official client) and ``--role ours
SPEC`` (our client).  Starting the servers and running children: bench/servers.py (shared
with bench/peers.py).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shlex
import shutil
import signal
import statistics
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from servers import (  # noqa: E402  (bench/servers.py, beside this file)
    Server,
    create_topic,
    max_offsets,
    percentile,
    run_script,
    settle,
    start_cluster,
    start_server,
)

from broker_core.remoting.codes import RequestCode, ResponseCode  # noqa: E402
from broker_core.remoting.command import FrameDecoder, RemotingCommand, encode  # noqa: E402
from broker_core.store.message import (  # noqa: E402
    MessageInner,
    decode_record,
    encode_batch,
    encode_host,
    encode_properties,
)

TOPIC = "BenchTopic"
E2E_TOPIC = "BenchE2E"
QUEUES = 8
BODY_BYTES = 1024
BATCH = 32
PRODUCER_GROUP = "BenchProducer"
CONSUMER_GROUP = "BenchConsumer"
PULL_BATCH = 32
FLAG_SUSPEND = 0x2
FLAG_SUBSCRIPTION = 0x4

# Fixed-width stand-ins in a frame encoded once by the codec, replaced per request.
OPAQUE_SLOT = b"1234567890"  # 10 digits: opaques run 1_000_000_000 + n (< 2**31)
BORN_SLOT = b"9876543210123"  # 13 digits: a wall-clock ms timestamp
UNIQ_SLOT = b"FEDCBA9876543210"  # 16 hex digits: the UNIQ_KEY's counter half
STAMP_SLOT = b"\xfa\xce\xb0\x0c\xfa\xce\xb0\x0c"  # the body's first 8 bytes: send time, ns
OPAQUE_BASE = 1_000_000_000


# -- frames -------------------------------------------------------------------------------


class FrameTemplate:
    """A frame encoded once by ``broker_core.remoting.command.encode``, with slots to fill.

    Each slot is a placeholder that occurs exactly once in the encoded frame; ``fill``
    returns the frame with each placeholder replaced by a value of the same width, so a
    request costs one join instead of a header encode.
    """

    def __init__(self, frame: bytes, slots: list[bytes]) -> None:
        found = []
        for index, slot in enumerate(slots):
            if frame.count(slot) != 1:
                raise ValueError(f"slot {slot!r} occurs {frame.count(slot)} times in the template")
            found.append((frame.index(slot), index, len(slot)))
        found.sort()
        self._order = [index for _, index, _ in found]
        self._pieces: list[bytes] = []
        at = 0
        for pos, _, width in found:
            self._pieces.append(frame[at:pos])
            at = pos + width
        self._tail = frame[at:]
        self._widths = [width for _, _, width in found]

    def fill(self, values: list[bytes]) -> bytes:
        """The frame with slot ``i`` replaced by ``values[i]`` (same width as the slot)."""
        parts: list[bytes] = []
        for piece, index, width in zip(self._pieces, self._order, self._widths, strict=True):
            value = values[index]
            if len(value) != width:
                raise ValueError(f"slot value {value!r} is not {width} bytes")
            parts.append(piece)
            parts.append(value)
        parts.append(self._tail)
        return b"".join(parts)


def send_properties(uniq_tail: bytes) -> bytes:
    """A message's properties as the official client sends them (tag, UNIQ_KEY, WAIT)."""
    return encode_properties(
        {"TAGS": "TagA", "UNIQ_KEY": "0100007F00005BCD" + uniq_tail.decode(), "WAIT": "true"}
    )


def send_template(topic: str, queue_id: int, *, batch: bool, body: bytes) -> FrameTemplate:
    """SEND_MESSAGE (code 10) as the C++ client sends it; batches carry batch=1."""
    fields = {
        "producerGroup": PRODUCER_GROUP,
        "topic": topic,
        "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4",
        "queueId": str(queue_id),
        "sysFlag": "0",
        "bornTimestamp": BORN_SLOT.decode(),
        "flag": "0",
        "properties": "" if batch else send_properties(UNIQ_SLOT).decode(),
        "reconsumeTimes": "0",
        "unitMode": "0",
        "batch": "1" if batch else "0",
    }
    cmd = RemotingCommand.request(RequestCode.SEND_MESSAGE, fields, body)
    cmd.language = "CPP"
    cmd.opaque = int(OPAQUE_SLOT)
    slots = [OPAQUE_SLOT, BORN_SLOT] + ([] if batch else [UNIQ_SLOT, STAMP_SLOT])
    return FrameTemplate(encode(cmd), slots)


def batch_bodies(count: int, size: int) -> list[bytes]:
    """``count`` distinct batch bodies of ``size`` items each (distinct UNIQ_KEYs)."""
    body = b"q" * BODY_BYTES
    out = []
    for b in range(count):
        items = [(body, send_properties(b"%016X" % (b * size + i)), 0) for i in range(size)]
        out.append(encode_batch(items))  # type: ignore[arg-type]
    return out


def pull_frame(topic: str, queue_id: int, offset: int, opaque: int, *, suspend_ms: int = 0) -> bytes:
    """PULL_MESSAGE (code 11) with its own subscription ("*"), optionally long-polling."""
    sys_flag = FLAG_SUBSCRIPTION | (FLAG_SUSPEND if suspend_ms else 0)
    fields = {
        "consumerGroup": CONSUMER_GROUP,
        "topic": topic,
        "queueId": str(queue_id),
        "queueOffset": str(offset),
        "maxMsgNums": str(PULL_BATCH),
        "sysFlag": str(sys_flag),
        "commitOffset": "0",
        "suspendTimeoutMillis": str(suspend_ms or 1000),
        "subscription": "*",
        "subVersion": "0",
    }
    cmd = RemotingCommand.request(RequestCode.PULL_MESSAGE, fields)
    cmd.language = "CPP"
    cmd.opaque = opaque
    return encode(cmd)


def count_records(body: bytes) -> int:
    """How many records a FOUND pull body holds (walking their TOTALSIZE fields)."""
    count = pos = 0
    size = len(body)
    unpack = struct.Struct(">i").unpack_from
    while pos + 4 <= size:
        (total,) = unpack(body, pos)
        if total <= 0:
            break
        pos += total
        count += 1
    return count


# -- load generator (child process) -----------------------------------------------------


@dataclass
class Window:
    """The measuring window: answers between ``start`` and ``end`` (perf_counter) count."""

    start: float
    end: float
    messages: int = 0
    requests: int = 0
    errors: int = 0
    warmup_errors: int = 0
    first_error: str = ""
    latencies: list[float] = field(default_factory=list)

    def error(self, now: float, text: str) -> None:
        """Count a failed request: in the window (or after it), or during the warm-up."""
        if now < self.start:
            self.warmup_errors += 1
        else:
            self.errors += 1
        self.first_error = self.first_error or text

    def record(self, sent: float, now: float, count: int, cmd: RemotingCommand) -> None:
        """Count one request answered inside the window."""
        if cmd.code != ResponseCode.SUCCESS:
            self.error(now, f"code {cmd.code}: {cmd.remark}")
            return
        if self.start <= now <= self.end:
            self.messages += count
            self.requests += 1
            self.latencies.append(now - sent)

    def summary(self) -> dict[str, Any]:
        lat = sorted(self.latencies)
        elapsed = self.end - self.start
        return {
            "messages": self.messages,
            "requests": self.requests,
            "elapsed_s": round(elapsed, 3),
            "msgs_per_s": round(self.messages / elapsed) if elapsed > 0 else 0,
            "p50_ms": round(percentile(lat, 0.50) * 1000, 3),
            "p99_ms": round(percentile(lat, 0.99) * 1000, 3),
            "max_ms": round(lat[-1] * 1000, 3) if lat else 0.0,
            "errors": self.errors,
            "warmup_errors": self.warmup_errors,
            "first_error": self.first_error,
        }


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


# -- echo server (child process) ----------------------------------------------------------


def echo_pull_body() -> bytes:
    """32 records shaped like the benchmark's stored messages (what a broker pull returns)."""
    body = b"q" * BODY_BYTES
    records = []
    for i in range(PULL_BATCH):
        msg = MessageInner(
            TOPIC,
            0,
            body,
            properties_raw=send_properties(b"%016X" % i),
            born_host="127.0.0.1:50000",
        )
        records.append(bytes(msg.encode(encode_host("127.0.0.1:10911"))))
    return b"".join(records)


def echo_as_nameserver(server: Any) -> None:
    """Let the echo server be its own nameserver: routes for TOPIC point at itself.

    So the official client can send to it as to a broker (heartbeats and other requests
    are simply acknowledged).
    """
    from broker_core.namesrv.processors import NamesrvProcessor
    from broker_core.namesrv.routeinfo import RouteInfoManager
    from broker_core.store.configfile import DataVersion

    routes = RouteInfoManager(clock_ms=lambda: time.time_ns() // 1_000_000)
    topic = {"readQueueNums": QUEUES, "writeQueueNums": QUEUES, "perm": 6}
    routes.register_broker(
        "EchoCluster", server.address, "echo", 0, "", DataVersion(0, 0), {TOPIC: topic}, [], None
    )
    names = NamesrvProcessor(routes)
    server.register(RequestCode.GET_ROUTEINFO_BY_TOPIC, names.get_route)
    server.register_default(lambda request, conn: request.response(ResponseCode.SUCCESS))


def echo_main() -> None:
    """Child process: a RemotingServer that answers sends and pulls at once, storing nothing.

    Its answers have the broker's shape (a send's msgId/queueId/queueOffset fields, one
    msgId per batch item; a pull's 32 records and offsets), so the broker/echo ratio is
    what storing costs over the same remoting layer.
    """
    import uvloop

    from broker_core.remoting.server import RemotingServer

    msg_id = "7F0000010000" + "0" * 20
    pull_body = echo_pull_body()

    def on_send(request: RemotingCommand, conn: Any) -> RemotingCommand:
        fields = request.ext_fields
        # SEND_MESSAGE (the C++ client) names its fields; SEND_MESSAGE_V2 and
        # SEND_BATCH_MESSAGE (ours, as Java's) use the one-letter names.
        batch = request.code == RequestCode.SEND_BATCH_MESSAGE or fields.get("batch") in ("1", "true")
        return request.response(
            ResponseCode.SUCCESS,
            None,
            ext_fields={
                "msgId": ",".join([msg_id] * BATCH) if batch else msg_id,
                "queueId": fields.get("queueId") or fields.get("e") or "0",
                "queueOffset": "0",
                "MSG_REGION": "DefaultRegion",
                "TRACE_ON": "true",
            },
        )

    def on_pull(request: RemotingCommand, conn: Any) -> RemotingCommand:
        offset = int(request.ext_fields.get("queueOffset") or 0)
        return request.response(
            ResponseCode.SUCCESS,
            None,
            ext_fields={
                "suggestWhichBrokerId": "0",
                "nextBeginOffset": str(offset + PULL_BATCH),
                "minOffset": "0",
                "maxOffset": str(offset + PULL_BATCH),
            },
            body=pull_body,
        )

    async def serve() -> None:
        server = RemotingServer("127.0.0.1", 0)
        for code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE):
            server.register(code, on_send)
        server.register(RequestCode.PULL_MESSAGE, on_pull)
        await server.start()
        echo_as_nameserver(server)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        print(f"listening on {server.address}", flush=True)
        await stop.wait()
        await server.close()

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve())


# -- official client (child process) ------------------------------------------------------


def official_main(spec: dict[str, Any]) -> None:
    """Child process: ``threads`` official producers' threads sending until the window ends.

    One Producer (as an application has), ``threads`` threads each calling ``send_sync``
    (or ``send_batch`` of ``batch`` messages) in a loop.  Exits with ``os._exit``: the
    client's destructors can hang.
    """
    from rocketmq.client import Message, Producer

    producer = Producer(PRODUCER_GROUP + "Official", timeout=3000)
    producer.set_namesrv_addr(spec["namesrv"])
    producer.start()
    body = b"q" * BODY_BYTES
    batch = spec["batch"]

    def new_message(n: int) -> Message:
        msg = Message(spec["topic"])
        msg.set_tags("TagA")
        msg.set_body(body)
        return msg

    for _ in range(50):  # routes fetched, connection open (the route may take a moment)
        try:
            if int(producer.send_sync(new_message(0)).status) == 0:
                break
        except Exception:
            time.sleep(0.1)
    start = time.perf_counter() + spec["warmup_s"]
    window = Window(start, start + spec["measure_s"])
    lock = threading.Lock()

    def worker() -> None:
        own = Window(window.start, window.end)  # merged under the lock at the end
        for n in range(10_000_000):
            t0 = time.perf_counter()
            if t0 >= window.end:
                break
            try:
                if batch > 1:
                    result = producer.send_batch([new_message(n) for _ in range(batch)])
                else:
                    result = producer.send_sync(new_message(n))
                error = "" if int(result.status) == 0 else f"status {int(result.status)}"
            except Exception as exc:  # the client raises on timeouts and broker errors
                error = str(exc)[:200] or type(exc).__name__
            t1 = time.perf_counter()
            if error:
                own.error(t1, error)
            elif window.start <= t1 <= window.end:
                own.messages += batch
                own.requests += 1
                own.latencies.append(t1 - t0)
        with lock:
            window.messages += own.messages
            window.requests += own.requests
            window.errors += own.errors
            window.warmup_errors += own.warmup_errors
            window.first_error = window.first_error or own.first_error
            window.latencies.extend(own.latencies)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(spec["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=spec["warmup_s"] + spec["measure_s"] + 20)
    print(json.dumps({**window.summary(), "threads": spec["threads"], "batch": batch}), flush=True)
    os._exit(0)


def official_push_main(spec: dict[str, Any]) -> None:
    """Child process: the official PushConsumer (a new group, default settings) from
    ``start()`` until every message below the ends has reached its callback.

    A new group starts at offset 0 (the broker answers 0 while nothing has expired), so it
    reads the same messages as ours.  Exits with ``os._exit``, as above.
    """
    from rocketmq.client import PushConsumer

    arrivals = Arrivals(spec["ends"])

    def callback(msg: Any) -> None:
        arrivals.add([(msg.queue_id, msg.queue_offset)])

    consumer = PushConsumer(spec["group"])
    consumer.set_namesrv_addr(spec["namesrv"])
    consumer.subscribe(spec["topic"], callback, "*")
    started = time.perf_counter()
    consumer.start()
    print(json.dumps(arrivals.summary(started, spec["timeout_s"])), flush=True)
    os._exit(0)


# -- our client (child process) -----------------------------------------------------------


class Tally:
    """A thread-safe ``Window``: sends complete on several threads (callers, the client's loop)."""

    def __init__(self, window: Window) -> None:
        self.window = window
        self.lock = threading.Lock()

    def done(self, t0: float, t1: float, count: int, error: str) -> None:
        with self.lock:
            if error:
                self.window.error(t1, error)
            elif self.window.start <= t1 <= self.window.end:
                self.window.messages += count
                self.window.requests += 1
                self.window.latencies.append(t1 - t0)


def ours_send_mode(producer: Any, spec: dict[str, Any], mode: dict[str, Any]) -> dict[str, Any]:
    """One producer mode against the target: ``sync`` (threads), ``async`` (window), ``batch``."""
    from broker_core.client.message import Message

    body = b"q" * BODY_BYTES
    topic = spec["topic"]
    start = time.perf_counter() + spec["warmup_s"]
    tally = Tally(Window(start, start + spec["measure_s"]))
    end = tally.window.end

    def new_message() -> Message:
        return Message(topic, body, tags="TagA")  # the producer adds the UNIQ_KEY

    def error_text(exc: BaseException) -> str:
        return f"{type(exc).__name__}: {str(exc)[:200]}"

    if mode["kind"] == "async":
        slots = threading.Semaphore(mode["window"])

        def on_done(t0: float, future: Any) -> None:
            exc = future.exception()
            tally.done(t0, time.perf_counter(), 1, error_text(exc) if exc else "")
            slots.release()

        while time.perf_counter() < end:
            if not slots.acquire(timeout=10):
                break
            t0 = time.perf_counter()
            try:
                future = producer.send_async(new_message())
            except Exception as exc:  # not even submitted
                tally.done(t0, time.perf_counter(), 1, error_text(exc))
                slots.release()
                continue
            future.add_done_callback(lambda f, t0=t0: on_done(t0, f))
        for _ in range(mode["window"]):  # the last ones answered (bounded)
            if not slots.acquire(timeout=10):
                break
        return {**tally.window.summary(), **mode}

    batch = mode["kind"] == "batch"

    def worker() -> None:
        for _ in range(10_000_000):
            t0 = time.perf_counter()
            if t0 >= end:
                break
            error = ""
            try:
                if batch:
                    producer.send_batch([new_message() for _ in range(BATCH)])
                else:
                    producer.send(new_message())
            except Exception as exc:  # typed client errors: timeout, refused...
                error = error_text(exc)
            tally.done(t0, time.perf_counter(), BATCH if batch else 1, error)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(mode["threads"])]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=spec["warmup_s"] + spec["measure_s"] + 20)
    return {**tally.window.summary(), **mode}


def ours_send(spec: dict[str, Any]) -> dict[str, Any]:
    """Our Producer (one, as an application has) through each of ``spec["modes"]`` in turn."""
    from broker_core.client.message import Message
    from broker_core.client.producer.producer import Producer

    producer = Producer(PRODUCER_GROUP + "Ours", spec["namesrv"]).start()
    try:
        for _ in range(50):  # route fetched, connection open
            try:
                producer.send(Message(spec["topic"], b"q" * BODY_BYTES, tags="TagA"))
                break
            except Exception:
                time.sleep(0.1)
        return {mode["name"]: ours_send_mode(producer, spec, mode) for mode in spec["modes"]}
    finally:
        producer.shutdown()


class Arrivals:
    """Counts the catch-up's messages (offset below its queue's end) as a listener gets them."""

    def __init__(self, ends: list[int]) -> None:
        self.ends = ends
        self.expected = sum(ends)
        self.count = 0
        self.beyond = 0
        self.lock = threading.Lock()
        self.all_in = threading.Event()
        self.last = 0.0

    def add(self, pairs: list[tuple[int, int]]) -> None:
        """``(queue_id, queue_offset)`` of messages received."""
        inside = sum(1 for q, offset in pairs if offset < self.ends[q])
        with self.lock:
            self.count += inside
            self.beyond += len(pairs) - inside
            if self.count >= self.expected and not self.all_in.is_set():
                self.last = time.perf_counter()
                self.all_in.set()

    def summary(self, started: float, timeout_s: float) -> dict[str, Any]:
        complete = self.all_in.wait(timeout_s)
        elapsed = (self.last if complete else time.perf_counter()) - started
        return {
            "messages": self.count,
            "expected": self.expected,
            "beyond_ends": self.beyond,
            "elapsed_s": round(elapsed, 3),
            "msgs_per_s": round(self.count / elapsed) if elapsed > 0 else 0,
            "complete": complete,
        }


def ours_push(spec: dict[str, Any]) -> dict[str, Any]:
    """Our PushConsumer, a new group from the first offset, default settings (20 consume
    threads, one message per listener call): from ``start()`` until every message below
    the ends has reached the listener."""
    from broker_core.client.consumer.push import ConsumeStatus, PushConsumer

    arrivals = Arrivals(spec["ends"])

    def listener(msgs: list[Any]) -> ConsumeStatus:
        arrivals.add([(m.queue_id, m.queue_offset) for m in msgs])
        return ConsumeStatus.CONSUME_SUCCESS

    consumer = PushConsumer(spec["group"], spec["namesrv"], consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(spec["topic"], "*").register_listener(listener)
    started = time.perf_counter()
    consumer.start()
    try:
        return arrivals.summary(started, spec["timeout_s"])
    finally:
        threading.Thread(target=consumer.shutdown, daemon=True).start()
        time.sleep(0.5)  # a moment to commit; the process exits anyway


def ours_pull(spec: dict[str, Any]) -> dict[str, Any]:
    """Our PullConsumer: one thread per queue calling ``pull`` (32 at a time) to the queue's
    end, as the raw catch-up keeps one pull in flight per queue."""
    from broker_core.client.consumer.pull import PullConsumer

    consumer = PullConsumer(spec["group"], spec["namesrv"]).start()
    arrivals = Arrivals(spec["ends"])
    errors: list[str] = []
    try:
        queues = consumer.fetch_queues(spec["topic"])

        def worker(mq: Any) -> None:
            offset, end = 0, spec["ends"][mq.queue_id]
            deadline = time.perf_counter() + spec["timeout_s"]
            while offset < end and time.perf_counter() < deadline:
                try:
                    result = consumer.pull(mq, "*", offset, PULL_BATCH)
                except Exception as exc:
                    errors.append(f"{type(exc).__name__}: {exc}"[:200])
                    return
                arrivals.add([(m.queue_id, m.queue_offset) for m in result.messages])
                if result.next_begin_offset <= offset:
                    return  # nothing more there
                offset = result.next_begin_offset

        started = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(mq,), daemon=True) for mq in queues]
        for thread in threads:
            thread.start()
        out = arrivals.summary(started, spec["timeout_s"])
        return {**out, "errors": len(errors), "first_error": errors[0] if errors else ""}
    finally:
        consumer.shutdown()


def ours_main(spec: dict[str, Any]) -> None:
    """Child process: one of our clients' loads; prints its result as one JSON line."""
    runs = {"send": ours_send, "push": ours_push, "pull": ours_pull}
    gc.collect()
    gc.freeze()
    result = runs[spec["kind"]](spec)
    print(json.dumps(result), flush=True)
    os._exit(0)  # daemon threads of a consumer still shutting down need not be waited for


# -- the parent: processes, phases, report ------------------------------------------------


def run_child(args: list[str], timeout: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run this file as a child (``--role ...``) with a hard timeout; return its last JSON line."""
    return run_script(Path(__file__).resolve(), args, timeout, env)


def loadgen(spec: dict[str, Any]) -> dict[str, Any]:
    budget = spec.get("warmup_s", 0) + spec.get("measure_s", 0) + spec.get("timeout_s", 0) + 30
    return run_child(["--role", "loadgen", json.dumps(spec)], timeout=budget)


def store_ceiling(work: Path, single_n: int, batch_n: int, repeat: int) -> dict[str, float]:
    """The store's own append rates in this process: bench/store.py's method, median of runs.

    Each run opens a fresh store (first segment warm, one batch per queue written first),
    appends pre-built messages one at a time or pre-encoded batches of 32, and times it.
    """
    sys.path.insert(0, str(HERE))
    import store as store_bench  # bench/store.py

    directory = work / "ceiling"
    try:
        single = [store_bench.bench_append(directory, single_n, 1)["append_per_s"] for _ in range(repeat)]
        batch = [store_bench.bench_append(directory, batch_n, BATCH)["append_per_s"] for _ in range(repeat)]
    finally:
        gc.unfreeze()
        shutil.rmtree(directory, ignore_errors=True)
    return {"single": statistics.median(single), "batch": statistics.median(batch)}


def official(
    namesrv: str, home: Path, threads: int, batch: int, warmup: float, measure: float
) -> dict[str, Any]:
    """The official client in a child process (HOME: a temp dir, for its logs)."""
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    spec = {
        "namesrv": namesrv,
        "topic": TOPIC,
        "threads": threads,
        "batch": batch,
        "warmup_s": warmup,
        "measure_s": measure,
    }
    return run_child(["--role", "official", json.dumps(spec)], timeout=warmup + measure + 60, env=env)


@dataclass
class Settings:
    """Durations and load shapes of one run."""

    warmup_s: float = 1.0
    measure_s: float = 3.0
    connections: int = 4
    single_window: int = 32
    batch_window: int = 4
    official_threads: int = 16
    e2e_rate: int = 5_000
    e2e_measure_s: float = 5.0
    catchup_max: int = 400_000
    ceiling_single: int = 100_000
    ceiling_batch: int = 200_000
    ceiling_repeat: int = 3
    ours_warmup_s: float = 0.5  # our client's and the official's one-thread phases
    ours_measure_s: float = 2.0
    ours_async_window: int = 256
    ours_catchup_max: int = 64_000

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            warmup_s=0.5,
            measure_s=1.0,
            e2e_measure_s=2.0,
            catchup_max=50_000,
            ceiling_single=20_000,
            ceiling_batch=40_000,
            ceiling_repeat=1,
            ours_measure_s=1.0,
            ours_catchup_max=20_000,
        )


def ingest_spec(addr: str, s: Settings, batch: int) -> dict[str, Any]:
    return {
        "kind": "ingest",
        "addr": addr,
        "topic": TOPIC,
        "batch": batch,
        "connections": s.connections,
        "window": s.single_window if batch == 1 else s.batch_window,
        "warmup_s": s.warmup_s,
        "measure_s": s.measure_s,
    }


def catchup_ends(starts: list[int], ends: list[int], cap: int) -> list[int]:
    """Per-queue end offsets covering at most ``cap`` messages in all."""
    per_queue = cap // len(ends)
    return [min(end, start + per_queue) for start, end in zip(starts, ends, strict=True)]


def fmt_ingest(label: str, broker: dict[str, Any], echo: dict[str, Any] | None, ceiling: float | None) -> str:
    if "failed" in broker:
        return f"{label}: FAILED {broker['failed']}"
    line = (
        f"{label}: {broker['msgs_per_s']:>9,} msgs/s  latency p50 {broker['p50_ms']:.2f} ms "
        f"p99 {broker['p99_ms']:.2f} ms"
    )
    if echo and "failed" not in echo and echo["msgs_per_s"]:
        line += f"  | echo {echo['msgs_per_s']:,}/s ({broker['msgs_per_s'] / echo['msgs_per_s']:.0%})"
    if ceiling:
        line += f"  | store alone {ceiling:,.0f}/s ({broker['msgs_per_s'] / ceiling:.0%})"
    for name, r in (("", broker), ("echo: ", echo or {})):
        if r.get("errors") or r.get("warmup_errors"):
            line += (
                f"  [{name}{r['errors']} errors, {r.get('warmup_errors', 0)} during warm-up: "
                f"{r['first_error'][:70]}]"
            )
    return line


def ours_child(spec: dict[str, Any], timeout: float) -> dict[str, Any]:
    """One of our clients in a child process (its own GIL, as the official client has)."""
    return run_child(["--role", "ours", json.dumps(spec)], timeout=timeout)


def ours_modes(s: Settings) -> list[dict[str, Any]]:
    """Our producer's modes, one per phase: their names are the phases'."""
    threads = s.official_threads
    return [
        {"name": "ours_sync1", "kind": "sync", "threads": 1},
        {"name": "ours_sync", "kind": "sync", "threads": threads},
        {"name": "ours_async", "kind": "async", "window": s.ours_async_window},
        {"name": "ours_batch", "kind": "batch", "threads": threads},
    ]


def vs(ours: dict[str, Any], other: dict[str, Any] | None, name: str, who: str = "ours ") -> str:
    """`` | name N/s (ours P%)`` when both figures exist."""
    if not other or "failed" in other or not other.get("msgs_per_s") or "failed" in ours:
        return ""
    return f"  | {name} {other['msgs_per_s']:,}/s ({who}{ours['msgs_per_s'] / other['msgs_per_s']:.0%})"


def ours_producer(
    phases: set[str], s: Settings, namesrv: Server, broker: Server, echo: Server, work: Path, figures: dict
) -> None:
    """Our Producer's modes against the echo, then the broker: one child for each, all modes
    in turn (0.5 s warm-up, 2 s measured each).  With ``ours_sync1`` the official client
    is measured with one thread too, against the broker, with the same durations."""
    modes = [mode for mode in ours_modes(s) if mode["name"] in phases]
    if not modes:
        return
    spec = {
        "kind": "send",
        "topic": TOPIC,
        "modes": modes,
        "warmup_s": s.ours_warmup_s,
        "measure_s": s.ours_measure_s,
    }
    budget = len(modes) * (s.ours_warmup_s + s.ours_measure_s + 25) + 30
    settle(broker)
    echo_r = ours_child({**spec, "namesrv": echo.addr}, budget)
    settle(broker)
    broker_r = ours_child({**spec, "namesrv": namesrv.addr}, budget)
    official_one = None
    if "ours_sync1" in phases:
        settle(broker)
        official_one = official(namesrv.addr, work / "home", 1, 1, s.ours_warmup_s, s.ours_measure_s)
    for mode in modes:
        name = mode["name"]
        b = broker_r if "failed" in broker_r else broker_r.get(name, {"failed": "no result"})
        e = echo_r if "failed" in echo_r else echo_r.get(name, {"failed": "no result"})
        figures[name] = {"broker": b, "echo": e}
        if name == "ours_sync1":
            figures[name]["official"] = ref = official_one
            label = "our client, 1 thread,  send       "
        elif name == "ours_sync":
            ref = figures.get("official_single", {}).get("broker")
            label = f"our client, {mode['threads']} threads, send       "
        elif name == "ours_async":
            ref = figures.get("official_single", {}).get("broker")
            label = f"our client, send_async, {mode['window']} out   "
        else:
            ref = figures.get("official_batch", {}).get("broker")
            label = f"our client, {mode['threads']} threads, send_batch "
        print(fmt_ingest(label, b, e, None) + vs(b, ref, "official"))
    if official_one is not None:
        print(fmt_ingest("official client, 1 thread, send_sync", official_one, None, None))


def client_catchup(phase: str, namesrv: str, ends: list[int], work: Path) -> dict[str, Any]:
    """A client's catch-up of the first ``ends[q]`` messages of every queue, a new group each."""
    spec = {
        "kind": "pull" if phase == "ours_pull" else "push",
        "namesrv": namesrv,
        "topic": TOPIC,
        "group": f"{CONSUMER_GROUP}_{phase}_{os.getpid()}",
        "ends": ends,
        "timeout_s": 60,
    }
    if phase != "official_push":
        return ours_child(spec, spec["timeout_s"] + 30)
    home = work / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "HOME": str(home), "PYTHONPATH": str(ROOT)}
    return run_child(["--role", "official", json.dumps(spec)], timeout=spec["timeout_s"] + 30, env=env)


def print_client_catchup(figures: dict[str, Any]) -> None:
    raw = figures.get("catchup", {}).get("broker")
    official = figures.get("official_push")
    labels = {
        "ours_push": "our PushConsumer catch-up      ",
        "ours_pull": "our PullConsumer catch-up      ",
        "official_push": "official PushConsumer catch-up ",
    }
    for phase, label in labels.items():
        r = figures.get(phase)
        if r is None:
            continue
        if "failed" in r:
            print(f"{label}: FAILED {r['failed']}")
            continue
        line = f"{label} ({r['messages']:,} msgs): {r['msgs_per_s']:>9,} msgs/s"
        if phase != "official_push":
            line += vs(r, official, "official push")
        line += vs(r, raw, "raw pulls", "" if phase == "official_push" else "ours ")
        if not r["complete"]:
            line += f"  [INCOMPLETE: {r['messages']} of {r['expected']}]"
        if r.get("errors"):
            line += f"  [{r['errors']} errors: {r['first_error'][:70]}]"
        print(line)


PHASES = (
    "ceiling",
    "one_at_a_time",
    "raw_single",
    "raw_batch",
    "official_single",
    "official_batch",
    "ours_sync1",
    "ours_sync",
    "ours_async",
    "ours_batch",
    "catchup",
    "ours_push",
    "ours_pull",
    "official_push",
    "e2e",
)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Measure the store alone, then start the servers and run the chosen phases."""
    s = Settings.quick() if args.quick else Settings()
    phases = set(args.only.split(",")) if args.only else set(PHASES)
    work = Path(tempfile.mkdtemp(prefix="quiver-bench-broker-"))
    result: dict[str, Any] = {"settings": s, "figures": {}, "ceiling": {}}
    servers: list[Server] = []
    try:
        if "ceiling" in phases:
            # First, alone: the broker's own start-up work must not overlap it.
            result["ceiling"] = ceiling = store_ceiling(
                work, s.ceiling_single, s.ceiling_batch, s.ceiling_repeat
            )
            print(
                f"store alone (this process): single {ceiling['single']:,.0f}/s, "
                f"batch of 32 {ceiling['batch']:,.0f}/s"
            )
        namesrv, broker = start_cluster(work, shlex.split(args.broker_prefix or ""))
        servers += [broker, namesrv]
        echo = start_server(
            [sys.executable, str(Path(__file__).resolve()), "--role", "echo"], "echo", work / "echo.log"
        )
        servers.append(echo)
        create_topic(broker.addr, TOPIC, QUEUES)
        create_topic(broker.addr, E2E_TOPIC, QUEUES)
        print(f"broker {broker.addr}, nameserver {namesrv.addr}, echo {echo.addr}; work dir {work}")
        run_phases(phases, s, namesrv, broker, echo, work, result)
    finally:
        for server in servers:
            server.stop()
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return result


def run_phases(
    phases: set[str], s: Settings, namesrv: Server, broker: Server, echo: Server, work: Path, result: dict
) -> None:
    """The load phases, in order, each after the broker has settled (see ``settle``)."""
    figures, ceiling = result["figures"], result["ceiling"]
    if "one_at_a_time" in phases:
        settle(broker)
        spec = {**ingest_spec(echo.addr, s, 1), "connections": 1, "window": 1}
        echo_r = loadgen(spec)
        broker_r = loadgen({**spec, "addr": broker.addr})
        figures["one_at_a_time"] = {"broker": broker_r, "echo": echo_r}
        print(fmt_ingest("raw frames, one at a time  ", broker_r, echo_r, None))
    for batch, phase in ((1, "raw_single"), (BATCH, "raw_batch")):
        if phase not in phases:
            continue
        settle(broker)
        echo_r = loadgen(ingest_spec(echo.addr, s, batch))
        broker_r = loadgen(ingest_spec(broker.addr, s, batch))
        figures[phase] = {"broker": broker_r, "echo": echo_r}
        label = "raw frames, single sends   " if batch == 1 else "raw frames, batches of 32  "
        print(fmt_ingest(label, broker_r, echo_r, ceiling.get("single" if batch == 1 else "batch")))
    for batch, phase in ((1, "official_single"), (BATCH, "official_batch")):
        if phase not in phases:
            continue
        settle(broker)
        home = work / "home"
        echo_r = official(echo.addr, home, s.official_threads, batch, s.warmup_s, s.measure_s)
        broker_r = official(namesrv.addr, home, s.official_threads, batch, s.warmup_s, s.measure_s)
        figures[phase] = {"broker": broker_r, "echo": echo_r}
        label = f"official client, {s.official_threads} threads, " + (
            "send_sync     " if batch == 1 else "send_batch(32)"
        )
        print(fmt_ingest(label, broker_r, echo_r, None))
    ours_producer(phases, s, namesrv, broker, echo, work, figures)
    if "catchup" in phases:
        settle(broker)
        ends = preload(broker.addr, s)
        settle(broker)
        figures["catchup"] = catchup(broker.addr, echo.addr, s, ends)
    consumers = [p for p in ("ours_push", "ours_pull", "official_push") if p in phases]
    if consumers:
        settle(broker)
        ends = catchup_ends([0] * QUEUES, preload(broker.addr, s), s.ours_catchup_max)
        for phase in consumers:
            settle(broker)
            figures[phase] = client_catchup(phase, namesrv.addr, ends, work)
        print_client_catchup(figures)
    if "e2e" in phases:
        settle(broker)
        figures["e2e"] = e2e(broker.addr, s)


def preload(broker_addr: str, s: Settings) -> list[int]:
    """Queue ends of TOPIC once it holds ``catchup_max`` messages (ingest phases usually did it).

    Tops it up with 1-second runs of batches from the load generator, at most 10 of them.
    """
    ends = max_offsets(broker_addr, TOPIC, QUEUES)
    for _ in range(10):
        if sum(ends) >= s.catchup_max:
            break
        loadgen({**ingest_spec(broker_addr, s, BATCH), "warmup_s": 0.0, "measure_s": 1.0})
        ends = max_offsets(broker_addr, TOPIC, QUEUES)
    return ends


def catchup(broker_addr: str, echo_addr: str, s: Settings, ends: list[int]) -> dict[str, Any]:
    """Pull ``catchup_max`` stored messages from the start of every queue; the echo serves as many."""
    starts = [0] * QUEUES
    ends = catchup_ends(starts, ends, s.catchup_max)
    spec = {
        "kind": "catchup",
        "topic": TOPIC,
        "connections": 2,
        "starts": starts,
        "ends": ends,
        "timeout_s": 60,
    }
    broker_r = loadgen({**spec, "addr": broker_addr})
    echo_r = loadgen({**spec, "addr": echo_addr})
    if "failed" in broker_r:
        print(f"consume catch-up: FAILED {broker_r['failed']}")
    else:
        line = (
            f"consume catch-up ({broker_r['messages']:,} msgs, 32 per pull): "
            f"{broker_r['msgs_per_s']:>9,} msgs/s"
        )
        if "failed" not in echo_r and echo_r["msgs_per_s"]:
            line += (
                f"  | echo {echo_r['msgs_per_s']:,}/s ({broker_r['msgs_per_s'] / echo_r['msgs_per_s']:.0%})"
            )
        if not broker_r["complete"]:
            line += f"  [INCOMPLETE: {broker_r['messages']} of {broker_r['expected']}]"
        print(line)
    return {"broker": broker_r, "echo": echo_r}


def e2e(broker_addr: str, s: Settings) -> dict[str, Any]:
    """Paced sends at ``e2e_rate`` with a long-polling consumer on the same broker."""
    spec = {
        "kind": "e2e",
        "addr": broker_addr,
        "topic": E2E_TOPIC,
        "rate": s.e2e_rate,
        "connections": 2,
        "suspend_ms": 5_000,
        "starts": max_offsets(broker_addr, E2E_TOPIC, QUEUES),
        "warmup_s": s.warmup_s,
        "measure_s": s.e2e_measure_s,
        "timeout_s": 15,
    }
    r = loadgen(spec)
    if "failed" in r:
        print(f"end-to-end at {s.e2e_rate:,} msgs/s: FAILED {r['failed']}")
        return r
    send = r["send"]
    print(
        f"at {s.e2e_rate:,} msgs/s paced: send latency p50 {send['p50_ms']:.2f} ms "
        f"p99 {send['p99_ms']:.2f} ms "
        f"(max {send['max_ms']:.1f}); send-to-receive p50 {r['e2e_p50_ms']:.2f} ms "
        f"p99 {r['e2e_p99_ms']:.2f} ms; store-to-receive p50 {r['store_to_receive_p50_ms']:.0f} ms "
        f"p99 {r['store_to_receive_p99_ms']:.0f} ms; received {r['received']:,} of {r['sent']:,}"
    )
    return r


def summary_json(result: dict[str, Any]) -> dict[str, Any]:
    """The one-line JSON of a run's figures."""
    f = result["figures"]
    out: dict[str, Any] = {"bench": "broker", "body_bytes": BODY_BYTES, "flush": "ASYNC_FLUSH"}
    ceiling = result["ceiling"]
    if ceiling:
        out["store_single_msgs_s"] = round(ceiling["single"])
        out["store_batch32_msgs_s"] = round(ceiling["batch"])
    for phase, key in (
        ("one_at_a_time", "raw_one_at_a_time"),
        ("raw_single", "raw_single"),
        ("raw_batch", "raw_batch32"),
    ):
        if phase in f and "failed" not in f[phase]["broker"]:
            b, e = f[phase]["broker"], f[phase]["echo"]
            out[f"{key}_msgs_s"] = b["msgs_per_s"]
            out[f"{key}_p50_ms"] = b["p50_ms"]
            out[f"{key}_p99_ms"] = b["p99_ms"]
            out[f"{key}_errors"] = b["errors"]
            if "failed" not in e:
                out[f"echo_{key.removeprefix('raw_')}_msgs_s"] = e["msgs_per_s"]
    for phase in ("official_single", "official_batch"):
        if phase in f and "failed" not in f[phase]["broker"]:
            key = phase.replace("batch", "batch32")
            b, e = f[phase]["broker"], f[phase]["echo"]
            out[f"{key}_msgs_s"] = b["msgs_per_s"]
            out[f"{key}_p50_ms"] = b["p50_ms"]
            out[f"{key}_p99_ms"] = b["p99_ms"]
            out[f"{key}_errors"] = b["errors"]
            if "failed" not in e:
                out[f"echo_{key}_msgs_s"] = e["msgs_per_s"]
    if "catchup" in f and "failed" not in f["catchup"]["broker"]:
        out["catchup_msgs_s"] = f["catchup"]["broker"]["msgs_per_s"]
        out["catchup_messages"] = f["catchup"]["broker"]["messages"]
        if "failed" not in f["catchup"]["echo"]:
            out["echo_catchup_msgs_s"] = f["catchup"]["echo"]["msgs_per_s"]
    for phase, key in (
        ("ours_sync1", "ours_sync1"),
        ("ours_sync", "ours_sync"),
        ("ours_async", "ours_async"),
        ("ours_batch", "ours_batch32"),
    ):
        if phase in f and "failed" not in f[phase]["broker"]:
            b, e = f[phase]["broker"], f[phase]["echo"]
            out[f"{key}_msgs_s"] = b["msgs_per_s"]
            out[f"{key}_p50_ms"] = b["p50_ms"]
            out[f"{key}_p99_ms"] = b["p99_ms"]
            out[f"{key}_errors"] = b["errors"]
            if "failed" not in e:
                out[f"echo_{key}_msgs_s"] = e["msgs_per_s"]
            official = f[phase].get("official")
            if official and "failed" not in official:
                out["official_sync1_msgs_s"] = official["msgs_per_s"]
    for phase in ("ours_push", "ours_pull", "official_push"):
        if phase in f and "failed" not in f[phase]:
            out[f"{phase}_msgs_s"] = f[phase]["msgs_per_s"]
            out[f"{phase}_messages"] = f[phase]["messages"]
    if "e2e" in f and "failed" not in f["e2e"]:
        r = f["e2e"]
        out["fixed_rate_msgs_s"] = r["rate"]
        out["fixed_rate_send_p50_ms"] = r["send"]["p50_ms"]
        out["fixed_rate_send_p99_ms"] = r["send"]["p99_ms"]
        out["e2e_p50_ms"] = r["e2e_p50_ms"]
        out["e2e_p99_ms"] = r["e2e_p99_ms"]
        out["store_to_receive_p99_ms"] = r["store_to_receive_p99_ms"]
    return out


def targets(out: dict[str, Any]) -> list[str]:
    """The issue's targets, each met, not met or not measured in this run."""
    checks = [
        ("single sends >= 20,000 msgs/s (raw frames)", "raw_single_msgs_s", lambda v: v >= 20_000),
        ("batches of 32 >= 100,000 msgs/s (raw frames)", "raw_batch32_msgs_s", lambda v: v >= 100_000),
        ("p99 send latency < 5 ms at 5,000 msgs/s", "fixed_rate_send_p99_ms", lambda v: 0 < v < 5),
    ]
    lines = []
    for name, key, ok in checks:
        verdict = "not measured" if key not in out else "met" if ok(out[key]) else "NOT met"
        lines.append(f"target: {name}: {verdict}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter runs (a smoke test, not figures)")
    parser.add_argument("--only", help=f"comma-separated phases out of {','.join(PHASES)}")
    parser.add_argument("--broker-prefix", help="command put before the broker's (e.g. a profiler)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (logs, store)")
    parser.add_argument("--role", choices=("loadgen", "echo", "official", "ours"), help=argparse.SUPPRESS)
    parser.add_argument("spec", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "loadgen":
        return loadgen_main(json.loads(args.spec))
    if args.role == "echo":
        return echo_main()
    if args.role == "official":
        spec = json.loads(args.spec)
        return official_push_main(spec) if spec.get("kind") == "push" else official_main(spec)
    if args.role == "ours":
        return ours_main(json.loads(args.spec))
    print(f"quiver broker benchmark: 1 KiB messages, ASYNC_FLUSH, {os.cpu_count()} cores")
    result = run(args)
    out = summary_json(result)
    for line in targets(out):
        print(line)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
