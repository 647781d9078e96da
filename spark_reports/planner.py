"""Plan a scan: which queue ranges to read, one Spark partition each (driver side).

Like Spark's Kafka source: a partition is (broker, topic, queue, offset range); the
bounds come from the options (offsets, or times turned into offsets by the broker's
SEARCH_OFFSET_BY_TIMESTAMP); a range longer than ``maxMessagesPerPartition`` is split
so that a big queue spreads over executors.  Planning asks the nameserver for routes and
each master for its queues' offsets; it reads no message.
"""

from __future__ import annotations

import asyncio
import re
from dataclasses import dataclass

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError, AdminUnreachableError
from broker_core.messagequeue import MessageQueue
from broker_core.remoting.codes import ResponseCode
from broker_core.remoting.tls import client_context_if
from broker_core.topics import is_system_topic
from spark_reports.options import EARLIEST, LATEST, ScanOptions, SourceOptionError


class SourceUnavailableError(RuntimeError):
    """The cluster could not be asked (nameserver or broker unreachable, refused)."""


@dataclass(frozen=True)
class QueueRange:
    """One partition: the messages of one queue with offsets in ``[start, end)``, and (when
    the scan is bounded by time) stored in ``[start_ms, end_ms)``."""

    broker: str
    addr: str
    topic: str
    queue_id: int
    start: int
    end: int
    start_ms: int | None = None
    end_ms: int | None = None

    @property
    def queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    @property
    def size(self) -> int:
        return self.end - self.start


def admin_client(options: ScanOptions) -> AdminClient:
    """An admin client for the scan's cluster (ACL account when given)."""
    tls = client_context_if(
        options.tls_enable,
        trust_cert_path=options.tls_trust_cert_path,
        cert_path=options.tls_cert_path,
        key_path=options.tls_key_path,
    )
    return AdminClient(
        options.namesrv,
        timeout=options.timeout_s,
        access_key=options.access_key,
        secret_key=options.secret_key,
        tls=tls,
    )


def plan(options: ScanOptions) -> list[QueueRange]:
    """Plan the scan's partitions (blocking: runs its own event loop).

    Raises:
        SourceOptionError: a named topic that does not exist.
        SourceUnavailableError: the nameserver or a broker does not answer or refuses.
    """
    return asyncio.run(plan_async(options))


async def plan_async(options: ScanOptions) -> list[QueueRange]:
    async with admin_client(options) as admin:
        try:
            topics = await _topics(admin, options)
            named = bool(options.topics)
            per_topic = await asyncio.gather(*(_topic_ranges(admin, options, t, named) for t in topics))
        except AdminUnreachableError as exc:
            raise SourceUnavailableError(f"cannot reach the cluster at {options.namesrv}: {exc}") from None
        except AdminError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                raise SourceOptionError(f"{exc} (cluster at {options.namesrv})") from None
            raise SourceUnavailableError(str(exc)) from None
    return [part for ranges in per_topic for r in ranges for part in split(r, options.max_per_partition)]


async def _topics(admin: AdminClient, options: ScanOptions) -> list[str]:
    if options.topics:
        return list(options.topics)
    assert options.topic_pattern is not None
    pattern = re.compile(options.topic_pattern)
    names = [
        t
        for t in await admin.topic_list()
        if pattern.fullmatch(t) and (options.include_system_topics or not is_system_topic(t))
    ]
    return sorted(names)  # none is an empty scan, as with Kafka's subscribePattern


async def _topic_ranges(
    admin: AdminClient, options: ScanOptions, topic: str, named: bool
) -> list[QueueRange]:
    """The ranges of one topic.  A topic the user named must exist; one a pattern found may
    have no queues (the names the nameserver lists for clusters and brokers): skipped."""
    try:
        route = await admin.topic_route(topic)
        stats = await admin.topic_stats(topic)
    except AdminError as exc:
        if named or exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return []
    addrs = route.read_addrs()
    # The broker's search gives, per queue, the first offset stored at or after a time.
    starts = await admin.offsets_by_time(topic, options.start_ms) if options.start_ms is not None else {}
    ends = await admin.offsets_by_time(topic, options.end_ms) if options.end_ms is not None else {}
    ranges = []
    for stat in stats.queues:
        addr = addrs.get(stat.queue.broker_name)
        if addr is None:
            continue  # a broker with no address online: nothing to read it from
        start = _bound(options.start_offsets, topic, stat.queue, stat.min_offset, stat.max_offset, EARLIEST)
        end = _bound(options.end_offsets, topic, stat.queue, stat.min_offset, stat.max_offset, LATEST)
        if (options.start_ms is not None and stat.queue not in starts) or (
            options.end_ms is not None and stat.queue not in ends
        ):
            continue  # not a readable queue of the route: the time search did not cover it
        start = max(start, starts.get(stat.queue, start))
        end = min(end, ends.get(stat.queue, end))
        if end > start:
            queue = stat.queue
            ranges.append(
                QueueRange(
                    queue.broker_name,
                    addr,
                    topic,
                    queue.queue_id,
                    start,
                    end,
                    options.start_ms,
                    options.end_ms,
                )
            )
    return ranges


def _bound(
    spec: str | dict[str, dict[str, int]], topic: str, queue: MessageQueue, low: int, high: int, default: str
) -> int:
    """An offset bound for one queue, kept within what the queue holds."""
    if isinstance(spec, str):
        chosen = spec
    else:
        given = spec.get(topic, {}).get(f"{queue.broker_name}:{queue.queue_id}")
        if given is not None:
            return min(max(given, low), high)
        chosen = default
    return low if chosen == EARLIEST else high


def split(queue_range: QueueRange, max_size: int) -> list[QueueRange]:
    """Cut a range into consecutive pieces of at most ``max_size`` offsets."""
    if queue_range.size <= max_size:
        return [queue_range]
    return [
        QueueRange(
            queue_range.broker,
            queue_range.addr,
            queue_range.topic,
            queue_range.queue_id,
            lo,
            min(lo + max_size, queue_range.end),
            queue_range.start_ms,
            queue_range.end_ms,
        )
        for lo in range(queue_range.start, queue_range.end, max_size)
    ]
