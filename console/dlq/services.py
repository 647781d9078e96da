"""A group's dead letters and retries: browse with filters, export, and the resend task's input."""

from __future__ import annotations

import base64
import csv
import io
from typing import Any

import orjson

from broker_core.client.admin import AdminClient
from broker_core.errors import AdminError
from broker_core.remoting.codes import ResponseCode
from broker_core.topics import dlq_topic, retry_topic
from console.messages import services as messages

EXPORT_MAX = 10_000


def topic_of(group: str, kind: str) -> str:
    return dlq_topic(group) if kind == "dlq" else retry_topic(group)


def matches(row: dict[str, Any], tag: str, key: str) -> bool:
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
) -> dict[str, Any]:
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
        never = {"messages": [], "cursor": None, "truncated": False, "never": True}
        return {**never, "group": group, "kind": kind, "topic": topic_of(group, kind)}
    page["messages"] = [m for m in page["messages"] if matches(m, tag, key)]
    return {**page, "group": group, "kind": kind, "topic": topic_of(group, kind), "never": False}


async def export_rows(
    admin: AdminClient, group: str, kind: str, begin: int, end: int
) -> tuple[list[dict], bool]:
    """Up to EXPORT_MAX messages with their bodies and properties; True when more were left."""
    topic = topic_of(group, kind)
    rows: list[dict[str, Any]] = []
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


def as_jsonl(rows: list[dict[str, Any]]) -> bytes:
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


def as_csv(rows: list[dict[str, Any]]) -> bytes:
    out = io.StringIO()
    writer = csv.DictWriter(out, CSV_COLUMNS, extrasaction="ignore")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode("utf-8")
