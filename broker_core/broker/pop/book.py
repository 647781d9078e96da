"""What one consumer group has popped from one queue: RocketMQ 5's pop consumption state.

A pop hands messages out without moving the group's offset: each handed-out message is
*in flight* (invisible) until its consumer acks it or its invisible time ends, when it
may be handed out again with its delivery attempt raised.  So one queue of one group
(a ``QueueBook``) holds:

- ``base``: every offset below it is finished (acked, dead-lettered or filtered out); it is
  the offset the group's consume progress shows, and what lag is counted from;
- ``cursor``: every offset below it has been looked at (finished, in flight or held);
  above it nothing has been handed out yet;
- ``finished``: offsets in [base, cursor) already finished (acks arrive in any order);
- ``in_flight``: offset -> ``InFlight`` (when it becomes visible again, its attempt, the
  pop time that versions its receipt handle, its FIFO message group);
- ``held`` (FIFO groups): per message group, offsets waiting for the group's message in
  flight to be acked, in queue order.

A FIFO group hands out at most one message of a message group at a time: a message whose
group has one in flight is held, and becomes eligible when that one is finished.

The book is plain data, changed only by the event loop; ``broker_core.broker.pop.journal``
makes each change durable and ``broker_core.broker.pop.service`` drives it.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class InFlight:
    """One handed-out message of a queue."""

    visible_at: int  # epoch ms when it may be handed out again
    attempt: int  # which delivery this is: 1 the first, 2 the first redelivery, ...
    pop_time: int  # epoch ms of this hand-out: a receipt handle names it
    message_group: str = ""  # FIFO: the message's group ("" otherwise)


class AckOutcome:
    OK = "OK"
    # The handle's hand-out has been superseded (the message was handed out again).
    STALE = "STALE"
    # Nothing of this offset is in flight: already acked, dead-lettered, or never popped.
    NOT_IN_FLIGHT = "NOT_IN_FLIGHT"


@dataclass(slots=True)
class QueueBook:
    """Pop state of one (group, topic, queue); see the module docstring."""

    base: int
    cursor: int = -1
    finished: set[int] = field(default_factory=set)
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    held: dict[str, deque[int]] = field(default_factory=dict)
    # (visible_at, offset, pop_time): a lazy heap over in_flight, for what comes back first.
    _due: list[tuple[int, int, int]] = field(default_factory=list)
    # FIFO: message groups with a message in flight.
    _busy: set[str] = field(default_factory=set)
    # Lifetime counters for the console (not persisted beyond the broker's run).
    acked: int = 0
    redelivered: int = 0
    dead_lettered: int = 0

    def __post_init__(self) -> None:
        if self.cursor < self.base:
            self.cursor = self.base

    # -- handing out ----------------------------------------------------------------------

    def hand_out(
        self, offset: int, pop_time: int, invisible_ms: int, attempt: int, message_group: str = ""
    ) -> None:
        """Record ``offset`` as in flight until ``pop_time + invisible_ms``."""
        entry = InFlight(pop_time + invisible_ms, attempt, pop_time, message_group)
        self.in_flight[offset] = entry
        heapq.heappush(self._due, (entry.visible_at, offset, pop_time))
        if message_group:
            self._busy.add(message_group)
            queue = self.held.get(message_group)
            if queue and queue[0] == offset:
                queue.popleft()
                if not queue:
                    del self.held[message_group]
        if offset >= self.cursor:
            self.cursor = offset + 1
        if attempt > 1:
            self.redelivered += 1

    def due(self, now_ms: int) -> list[int]:
        """Offsets in flight whose invisible time has ended, earliest first (left in flight:
        the caller hands each out again or finishes it)."""
        found: list[int] = []
        heap = self._due
        while heap and heap[0][0] <= now_ms:
            visible_at, offset, pop_time = heapq.heappop(heap)
            entry = self.in_flight.get(offset)
            if entry is not None and entry.pop_time == pop_time and entry.visible_at == visible_at:
                found.append(offset)
        # What is returned and not handed out again must still come back: the caller
        # either hands it out (a new heap entry) or finishes it; re-arm the rest lazily.
        for offset in found:
            entry = self.in_flight[offset]
            heapq.heappush(heap, (entry.visible_at, offset, entry.pop_time))
        return found

    def next_visible_at(self) -> int | None:
        """When the earliest in-flight message comes back (epoch ms), or None."""
        heap = self._due
        while heap:
            visible_at, offset, pop_time = heap[0]
            entry = self.in_flight.get(offset)
            if entry is not None and entry.pop_time == pop_time and entry.visible_at == visible_at:
                return visible_at
            heapq.heappop(heap)
        return None

    def blocked(self, message_group: str) -> bool:
        """FIFO: whether a message of ``message_group`` must wait (one is in flight or held)."""
        return message_group in self._busy or message_group in self.held

    def hold(self, offset: int, message_group: str) -> None:
        """FIFO: keep ``offset`` back until its group's message in flight is finished."""
        self.held.setdefault(message_group, deque()).append(offset)
        if offset >= self.cursor:
            self.cursor = offset + 1

    def ready_held(self) -> list[tuple[int, str]]:
        """FIFO: the held heads whose group has nothing in flight, (offset, group) by offset."""
        return sorted((queue[0], group) for group, queue in self.held.items() if group not in self._busy)

    # -- finishing ------------------------------------------------------------------------

    def ack(self, offset: int, pop_time: int) -> str:
        """A consumer acks the hand-out of ``offset`` made at ``pop_time``."""
        entry = self.in_flight.get(offset)
        if entry is None:
            return AckOutcome.NOT_IN_FLIGHT
        if entry.pop_time != pop_time:
            return AckOutcome.STALE
        self.finish(offset)
        self.acked += 1
        return AckOutcome.OK

    def change(self, offset: int, pop_time: int, now_ms: int, invisible_ms: int) -> InFlight | str:
        """Make the hand-out of ``offset`` made at ``pop_time`` invisible for ``invisible_ms``
        from now; it gets a new pop time (a new receipt handle).  Else why not."""
        entry = self.in_flight.get(offset)
        if entry is None:
            return AckOutcome.NOT_IN_FLIGHT
        if entry.pop_time != pop_time:
            return AckOutcome.STALE
        # A new version even within the same millisecond: the old handle must stop working.
        new_pop_time = max(now_ms, pop_time + 1)
        entry.pop_time = new_pop_time
        entry.visible_at = new_pop_time + invisible_ms
        heapq.heappush(self._due, (entry.visible_at, offset, new_pop_time))
        return entry

    def finish(self, offset: int) -> None:
        """``offset`` needs no more delivery (acked, dead-lettered or filtered out)."""
        entry = self.in_flight.pop(offset, None)
        if entry is not None and entry.message_group:
            self._busy.discard(entry.message_group)
        if offset < self.base:
            return
        if offset >= self.cursor:
            self.cursor = offset + 1
        self.finished.add(offset)
        while self.base in self.finished:
            self.finished.discard(self.base)
            self.base += 1

    def skip_to(self, offset: int) -> None:
        """Everything from the cursor to ``offset`` was looked at and needs no delivery
        (filtered out, or no longer stored), but for what is in flight."""
        if offset <= self.cursor:
            return
        if self.idle:
            self.base = self.cursor = offset
            return
        for skipped in range(self.cursor, offset):
            if skipped not in self.in_flight:
                self.finish(skipped)
        self.cursor = max(self.cursor, offset)

    def look_past(self, offset: int) -> None:
        """``offset`` was looked at (it is in flight or finished already)."""
        if offset >= self.cursor:
            self.cursor = offset + 1

    def reset(self, base: int) -> None:
        """Start over at ``base`` (an operator reset the group's offset): nothing in flight."""
        self.base = self.cursor = base
        self.finished.clear()
        self.in_flight.clear()
        self.held.clear()
        self._due.clear()
        self._busy.clear()

    def rescan(self) -> None:
        """Forget what was held and look again from ``base`` (after loading: the held
        queues, the cursor and the due heap are derived state)."""
        self.held.clear()
        self.cursor = self.base
        self._busy = {e.message_group for e in self.in_flight.values() if e.message_group}
        self._due = sorted((e.visible_at, offset, e.pop_time) for offset, e in self.in_flight.items())

    @property
    def idle(self) -> bool:
        """Nothing is pending at or above base: the book could start over anywhere ahead."""
        return self.base == self.cursor and not self.in_flight and not self.held and not self.finished

    @property
    def in_flight_count(self) -> int:
        return len(self.in_flight)

    def attempts(self) -> dict[int, int]:
        """How many messages in flight are on each delivery attempt."""
        counts: dict[int, int] = {}
        for entry in self.in_flight.values():
            counts[entry.attempt] = counts.get(entry.attempt, 0) + 1
        return counts
