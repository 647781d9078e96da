"""A group's dead letters and retries: the cluster's overview of them, browse by page or with
filters, export, and the resend task's input (chosen messages, or every stored one).

Counts come from the broker's offsets (max - min per queue, summed), the same figure the
topic page shows for the ``%DLQ%`` topic: every page that counts dead letters agrees.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict

import orjson

from broker_core.client.admin import AdminClient
from broker_core.client.adminmodels import TopicStats
from broker_core.errors import AdminError
from broker_core.messagequeue import MessageQueue
from broker_core.model.message import MessageExt
from broker_core.remoting.codes import ResponseCode
from broker_core.topics import DLQ_GROUP_TOPIC_PREFIX, dlq_topic, retry_topic
from console.dlq.serializers import MAX_RESEND
from console.messages import services as messages
from console.messages.services import MessageSummary

EXPORT_MAX = 10_000
PAGE_SIZE = 100
# Topic stats asked at once for the overview (one broker round trip or two per group).
OVERVIEW_CONCURRENCY = 16


class DeadLetterGroup(TypedDict):
    """A group's ``%DLQ%`` topic: how many dead letters it keeps, when the oldest and newest
    were stored (None when it keeps none)."""

    group: str
    topic: str
    deadLetters: int
    oldestStoreTimestamp: int | None
    newestStoreTimestamp: int | None
    queues: int


class DeadLetterOverview(TypedDict):
    """Every group with a ``%DLQ%`` topic, most dead letters first, and the totals."""

    groups: list[DeadLetterGroup]
    total: int
    groupsWithDeadLetters: int


class DeadLetterBrowse(TypedDict):
    """A time-range page of a group's DLQ (or retry) topic: ``messages.browse``'s page (its
    figures absent when the group ``never`` had such a topic) with the group named."""

    topic: str
    begin: NotRequired[int]
    end: NotRequired[int]
    tags: NotRequired[str | None]
    order: NotRequired[str]
    messages: list[MessageSummary]
    scanned: NotRequired[int]
    total: NotRequired[int]
    progress: NotRequired[float]
    truncated: bool
    cursor: str | None
    never: bool
    group: str
    kind: str


class ExportRow(MessageSummary):
    """A dead letter as the export writes it: its summary, original topic, properties, body."""

    originalTopic: str | None
    properties: dict[str, str]
    bodyBase64: str


class PageBase(TypedDict):
    group: str
    kind: str
    topic: str
    pageSize: int
    tag: str
    key: str


class DeadLetterPage(PageBase):
    """Page ``page`` of ``pages`` of a group's stored DLQ (or retry) messages: positions
    ``first``-``last`` of ``total``, and the ``spans`` (``[broker, queueId, first, stop]``)
    "select all" resends, ``selectable`` messages in all."""

    never: bool
    messages: list[MessageSummary]
    total: int
    page: int
    pages: int
    first: int
    last: int
    spans: list[list[Any]]
    selectable: int


def topic_of(group: str, kind: str) -> str:
    return dlq_topic(group) if kind == "dlq" else retry_topic(group)


def matches(row: Mapping[str, Any], tag: str, key: str) -> bool:
    return (not tag or row.get("tags") == tag) and (not key or key in (row.get("keys") or "").split(" "))


async def browse(
    admin: AdminClient,
    group: str,
    kind: str,
    begin: int,
    end: int,
    limit: int,
    cursor: str | None,
    tag: str,
    key: str,
) -> DeadLetterBrowse:
    """A page of the group's DLQ (or retry) messages, filtered by tag and key; the original
    topic of each is shown (``RETRY_TOPIC``).

    A group that never dead-lettered (or retried) a message has no such topic yet: that is
    an empty page with ``never`` set, not an error.
    """
    try:
        page = await messages.browse(admin, topic_of(group, kind), begin, end, limit, cursor)
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return {
            "messages": [],
            "cursor": None,
            "truncated": False,
            "never": True,
            "group": group,
            "kind": kind,
            "topic": topic_of(group, kind),
        }
    page["messages"] = [m for m in page["messages"] if matches(m, tag, key)]
    return {**page, "group": group, "kind": kind, "topic": topic_of(group, kind), "never": False}


async def export_rows(
    admin: AdminClient, group: str, kind: str, begin: int, end: int
) -> tuple[list[ExportRow], bool]:
    """Up to EXPORT_MAX messages with their bodies and properties; True when more were left."""
    topic = topic_of(group, kind)
    rows: list[ExportRow] = []
    cursor = None
    while len(rows) < EXPORT_MAX:
        page = await messages.browse(admin, topic, begin, end, min(500, EXPORT_MAX - len(rows)), cursor)
        for summary in page["messages"]:
            msg = await admin.view_message(summary["msgId"])
            rows.append(
                {
                    **summary,
                    "originalTopic": msg.properties.get("RETRY_TOPIC"),
                    "properties": dict(sorted(msg.properties.items())),
                    "bodyBase64": base64.b64encode(msg.body).decode(),
                }
            )
        cursor = page["cursor"]
        if cursor is None:
            return rows, False
    return rows, True


def as_jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return b"".join(orjson.dumps(row) + b"\n" for row in rows)


CSV_COLUMNS = [
    "msgId",
    "uniqKey",
    "originalTopic",
    "tags",
    "keys",
    "storeTimestamp",
    "reconsumeTimes",
    "bodyBase64",
]


def as_csv(rows: Sequence[Mapping[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")


async def stats_or_none(admin: AdminClient, topic: str) -> TopicStats | None:
    """The per-queue offsets of ``topic``; None when the cluster has no such topic."""
    try:
        return await admin.topic_stats(topic)
    except AdminError as exc:
        if exc.code != ResponseCode.TOPIC_NOT_EXIST:
            raise
        return None


async def overview(admin: AdminClient) -> DeadLetterOverview:
    """Every group with a ``%DLQ%`` topic: how many dead letters it keeps, when the oldest and
    newest were stored; most dead letters first.

    The oldest time is asked of the brokers only for a DLQ that holds something (one call a
    queue); the newest comes with the offsets.
    """
    names = sorted(t for t in await admin.topic_list() if t.startswith(DLQ_GROUP_TOPIC_PREFIX))
    gate = asyncio.Semaphore(OVERVIEW_CONCURRENCY)

    async def one(topic: str) -> DeadLetterGroup | None:
        async with gate:
            stats = await stats_or_none(admin, topic)
            if stats is None:  # deleted since the nameserver listed it
                return None
            stored = [q for q in stats.queues if q.max_offset > q.min_offset]
            oldest = None
            if stored:
                times = await admin.earliest_store_times(topic)
                oldest = min((t for t in times.values() if t > 0), default=None)
        newest = max((q.last_update_timestamp for q in stored), default=0)
        return {
            "group": topic[len(DLQ_GROUP_TOPIC_PREFIX) :],
            "topic": topic,
            "deadLetters": stats.total_messages,
            "oldestStoreTimestamp": oldest,
            "newestStoreTimestamp": newest or None,
            "queues": len(stats.queues),
        }

    rows = [row for row in await asyncio.gather(*(one(t) for t in names)) if row is not None]
    rows.sort(key=lambda r: (-r["deadLetters"], r["group"]))
    return {
        "groups": rows,
        "total": sum(r["deadLetters"] for r in rows),
        "groupsWithDeadLetters": sum(1 for r in rows if r["deadLetters"]),
    }


def spans_of(stats: TopicStats, cap: int = MAX_RESEND) -> list[list[Any]]:
    """The stored messages of every queue, ``[broker, queueId, first, stop]``, at most ``cap``
    in all (the first ones): what "select all" resends."""
    spans: list[list[Any]] = []
    for q in stats.queues:
        stop = min(q.max_offset, q.min_offset + cap)
        if stop > q.min_offset:
            spans.append([q.queue.broker_name, q.queue.queue_id, q.min_offset, stop])
            cap -= stop - q.min_offset
    return spans


def span_count(spans: list[list[Any]]) -> int:
    return sum(stop - first for _broker, _queue, first, stop in spans)


def parse_spans(raw: str) -> list[list[Any]]:
    """The spans a page sent back ("select all"); ValueError when they are not ones it could
    have sent (malformed, or more than MAX_RESEND messages)."""
    try:
        spans = orjson.loads(raw)
        ok = isinstance(spans, list) and all(
            isinstance(s, list)
            and len(s) == 4
            and isinstance(s[0], str)
            and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in s[1:])
            and s[2] <= s[3]
            for s in spans
        )
    except orjson.JSONDecodeError:
        ok = False
    if not ok:
        raise ValueError("the selection is not one this page made; open the page again")
    if span_count(spans) > MAX_RESEND:
        raise ValueError(f"at most {MAX_RESEND:,} messages are resent at once")
    return spans


async def read_spans(admin: AdminClient, topic: str, spans: list[list[Any]]) -> list[tuple[str, MessageExt]]:
    """The messages stored in ``spans`` of ``topic`` (``[broker, queueId, first, stop]``) with
    their broker's name, in that order (a message that expired since the spans were taken
    is simply not there)."""
    addrs = (await admin.topic_route(topic)).read_addrs()
    found: list[tuple[str, MessageExt]] = []
    for broker, queue_id, first, stop in spans:
        addr = addrs.get(broker)
        if addr is None:
            raise AdminError(f"broker {broker!r} of {topic!r} has no readable address now")
        got, _next = await admin.browse_queue(
            addr, MessageQueue(topic, broker, queue_id), first, stop, stop - first
        )
        found.extend((broker, m) for m in got)
    return found


async def ids_in(admin: AdminClient, topic: str, spans: list[list[Any]]) -> list[str]:
    """The offset msgIds of the messages stored in ``spans`` of ``topic``, in queue order."""
    return [m.msg_id for _broker, m in await read_spans(admin, topic, spans)]


def spans_at(stats: TopicStats, skip: int, size: int) -> list[list[Any]]:
    """The spans of ``size`` messages from position ``skip`` (0 = the oldest of the first
    queue), queue after queue: a queue's offsets have no gaps, so no reading is needed."""
    spans: list[list[Any]] = []
    for q in stats.queues:
        first = min(q.max_offset, q.min_offset + skip)
        skip -= first - q.min_offset
        stop = min(q.max_offset, first + size)
        if stop > first:
            spans.append([q.queue.broker_name, q.queue.queue_id, first, stop])
            size -= stop - first
    return spans


async def page_of(
    admin: AdminClient,
    group: str,
    kind: str,
    number: int,
    tag: str = "",
    key: str = "",
    size: int = PAGE_SIZE,
) -> DeadLetterPage:
    """Page ``number`` (from 1) of every stored DLQ (or retry) message of the group, oldest
    first, with the total from the broker's offsets, the positions shown ("1–100"), and the
    spans of "select all".  ``tag`` and ``key`` narrow the rows of the page (not the total).

    A group that never dead-lettered has no topic: ``never`` is set and the page is empty.
    """
    topic = topic_of(group, kind)
    base: PageBase = {"group": group, "kind": kind, "topic": topic, "pageSize": size, "tag": tag, "key": key}
    stats = await stats_or_none(admin, topic)
    if stats is None:
        return {
            **base,
            "messages": [],
            "total": 0,
            "page": 1,
            "pages": 1,
            "first": 0,
            "last": 0,
            "spans": [],
            "never": True,
            "selectable": 0,
        }
    total = stats.total_messages
    pages = max(1, -(-total // size))
    number = min(max(1, number), pages)
    skip = (number - 1) * size
    rows: list[MessageSummary] = []
    for broker, msg in await read_spans(admin, topic, spans_at(stats, skip, size)) if total else []:
        rows.append({**messages.summary(msg), "brokerName": broker})
    spans = spans_of(stats)
    return {
        **base,
        "never": False,
        "messages": [m for m in rows if matches(m, tag, key)],
        "total": total,
        "page": number,
        "pages": pages,
        "first": skip + 1 if rows else 0,
        "last": skip + len(rows),
        "spans": spans,
        "selectable": span_count(spans),
    }
