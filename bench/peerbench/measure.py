"""Measurement, the same for every system: a send window, a paced latency run, a catch-up.

``Meter`` counts acknowledged messages inside the window after the warm-up (``loop`` and
``aloop`` drive a send call through it); ``Latencies`` with ``pace``/``apace`` sends
stamped messages at a fixed rate and records send-to-receive times; ``catchup_result`` is
the shape of every catch-up's figures.  ``settle_process`` waits for a server to go quiet
before the next timed part.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from servers import percentile, process_cpu_seconds  # bench/servers.py

from .workload import PAD, STAMP, Settings


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


def threads_loop(s: Settings, threads: int, make_call: Callable[[], Callable[[], int]]) -> dict[str, Any]:
    """``loop`` in ``threads`` threads at once, one meter: each thread gets its own call
    from ``make_call`` (its own connection where the client wants one per thread)."""
    meter = Meter.of(s)
    calls = [make_call() for _ in range(threads)]  # connected before the window opens

    def run(call: Callable[[], int]) -> None:
        while meter.running() and meter.errors <= s.max_errors:
            try:
                meter.acked(call())
            except Exception as exc:  # a client's send error: counted, shown
                meter.error(exc)

    workers = [threading.Thread(target=run, args=(call,), daemon=True) for call in calls]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(s.warmup_s + s.measure_s + 60)
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


async def atasks_loop(s: Settings, tasks: int, call: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """``aloop`` in ``tasks`` coroutines at once on one event loop, one meter."""
    meter = Meter.of(s)

    async def run() -> None:
        while meter.running() and meter.errors <= s.max_errors:
            try:
                meter.acked(await call())
            except Exception as exc:
                meter.error(exc)

    await asyncio.gather(*(run() for _ in range(tasks)))
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
