"""Measurement: what counts inside a run's window, and how a catch-up knows it is done.

``Window`` is the one record every load keeps (messages, requests, errors, latencies
between a warm-up's end and the window's end) and the shape of its JSON summary;
``Tally`` is a ``Window`` shared by threads; ``Arrivals`` counts a consumer's catch-up
messages until every queue has been read to its end.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from servers import percentile  # bench/servers.py

from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.command import RemotingCommand


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
