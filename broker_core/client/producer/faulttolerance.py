"""Latency fault tolerance: steer sends away from brokers that were slow or failed.

RocketMQ's ``MQFaultStrategy`` and ``LatencyFaultToleranceImpl`` (4.9.x), used when the
producer's ``sendLatencyFaultEnable`` is on.  After every send the producer reports how
long it took; the latency falls into a bracket of ``LATENCY_MAX_MS`` (the last bound it
reaches) and the broker is avoided for the matching ``NOT_AVAILABLE_DURATION_MS``:

    latency (ms)   <50  50-  100-  550-  1000-  2000-  3000-  15000 and more
    avoided (ms)    0    0    0  30000  60000 120000 180000  600000

so a send of 600 ms keeps the broker out of the rotation for 30 s and one of 40 ms does
not at all.  A send that failed outright is "isolated": it is bracketed as if it took
``ISOLATION_LATENCY_MS`` (30 s, hence 10 minutes), though its real latency is what is
remembered for ranking.  A broker is available again from the instant its avoidance ends.

Queue choice with the strategy on (``FaultStrategy.select_one_message_queue``):

1. from the next round-robin position, one turn over the topic's queues for a queue
   whose broker is available.  As in Java 4.8 and later, the broker of the failed attempt
   plays no part here: it is avoided only through its fault item.  (Up to 4.7 Java also
   required the queue to be on that same broker, a condition it later dropped as a bug.)
2. otherwise the least bad known broker (``pick_one_at_least``), if the topic can be
   written there, its queues taken in turn up to its write queue count; a fault item
   for a broker the topic cannot be written to is forgotten;
3. otherwise plain round robin.

With the strategy off, reports are ignored and a retry just avoids the last broker
(``TopicPublishInfo.select_one_message_queue(last_broker_name)``).

Time comes from an injected ``now_ms`` callable; the default is a monotonic clock, so a
wall-clock step cannot lengthen or cut short a broker's avoidance.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from broker_core.client.producer.queues import RoundRobinIndex, TopicPublishInfo
from broker_core.client.routes import BrokerName
from broker_core.messagequeue import MessageQueue

LATENCY_MAX_MS: Final = (50, 100, 550, 1000, 2000, 3000, 15000)
NOT_AVAILABLE_DURATION_MS: Final = (0, 0, 30000, 60000, 120000, 180000, 600000)
# The latency a failed send is bracketed as (Java passes 30000 when isolation is set).
ISOLATION_LATENCY_MS: Final = 30000


def monotonic_ms() -> int:
    """Milliseconds of a clock that never steps backwards (the default ``now_ms``)."""
    return time.monotonic_ns() // 1_000_000


def not_available_ms_for(
    latency_ms: int,
    latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
    durations_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
) -> int:
    """How long to avoid a broker after a send of ``latency_ms``: the duration of the
    highest bracket bound the latency reaches, 0 below the first."""
    for bound, duration in zip(reversed(latency_max_ms), reversed(durations_ms), strict=True):
        if latency_ms >= bound:
            return duration
    return 0


@dataclass(frozen=True, slots=True)
class FaultItem:
    """What is known of one broker: its last send latency and when it may be used again."""

    broker_name: BrokerName
    current_latency_ms: int
    # The instant (on the tolerance's clock) from which the broker is available again.
    start_timestamp_ms: int

    def is_available(self, now_ms: int) -> bool:
        return now_ms >= self.start_timestamp_ms

    def rank(self, now_ms: int) -> tuple[bool, int, int]:
        """Sort key, best first: available brokers, then lower latency, then sooner back."""
        return (not self.is_available(now_ms), self.current_latency_ms, self.start_timestamp_ms)


class LatencyFaultTolerance:
    """The fault items by broker name: which brokers to avoid, and for how long.

    A broker never reported is available.  Thread-safe: producers report from the
    threads or tasks that sent.
    """

    def __init__(self, now_ms: Callable[[], int] = monotonic_ms, *, start: int | None = None) -> None:
        """``start`` fixes ``pick_one_at_least``'s round-robin position (tests); random if None."""
        self._now_ms = now_ms
        self._items: dict[BrokerName, FaultItem] = {}
        self._lock = threading.Lock()
        self._which_item_worst = RoundRobinIndex(start)

    def update_fault_item(
        self, broker_name: BrokerName, current_latency_ms: int, not_available_ms: int
    ) -> None:
        """Record a send to ``broker_name``: its latency, and avoid it for ``not_available_ms``."""
        item = FaultItem(broker_name, current_latency_ms, self._now_ms() + not_available_ms)
        with self._lock:
            self._items[broker_name] = item

    def is_available(self, broker_name: BrokerName) -> bool:
        """False while ``broker_name`` is being avoided."""
        with self._lock:
            item = self._items.get(broker_name)
        return item is None or item.is_available(self._now_ms())

    def remove(self, broker_name: BrokerName) -> None:
        """Forget ``broker_name`` (it no longer holds queues of the topic being sent)."""
        with self._lock:
            self._items.pop(broker_name, None)

    def fault_item(self, broker_name: BrokerName) -> FaultItem | None:
        """What is recorded for ``broker_name``, if anything (for logs and tests)."""
        with self._lock:
            return self._items.get(broker_name)

    def pick_one_at_least(self) -> BrokerName | None:
        """A broker to fall back on when every queue's broker is being avoided.

        The known brokers are ranked (available first, then by latency, then by when they
        come back) and successive calls take turns among the better half, so the load of a
        degraded cluster is spread over its least bad brokers rather than all put on one.
        With a single known broker, or two or three, it is always the best one.  None when
        no broker was ever reported.
        """
        now = self._now_ms()
        with self._lock:
            items = sorted(self._items.values(), key=lambda item: item.rank(now))
        if not items:
            return None
        half = len(items) // 2
        if half == 0:
            return items[0].broker_name
        return items[self._which_item_worst.increment_and_get() % half].broker_name


class FaultStrategy:
    """The producer's queue choice with latency fault tolerance (RocketMQ ``MQFaultStrategy``).

    ``send_latency_fault_enable`` (RocketMQ's ``sendLatencyFaultEnable``) is off by default,
    as in RocketMQ; while it is off the strategy only avoids the last failed broker on a
    retry.  Thread-safe.
    """

    def __init__(
        self,
        *,
        send_latency_fault_enable: bool = False,
        now_ms: Callable[[], int] = monotonic_ms,
        latency_max_ms: Sequence[int] = LATENCY_MAX_MS,
        not_available_duration_ms: Sequence[int] = NOT_AVAILABLE_DURATION_MS,
        start: int | None = None,
    ) -> None:
        """Brackets may be replaced (RocketMQ's ``setLatencyMax``/``setNotAvailableDuration``);
        ``start`` fixes the fallback pick's round-robin position (tests).

        Raises ValueError when the two bracket tables differ in length.
        """
        if len(latency_max_ms) != len(not_available_duration_ms):
            raise ValueError("latency_max_ms and not_available_duration_ms must be the same length")
        self.send_latency_fault_enable = send_latency_fault_enable
        self.latency_max_ms = tuple(latency_max_ms)
        self.not_available_duration_ms = tuple(not_available_duration_ms)
        self.tolerance = LatencyFaultTolerance(now_ms, start=start)

    def update_fault_item(self, broker_name: BrokerName, current_latency_ms: int, isolation: bool) -> None:
        """Report a send to ``broker_name`` that took ``current_latency_ms``.

        ``isolation`` marks a send that failed (no answer, connection lost, broker error):
        the broker is then avoided as if the send had taken ``ISOLATION_LATENCY_MS``.
        Ignored while the strategy is off.
        """
        if not self.send_latency_fault_enable:
            return
        bracketed_ms = ISOLATION_LATENCY_MS if isolation else current_latency_ms
        duration = not_available_ms_for(bracketed_ms, self.latency_max_ms, self.not_available_duration_ms)
        self.tolerance.update_fault_item(broker_name, current_latency_ms, duration)

    def is_available(self, broker_name: BrokerName) -> bool:
        """False while ``broker_name`` is being avoided."""
        return self.tolerance.is_available(broker_name)

    def select_one_message_queue(
        self, tpinfo: TopicPublishInfo, last_broker_name: BrokerName | None = None
    ) -> MessageQueue:
        """The queue for the next attempt of a send; ``last_broker_name`` is the broker the
        previous attempt went to, None on a first attempt.

        Raises LookupError when the topic has no sendable queue (check ``tpinfo.ok()``).
        """
        if not self.send_latency_fault_enable:
            return tpinfo.select_one_message_queue(last_broker_name)
        if not tpinfo.ok():
            raise LookupError(f"topic {tpinfo.topic!r} has no writable queue")

        # One advance of the shared position per choice; the scan walks on from it.
        position = tpinfo.send_which_queue.increment_and_get()
        for offset in range(len(tpinfo.message_queues)):
            mq = tpinfo.queue_at(position + offset)
            if self.tolerance.is_available(mq.broker_name):
                return mq

        fallback = self.tolerance.pick_one_at_least()
        if fallback is not None:
            write_queue_nums = tpinfo.write_queue_nums(fallback)
            if write_queue_nums > 0:
                # Java draws a further position here; reusing this choice's one keeps the
                # fallback broker's queues evenly used whatever their count.
                return MessageQueue(tpinfo.topic, fallback, position % write_queue_nums)
            # A fault item of a broker this topic cannot be written to is of no use here.
            self.tolerance.remove(fallback)
        return tpinfo.select_one_message_queue()
