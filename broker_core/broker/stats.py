"""The broker's traffic figures: messages put per topic and pulled per group, with rates.

RocketMQ's BrokerStatsManager keeps these for ``GET_BROKER_RUNTIME_INFO`` (putTps,
msgPutTotalTodayNow ...) and ``GET_CONSUME_STATS`` (a group's consumeTps); the console
shows them as TPS.  Each figure is a ``RateCounter``: a running total plus per-second
buckets over the last ten minutes, so rates over 10 s, 60 s and 600 s cost one sum.

Puts are counted twice over: per topic from the store's arrival listener (every message dispatched into a
consume queue, whoever stored it: producers, retries, the delay scan, transaction
commits); it runs on the dispatcher's thread, hence the lock.  And per producer group and
topic as the send processor stores what a producer sent (``record_produce``): a stored
message does not carry its producer group, so this is the only place it is known.  The day's totals roll
over when ``roll_day`` is called (the broker's housekeeping timer, and each read).

A day is a UTC day, as the platform's history partitions are: each counter keeps its
total at the start of the day (its "morning"), so a reader that first sees a counter in
the afternoon still knows how much of its total came today.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime

WINDOW_S = 600
_BUCKETS = WINDOW_S + 1  # the window's whole seconds plus the one still open


class RateCounter:
    """A total and its per-second history over the last ``WINDOW_S`` seconds."""

    __slots__ = ("total", "_buckets", "_last_second")

    def __init__(self) -> None:
        self.total = 0
        self._buckets = [0] * _BUCKETS
        self._last_second = 0

    def add(self, count: int, now_s: int) -> None:
        self._advance(now_s)
        self._buckets[now_s % _BUCKETS] += count
        self.total += count

    def rate(self, seconds: int, now_s: int) -> float:
        """Events per second over the last ``seconds`` whole seconds (the current one excluded)."""
        self._advance(now_s)
        seconds = max(1, min(seconds, WINDOW_S))
        return sum(self._buckets[(now_s - back) % _BUCKETS] for back in range(1, seconds + 1)) / seconds

    def _advance(self, now_s: int) -> None:
        """Zero the buckets of the seconds that passed without events."""
        gap = now_s - self._last_second
        if gap <= 0:
            return
        if gap >= _BUCKETS:
            self._buckets = [0] * _BUCKETS
        else:
            for second in range(self._last_second + 1, now_s + 1):
                self._buckets[second % _BUCKETS] = 0
        self._last_second = now_s


def utc_today() -> date:
    """Today's date in UTC: the day the broker's "today" figures count."""
    return datetime.now(UTC).date()


@dataclass(frozen=True, slots=True)
class Totals:
    """Counter totals since the broker started, and each one's total when today began
    (0 for a counter that began today)."""

    puts: dict[str, int]
    gets: dict[tuple[str, str], int]
    puts_morning: dict[str, int]
    gets_morning: dict[tuple[str, str], int]
    produced: dict[tuple[str, str], int]  # (producer group, topic) -> messages
    produced_morning: dict[tuple[str, str], int]


class BrokerStats:
    """Put counts per topic, get counts per group and topic, and today's totals."""

    def __init__(
        self,
        *,
        monotonic_s: Callable[[], float] = time.monotonic,
        today: Callable[[], date] = utc_today,
    ) -> None:
        self._monotonic_s = monotonic_s
        self._today = today
        self._lock = threading.Lock()
        self.topic_puts: dict[str, RateCounter] = {}
        self.group_gets: dict[tuple[str, str], RateCounter] = {}
        self.puts = RateCounter()
        self.gets = RateCounter()
        self._day = today()
        self.put_total_today_morning = 0
        self.get_total_today_morning = 0
        self.put_total_yesterday_morning = 0
        self.get_total_yesterday_morning = 0
        self._puts_morning: dict[str, int] = {}
        self._gets_morning: dict[tuple[str, str], int] = {}
        self._produced: dict[tuple[str, str], int] = {}
        self._produced_morning: dict[tuple[str, str], int] = {}

    def _now(self) -> int:
        return int(self._monotonic_s())

    def on_arrival(self, arrived: dict[tuple[str, int], int]) -> None:
        """Store arrival listener: ``arrived`` maps (topic, queue) to how many messages came."""
        now = self._now()
        with self._lock:
            for (topic, _queue_id), count in arrived.items():
                if count <= 0:
                    continue
                counter = self.topic_puts.get(topic)
                if counter is None:
                    counter = self.topic_puts[topic] = RateCounter()
                counter.add(count, now)
                self.puts.add(count, now)

    def record_produce(self, producer_group: str, topic: str, count: int) -> None:
        """A producer of ``producer_group`` had ``count`` messages of ``topic`` stored (a
        plain total: rates per group are not asked for, and the send path stays cheap)."""
        key = (producer_group, topic)
        with self._lock:
            self._produced[key] = self._produced.get(key, 0) + count

    def record_get(self, group: str, topic: str, count: int) -> None:
        """A pull handed ``count`` messages of ``topic`` to ``group``."""
        if count <= 0:
            return
        now = self._now()
        with self._lock:
            counter = self.group_gets.get((group, topic))
            if counter is None:
                counter = self.group_gets[(group, topic)] = RateCounter()
            counter.add(count, now)
            self.gets.add(count, now)

    def forget_topic(self, topic: str) -> None:
        with self._lock:
            self.topic_puts.pop(topic, None)
            self._puts_morning.pop(topic, None)
            for key in [k for k in self._produced if k[1] == topic]:
                del self._produced[key]
                self._produced_morning.pop(key, None)

    def put_tps(self, topic: str | None = None, seconds: int = 60) -> float:
        with self._lock:
            counter = self.puts if topic is None else self.topic_puts.get(topic)
            return 0.0 if counter is None else counter.rate(seconds, self._now())

    def get_tps(self, group: str | None = None, topic: str | None = None, seconds: int = 60) -> float:
        """Messages per second pulled: by everyone, by ``group``, or by ``group`` on ``topic``."""
        now = self._now()
        with self._lock:
            if group is None:
                return self.gets.rate(seconds, now)
            return sum(
                counter.rate(seconds, now)
                for (g, t), counter in self.group_gets.items()
                if g == group and (topic is None or t == topic)
            )

    def totals(self) -> Totals:
        """Messages put per topic and pulled per (group, topic) since the broker started,
        with what each had counted when today (UTC) began; read in one instant."""
        today = self._today()
        with self._lock:
            self._roll(today)
            return Totals(
                {topic: counter.total for topic, counter in self.topic_puts.items()},
                {key: counter.total for key, counter in self.group_gets.items()},
                dict(self._puts_morning),
                dict(self._gets_morning),
                dict(self._produced),
                dict(self._produced_morning),
            )

    def roll_day(self) -> None:
        """On a new day, today's morning totals become yesterday's.

        Called by the broker's housekeeping timer and before the figures are read, not
        per message (a date lookup per pull is too dear on the hot path).
        """
        today = self._today()
        with self._lock:
            self._roll(today)

    def _roll(self, today: date) -> None:
        if today != self._day:
            self._day = today
            self.put_total_yesterday_morning = self.put_total_today_morning
            self.get_total_yesterday_morning = self.get_total_today_morning
            self.put_total_today_morning = self.puts.total
            self.get_total_today_morning = self.gets.total
            self._puts_morning = {t: c.total for t, c in self.topic_puts.items() if c.total}
            self._gets_morning = {k: c.total for k, c in self.group_gets.items() if c.total}
            self._produced_morning = {k: n for k, n in self._produced.items() if n}
