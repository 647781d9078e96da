"""The contract every system adapter keeps: what the parent asks of a system in a child.

One adapter per system under ``systems/`` (Quiver, Redis Streams, NATS JetStream,
RabbitMQ), each built from the child's JSON spec (``name``: this scenario's topic,
stream or queue; Quiver's also carries its nameserver and broker).  Building one may raise
``workload.Unavailable``; the parent then reports the system as skipped.  Every scenario
returns the dict its JSON line carries (``measure`` gives each the same shape).
"""

from __future__ import annotations

from typing import Any, Protocol

from .workload import Settings


class System(Protocol):
    """One system under test, as a child process drives it."""

    # True when a scenario creates and deletes its own topic (NATS does both inside its
    # event loop); otherwise the child calls ``create`` before and ``delete`` after.
    creates_own_topic: bool

    def describe(self) -> dict[str, Any]:
        """Server and client versions and the durability a send's acknowledgement means."""
        ...

    def create(self) -> None:
        """This scenario's topic, stream or queue."""
        ...

    def delete(self, name: str) -> None:
        """Delete a topic, stream or queue of this run (already gone is fine)."""
        ...

    def sync(self, s: Settings) -> dict[str, Any]:
        """One message at a time, each acknowledged before the next: msgs/s (``Meter``)."""
        ...

    def sync8(self, s: Settings) -> dict[str, Any]:
        """``sync`` from ``SYNC_THREADS`` senders at once: msgs/s over all (``Meter``)."""
        ...

    def batch(self, s: Settings) -> dict[str, Any]:
        """Many messages per round trip: msgs/s (``Meter``)."""
        ...

    def catchup(self, s: Settings, settle_pid: int | None) -> dict[str, Any]:
        """Store ``s.count`` messages, let the server settle, read them all with
        acknowledgements (``catchup_result``)."""
        ...

    def latency(self, s: Settings) -> dict[str, Any]:
        """Paced stamped sends with a consumer running: send-to-receive times (``Latencies``)."""
        ...
