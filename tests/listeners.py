"""Message listeners the tests give real push consumers."""

from __future__ import annotations

import threading

from broker_core.client.consumer.push import ConsumeStatus
from broker_core.model.message import MessageExt


class AlwaysFails:
    """A listener that never takes a message: with no retries allowed, each one dead-letters.
    ``calls`` counts the messages it was handed."""

    def __init__(self) -> None:
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.calls += len(msgs)
        return ConsumeStatus.RECONSUME_LATER


class Counter:
    """A listener that takes every message and counts the distinct bodies it was handed."""

    def __init__(self) -> None:
        self.bodies: set[bytes] = set()
        self.lock = threading.Lock()

    def __call__(self, msgs: list[MessageExt]) -> ConsumeStatus:
        with self.lock:
            self.bodies.update(m.body for m in msgs)
        return ConsumeStatus.CONSUME_SUCCESS

    def count(self) -> int:
        with self.lock:
            return len(self.bodies)
